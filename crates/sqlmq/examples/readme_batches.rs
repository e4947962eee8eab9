//! The code of the guide's page docs/guide/src/workflows.md, verbatim (see `readme_library.rs` for why).
//!
//! Run: `cargo run -p sqlmq --example readme_batches`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It sends a batch of three
//! thumbnails whose last ack sends the email, and a four-step workflow, then runs a worker that
//! handles them until Ctrl-C or SIGTERM.

mod common;

use sqlmq::{Client, Outcome, QueueConfig, Worker};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    for queue in ["thumbnails", "emails", "jobs"] {
        client.create_queue(queue, QueueConfig::default()).await?;
    }
    readme(client).await
}

/// The guide's block, with the `client`, `Worker` and `Outcome` of the blocks before it. Not
/// formatted: it must stay identical to the guide's text.
#[rustfmt::skip]
async fn readme(client: Client) -> anyhow::Result<()> {
    use sqlmq::Message;
    use sqlmq::flow::Batch;

    // Email the user once every thumbnail is made: the callback is sent exactly once, in the
    // transaction of the ack that finishes the batch.
    let mut album = Batch::new().on_success("emails", Message::new(r#"{"to":"ann@example.com"}"#));
    for photo in ["beach.jpg", "dunes.jpg", "pier.jpg"] {
        album = album.add("thumbnails", Message::new(photo));
    }
    let created = client.create_batch(album).await?;

    // A workflow: each step runs once the steps it names are acked, and reads their results.
    let report = Batch::new()
        .step("fetch", "jobs", Message::new("fetch"), &[])
        .step("left", "jobs", Message::new("left"), &["fetch"])
        .step("right", "jobs", Message::new("right"), &["fetch"])
        .step("join", "jobs", Message::new("join"), &["left", "right"]);
    client.create_batch(report).await?;

    Worker::builder(&client)
        .queue_raw("thumbnails", |d: sqlmq::Delivery, _ctx| async move {
            println!("thumbnail of {}", String::from_utf8_lossy(&d.body));
            Ok::<_, String>(Outcome::Done)
        })
        .queue_raw("jobs", |d: sqlmq::Delivery, ctx: sqlmq::JobContext| async move {
            let inputs = ctx.dependency_results().await.map_err(|e| e.to_string())?;
            println!("{} read {} input(s)", String::from_utf8_lossy(&d.body), inputs.len());
            ctx.ack_with_result(d.body).await.map_err(|e| e.to_string())?; // what dependants read
            Ok::<_, String>(Outcome::Done)
        })
        .queue_raw("emails", |d: sqlmq::Delivery, _ctx| async move {
            println!("album {} is ready: mailing {}", d.headers["sqlmq-batch"], String::from_utf8_lossy(&d.body));
            Ok::<_, String>(Outcome::Done)
        })
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;
    println!("{:?}", client.batch(created.id).await?.state);
    Ok(())
}
