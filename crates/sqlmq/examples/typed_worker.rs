//! A typed job and the worker runtime: a `Job` type (serde), `enqueue`, a handler that returns
//! an `Outcome` (here one `Outcome::Retry`), and a worker that stops once the queue is drained
//! and reports what it did.
//!
//! Run: `cargo run -p sqlmq --example typed_worker`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the queue
//! `example.resize` and empties it first, so every run handles the same five jobs.

mod common;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlmq::{Job, JobContext, Outcome, QueueConfig, Worker};

/// A job: its body is this struct as JSON, tagged with its `NAME`.
#[derive(Debug, Serialize, Deserialize)]
struct Resize {
    image: u64,
    width: u32,
}

impl Job for Resize {
    const NAME: &'static str = "resize";
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let queue = client
        .create_queue("example.resize", QueueConfig::default().max_attempts(3))
        .await?;
    queue.purge().await?;

    for image in 1..=5 {
        queue.enqueue(&Resize { image, width: 640 }).await?; // or enqueue_in(&mut tx, …)
    }

    let report = Worker::builder(&client)
        .queue(
            "example.resize",
            |job: Resize, ctx: JobContext| async move {
                if job.image == 3 && ctx.attempt() == 1 {
                    // A failed attempt, retried after `after` (and dead-lettered after the
                    // queue's max attempts). No wait here: `stop_when_drained` stops as soon as
                    // nothing is ready, so a retry scheduled for later would wait for the next run.
                    return Ok::<_, anyhow::Error>(Outcome::Retry {
                        after: Duration::ZERO,
                        reason: "thumbnail service busy".into(),
                    });
                }
                println!(
                    "resized image {} to {} px (attempt {})",
                    job.image,
                    job.width,
                    ctx.attempt()
                );
                Ok(Outcome::Done)
            },
        )
        .concurrency(2)
        .stop_when_drained()
        // Ctrl-C or SIGTERM stops it too: in-flight jobs finish first.
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;

    println!(
        "worker report: {} acked, {} retried, {} dead-lettered",
        report.acked, report.retried, report.dead_lettered
    );
    Ok(())
}
