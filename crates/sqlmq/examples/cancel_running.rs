//! Cancelling a running job and watching its progress (the README's "Cancelling running jobs"
//! and the guide's "Running jobs", verbatim in `export` and `send_timed`): a long export
//! reports how far it got and stops when its message is cancelled; a second one, sent with a
//! run timeout shorter than it takes, is stopped by the worker and becomes a dead letter. The
//! program plays both sides: it runs the worker, watches the progress as `sqlmq show` or the
//! dashboard would, cancels the job halfway as an operator would, and prints the worker's
//! report.
//!
//! Run: `cargo run -p sqlmq --example cancel_running`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the queue
//! `example.exports` (emptied first).

mod common;

use std::time::Duration;

use sqlmq::worker::CancellationToken;
use sqlmq::{Client, JobContext, QueueConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let exports = client
        .create_queue("example.exports", QueueConfig::default())
        .await?;
    exports.purge().await?;
    let sent = exports.enqueue(&Export { pages: 200 }).await?;
    let stop = CancellationToken::new();
    let worker = tokio::spawn(export(client.clone(), stop.clone()));

    // Watch it run, then cancel it halfway (from this process here; any process, the CLI's
    // `sqlmq cancel example.exports ID` or the dashboard's button does the same).
    loop {
        if let Some(p) = exports.progress(sent.id).await? {
            println!("progress: {}", p.value);
            if p.value["done"].as_u64() >= Some(100) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("cancel: {:?}", exports.cancel(sent.id).await?);
    while exports.message(sent.id).await?.is_some() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // An export of 4 s that may run 1 s: stopped, and a dead letter with the reason.
    send_timed(&exports).await?;
    let dead = loop {
        if let Some(dead) = exports.dead_letters(1).await?.pop() {
            break dead;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let reason = dead.errors.last().map(|e| e.error.as_str());
    println!("dead letter: {} ({reason:?})", dead.id);
    exports.purge_dead_letters().await?;
    stop.cancel();
    let report = worker.await??;
    println!(
        "worker report: {} acked, {} cancelled, {} dead-lettered",
        report.acked, report.cancelled, report.dead_lettered
    );
    Ok(())
}

/// The guide's block on deadlines. Not formatted: it must stay identical to the guide's text.
#[rustfmt::skip]
async fn send_timed(exports: &sqlmq::Queue) -> anyhow::Result<()> {
    use std::time::{Duration, SystemTime};
    use sqlmq::Message;

    // Not started after a minute; each attempt stopped after a second (`ctx.cancelled()`
    // fires, the handler is dropped): then a dead letter, never retried.
    let timed = Message::job(&Export { pages: 200 })?
        .deadline(SystemTime::now() + Duration::from_secs(60))
        .run_timeout(Duration::from_secs(1));
    exports.send(timed).await?;
    Ok(())
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Export {
    pages: u32,
}

impl sqlmq::Job for Export {
    const NAME: &'static str = "export";
}

/// The guide's block, with the `client` of the program. Not formatted: it must stay identical
/// to the guide's text.
#[rustfmt::skip]
async fn export(client: Client, stop: CancellationToken) -> anyhow::Result<sqlmq::worker::WorkerReport> {
    use std::time::Duration;
    use sqlmq::{Outcome, Worker};

    let report = Worker::builder(&client)
        .queue("example.exports", |export: Export, ctx: JobContext| async move {
            for page in 1..=export.pages {
                tokio::select! {
                    // Cancelled (`Queue::cancel`, `sqlmq cancel`, the dashboard): stop here.
                    // Whatever this returns, the message is removed, never retried.
                    () = ctx.cancelled() => return Ok(Outcome::Done),
                    () = tokio::time::sleep(Duration::from_millis(20)) => {} // one page of work
                }
                // Written at most once a second; shown by `sqlmq show` and the dashboard.
                ctx.progress(serde_json::json!({"done": page, "of": export.pages})).await?;
            }
            Ok::<_, sqlmq::Error>(Outcome::Done)
        })
        .run(stop)
        .await?;
    Ok(report)
}
