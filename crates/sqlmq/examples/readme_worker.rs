//! The code of the guide's page docs/guide/src/workers.md, verbatim (see `readme_library.rs` for why). For a
//! version that stops on its own, see `typed_worker.rs`.
//!
//! Run: `cargo run -p sqlmq --example readme_worker`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the queue
//! `emails` and the table `mail_log` the guide's code uses, then works like a service: it runs
//! until Ctrl-C or SIGTERM and prints the worker's report.

mod common;

use sqlmq::QueueConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let emails = client
        .create_queue("emails", QueueConfig::default())
        .await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS mail_log (recipient VARCHAR(255) NOT NULL)")
        .execute(client.pool())
        .await?;
    readme(client, emails).await
}

/// The guide's block, with the `client` and `emails` of the block before it. Not formatted:
/// it must stay identical to the guide's text.
#[rustfmt::skip]
async fn readme(client: sqlmq::Client, emails: sqlmq::Queue) -> anyhow::Result<()> {
    use sqlmq::{Job, JobContext, Outcome, Worker};

    #[derive(serde::Serialize, serde::Deserialize)]
    struct SendEmail { to: String }
    impl Job for SendEmail { const NAME: &'static str = "send_email"; }

    emails.enqueue(&SendEmail { to: "a@example.com".into() }).await?; // or enqueue_in(&mut tx, …)

    let report = Worker::builder(&client)
        .queue("emails", |job: SendEmail, ctx: JobContext| async move {
            let mut tx = ctx.begin().await?;          // commits together with the ack
            sqlx::query("INSERT INTO mail_log (recipient) VALUES (?)").bind(&job.to).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok::<_, anyhow::Error>(Outcome::Done)     // or Retry { after, reason }, Snooze(d), DeadLetter(reason)
        })
        .concurrency(8)
        .run(sqlmq::worker::shutdown_on_signals())            // SIGTERM/Ctrl-C: finish in-flight work, then exit
        .await?;
    println!("{report:?}");
    Ok(())
}
