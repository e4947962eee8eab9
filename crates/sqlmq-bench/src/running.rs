//! `worker.running`: what control of running jobs costs and how fast a cancel arrives.
//!
//! - progress: a worker whose handlers each take three pages of [`PAGE`], reporting progress
//!   after every page (`JobContext::progress`), against the same worker whose handlers report
//!   nothing, in the same run;
//! - cancel: handlers that run until cancelled, each cancelled by another client
//!   (`Queue::cancel`): time from the cancel's commit to the handler's token fired (p50, p99).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use sqlmq::worker::CancellationToken;
use sqlmq::{JobContext, Message, MessageId, Outcome, QueueConfig, Worker};

use super::backend::Db;
use super::context::Ctx;
use super::durable::{ensure_whole, scaled, wait_for};
use super::measure::Latencies;
use super::outcome::Outcome as Ran;
use super::progress::Bar;
use super::queue::{POOL, with_client};
use super::report::Figure;
use super::track::Tracker;

/// One page of a handler's work.
const PAGE: Duration = Duration::from_millis(100);
/// Pages per message.
const PAGES: u32 = 3;
/// Handler slots of the progress figure's workers.
const SLOTS: usize = 64;
/// Messages of each progress figure (scaled by `--scale`).
const MESSAGES: u64 = 2_000;
/// Running handlers cancelled one by one (scaled), one cancel every [`CANCEL_GAP`].
const CANCELS: u64 = 100;
const CANCEL_GAP: Duration = Duration::from_millis(20);

/// `worker.running`.
pub async fn running<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let bar = ctx.bar("worker.running");
    let run = async {
        let plain = pages(ctx, &bar, false).await?;
        let reported = pages(ctx, &bar, true).await?;
        let cancel = cancels(ctx, &bar).await?;
        anyhow::Ok((plain, reported, cancel))
    }
    .await;
    bar.finish();
    let ((n, plain), (_, reported), cancel) = run?;
    let cancels = scaled(ctx, CANCELS, 5);
    let work = format!("{PAGES} pages of {PAGE:?} per message, {SLOTS} slots");
    Ok(Ran::Ran(vec![
        Figure::rate(
            "worker.running.plain",
            format!("sqlmq worker, {work}"),
            n,
            plain,
        )
        .note(format!("{n} messages; handlers that report no progress")),
        Figure::rate(
            "worker.running.progress",
            format!("sqlmq worker, {work}, progress after every page"),
            n,
            reported,
        )
        .against("worker.running.plain")
        .note(
            "the same worker and messages, each handler calling JobContext::progress every \
             100 ms (written at most once a second per job, cleared at its ack); ratio: \
             against the handlers that report nothing (aim ≥ 0.9)",
        ),
        Figure::latency(
            "worker.running.cancel",
            "cancel by another client → running handler's token fired",
            cancel.summary(),
        )
        .note(format!(
            "{cancels} handlers running until cancelled, one Queue::cancel from another \
             client every {CANCEL_GAP:?}, timed from the cancel's commit (aims p50 ≤ 50 ms \
             with notifications, ≤ 1 s without)"
        )),
    ]))
}

/// [`MESSAGES`] messages through a worker whose handlers take [`PAGES`] pages each, reporting
/// progress after each when `report`. Returns the messages and the worker's time.
async fn pages<B: Db>(ctx: &Ctx<B>, bar: &Bar, report: bool) -> Result<(u64, Duration)> {
    let (b, n) = (bar.clone(), scaled(ctx, MESSAGES, SLOTS as u64));
    let name = if report { "run_p" } else { "run_n" };
    with_client(ctx, name, POOL, |client| async move {
        let queue = client.create_queue(name, QueueConfig::default()).await?;
        let sent: Vec<MessageId> = queue
            .send_batch((0..n).map(|i| Message::new(i.to_string())).collect())
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect();
        b.phase(
            if report {
                "handlers reporting progress"
            } else {
                "handlers reporting nothing"
            },
            n,
        );
        let done = Arc::new(Tracker::new(n));
        let (d, bb) = (done.clone(), b.clone());
        let handler = move |m: sqlmq::Delivery, ctx: JobContext<B>| {
            let (done, bb) = (d.clone(), bb.clone());
            async move {
                for page in 1..=PAGES {
                    tokio::time::sleep(PAGE).await;
                    if report {
                        ctx.progress(serde_json::json!({"done": page, "of": PAGES}))
                            .await?;
                    }
                }
                done.record([m.id]);
                bb.set(done.delivered());
                Ok::<_, sqlmq::Error>(Outcome::Done)
            }
        };
        let started = Instant::now();
        Worker::builder(&client)
            .queue_raw(name, handler)
            .concurrency(SLOTS)
            .stop_when_drained()
            .run(CancellationToken::new())
            .await?;
        let elapsed = started.elapsed();
        ensure_whole(done.check(&sent))?;
        Ok((n, elapsed))
    })
    .await
}

/// [`CANCELS`] handlers running until cancelled, cancelled one by one by another client.
async fn cancels<B: Db>(ctx: &Ctx<B>, bar: &Bar) -> Result<Latencies> {
    let (b, runs) = (bar.clone(), scaled(ctx, CANCELS, 5));
    with_client(ctx, "run_c", POOL, |client| async move {
        let queue = client.create_queue("run_c", QueueConfig::default()).await?;
        let started = Arc::new(Tracker::new(runs));
        let fired: Arc<Mutex<HashMap<MessageId, Instant>>> = Arc::default();
        let stop = CancellationToken::new();
        let (s, f, bb) = (started.clone(), fired.clone(), b.clone());
        let worker = tokio::spawn(
            Worker::builder(&client)
                .queue_raw("run_c", move |m: sqlmq::Delivery, ctx: JobContext<B>| {
                    let (started, fired, bb) = (s.clone(), f.clone(), bb.clone());
                    async move {
                        started.record([m.id]);
                        bb.set(started.delivered());
                        tokio::select! {
                            () = ctx.cancelled() => {
                                fired.lock().expect("poisoned").insert(m.id, Instant::now());
                            }
                            () = tokio::time::sleep(Duration::from_secs(600)) => {}
                        }
                        Ok::<_, sqlmq::Error>(Outcome::Done)
                    }
                })
                .concurrency(runs as usize)
                .run(stop.clone()),
        );
        let sent: Vec<MessageId> = queue
            .send_batch((0..runs).map(|i| Message::new(i.to_string())).collect())
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect();
        b.phase("handlers running", runs);
        wait_for(&started, runs, Duration::from_secs(60)).await?;
        // Past their first poll: every token is registered with the worker's watcher.
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.phase("cancels from another client → token fired", runs);
        let (canceller, other) = super::worker::producer(ctx, &client, "run_c").await?;
        let mut committed = HashMap::new();
        for (i, id) in sent.iter().enumerate() {
            other.cancel(*id).await?;
            committed.insert(*id, Instant::now());
            b.set(i as u64 + 1);
            tokio::time::sleep(CANCEL_GAP).await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while fired.lock().expect("poisoned").len() < sent.len() {
            anyhow::ensure!(Instant::now() < deadline, "tokens not fired");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.cancel();
        let report = worker.await??;
        anyhow::ensure!(
            report.cancelled == runs,
            "{} of {runs} counted cancelled",
            report.cancelled
        );
        canceller.pool().close().await;
        let latency = Latencies::default();
        for (id, at) in fired.lock().expect("poisoned").iter() {
            latency.record(at.saturating_duration_since(committed[id]));
        }
        Ok(latency)
    })
    .await
}
