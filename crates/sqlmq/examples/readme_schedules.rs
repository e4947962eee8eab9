//! The code of the guide's page docs/guide/src/schedules.md, verbatim (see `readme_library.rs` for why).
//!
//! Run: `cargo run -p sqlmq --example readme_schedules`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It declares a nightly
//! report and a heartbeat every 10 s on the queue `reports`, then runs a worker that handles
//! them (and fires them) until Ctrl-C or SIGTERM.

mod common;

use sqlmq::{Client, Outcome, Worker};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    client
        .create_queue("reports", sqlmq::QueueConfig::default())
        .await?;
    readme(client).await
}

/// The guide's block, with the `client`, `Worker` and `Outcome` of the blocks before it. Not
/// formatted: it must stay identical to the guide's text.
#[rustfmt::skip]
async fn readme(client: Client) -> anyhow::Result<()> {
    use std::time::Duration;
    use sqlmq::schedule::{CatchUp, ScheduleConfig, ScheduleTarget, Timing};

    // Declared at every start-up: the same timing keeps its next fire time, so nothing is lost.
    let nightly = ScheduleConfig::new(Timing::cron("30 2 * * *", "Europe/Paris"), ScheduleTarget::Queue("reports".into()))
        .body(r#"{"report":"daily"}"#)
        .catch_up(CatchUp::One); // down at 02:30? send it once when back
    client.create_schedule("daily-report", nightly).await?;
    let beat = ScheduleConfig::new(Timing::Every(Duration::from_secs(10)), ScheduleTarget::Queue("reports".into()));
    client.create_schedule("heartbeat", beat).await?;

    // Any worker (or sqlmq consume, subscribe, serve) fires what is due: each fire time once.
    Worker::builder(&client)
        .queue_raw("reports", |d: sqlmq::Delivery, _ctx| async move {
            println!("{} fired for {}", d.headers["sqlmq-schedule"], d.headers["sqlmq-fire-time"]);
            Ok::<_, String>(Outcome::Done)
        })
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;
    Ok(())
}
