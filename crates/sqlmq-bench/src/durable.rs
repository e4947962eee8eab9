//! `worker.durable`: what durable execution costs and how fast it resumes.
//!
//! - steps: `worker.e2e`'s worker and pre-fill, its handler recording three steps
//!   (`JobContext::step`) per message, against `worker.e2e` of the same run;
//! - sleep: runs that sleep one second (`JobContext::sleep`), resumed by the same worker: how
//!   long past its due time each resumes (p50, p99);
//! - event: runs suspended in `wait_for_event`, each woken by an emit from another client: emit
//!   → handler resumed (p50, p99);
//! - asleep: the claim latency of ready work (claims of 10, each acked) in a queue where many
//!   100 000 runs sleep, against the same claims where none does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use sqlmq::worker::CancellationToken;
use sqlmq::{Client, JobContext, Message, MessageId, Outcome, QueueConfig, Worker};

use super::backend::Db;
use super::context::Ctx;
use super::measure::Latencies;
use super::outcome::Outcome as Ran;
use super::progress::Bar;
use super::queue::{POOL, with_client};
use super::report::Figure;
use super::track::Tracker;
use super::worker::{E2E_BATCH, E2E_CONCURRENCY, Noop};

/// How long each run of the sleep figure sleeps.
const NAP: Duration = Duration::from_secs(1);
/// Runs of the sleep and event figures (scaled by `--scale`).
const RUNS: u64 = 200;
/// Ready messages behind the sleeping runs, timed a claim of [`CLAIM`] at a time (scaled).
const READY: u64 = 10_000;
const CLAIM: usize = 10;
/// Runs asleep behind the ready messages: the aim's count (scaled).
const SLEEPERS: u64 = 100_000;

/// `n` scaled by `--scale`, at least `min`.
pub(crate) fn scaled<B: Db>(ctx: &Ctx<B>, n: u64, min: u64) -> u64 {
    ((n as f64 * ctx.plan.scale).round() as u64).max(min)
}

/// `worker.durable`.
pub async fn durable<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let bar = ctx.bar("worker.durable");
    let run = async {
        let steps = steps(ctx, &bar).await?;
        let sleep = sleep(ctx, &bar).await?;
        let event = event(ctx, &bar).await?;
        // The aim's count, quick or not (putting them to sleep is what takes the time).
        let sleepers = scaled(ctx, SLEEPERS, 100);
        let none = claims(ctx, &bar, 0).await?;
        let asleep = claims(ctx, &bar, sleepers).await?;
        anyhow::Ok((steps, sleep, event, none, asleep, sleepers))
    }
    .await;
    bar.finish();
    let ((n, elapsed, check), sleep, event, none, asleep, sleepers) = run?;
    let (runs, ready) = (scaled(ctx, RUNS, 10), scaled(ctx, READY, 100));
    Ok(Ran::Ran(vec![
        Figure::rate(
            "worker.durable.steps",
            format!("sqlmq worker, 3 recorded steps per message, {E2E_CONCURRENCY} slots"),
            n,
            elapsed,
        )
        .against("worker.e2e")
        .checked(check)
        .note(
            "worker.e2e's worker and pre-fill; the handler reads its run's journal once and \
             records three steps, each durable before the handler goes on: the records of \
             concurrent handlers share a transaction (the leases read locked, one multi-row \
             insert), as do the acks that forget the journals; ratio: against worker.e2e \
             (aim ≥ 0.5)",
        ),
        Figure::latency(
            "worker.durable.sleep",
            format!("durable sleep of {NAP:?}: resumed past its due time"),
            sleep.summary(),
        )
        .note(format!(
            "{runs} runs, each sleeping {NAP:?} (its message delayed, its slot given back), \
             resumed by the same worker: time from the due time to the handler past its \
             sleep (aims p50 ≤ 50 ms, p99 ≤ 500 ms with notifications)"
        )),
        Figure::latency(
            "worker.durable.event",
            "event emitted by another client → waiting run resumed",
            event.summary(),
        )
        .note(format!(
            "{runs} runs suspended in wait_for_event, one emit every 20 ms from another \
             client (aim p50 ≤ 50 ms with notifications)"
        )),
        Figure::latency(
            "worker.durable.claim.none",
            format!("claim of {CLAIM} ready messages, no run asleep"),
            none.summary(),
        )
        .note(format!(
            "{ready} ready messages, claims of {CLAIM} (each acked after), one consumer"
        )),
        Figure::latency(
            "worker.durable.claim.asleep",
            format!("claim of {CLAIM} ready messages, {sleepers} runs asleep"),
            asleep.summary(),
        )
        .against("worker.durable.claim.none")
        .note(format!(
            "the same claims in a queue where {sleepers} runs sleep for an hour (each with \
             its journal); ratio: against the claims with none asleep (aim ≤ 1.2× cost)"
        )),
    ]))
}

/// The three-step worker: `worker.e2e`'s pre-fill and worker, each handler recording three
/// steps. Returns the messages, the time from the worker's start to its stop, the check.
async fn steps<B: Db>(ctx: &Ctx<B>, bar: &Bar) -> Result<(u64, Duration, super::track::Check)> {
    let n = ctx.plan.worker_messages;
    let b = bar.clone();
    with_client(ctx, "dur", POOL, |client| async move {
        let queue = client.create_queue("dur", QueueConfig::default()).await?;
        b.phase("pre-fill (send_batch)", n);
        let mut ids = Vec::with_capacity(n as usize);
        while (ids.len() as u64) < n {
            let take = 10_000.min(n - ids.len() as u64);
            let batch = (0..take)
                .map(|i| Message::job(&Noop(ids.len() as u64 + i)))
                .collect::<sqlmq::Result<Vec<_>>>()?;
            ids.extend(queue.send_batch(batch).await?.into_iter().map(|s| s.id));
            b.set(ids.len() as u64);
        }
        b.phase("worker, 3 recorded steps per message", n);
        let tracker = Arc::new(Tracker::new(n));
        let (t, bb) = (Arc::clone(&tracker), b.clone());
        let handler = move |job: Noop, ctx: JobContext<B>| {
            let (t, bb) = (Arc::clone(&t), bb.clone());
            async move {
                let a: u64 = ctx
                    .step("a", || async { Ok::<_, Infallible>(job.0) })
                    .await?;
                let b: u64 = ctx
                    .step("b", || async { Ok::<_, Infallible>(a + 1) })
                    .await?;
                ctx.step("c", || async { Ok::<_, Infallible>(b + 1) })
                    .await?;
                t.record([ctx.id()]);
                bb.set(t.delivered());
                Ok::<_, sqlmq::Error>(Outcome::Done)
            }
        };
        let started = Instant::now();
        Worker::builder(&client)
            .queue("dur", handler)
            .concurrency(E2E_CONCURRENCY)
            .max_batch(E2E_BATCH)
            .stop_when_drained()
            .run(CancellationToken::new())
            .await?;
        Ok((n, started.elapsed(), tracker.check(&ids)))
    })
    .await
}

/// A worker on queue `name` of `client` running `handler`, stopped when `stop` is.
fn spawn_worker<B: Db, F, Fut>(
    client: &Client<B>,
    name: &str,
    stop: &CancellationToken,
    handler: F,
) -> tokio::task::JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>>
where
    F: Fn(sqlmq::Delivery, JobContext<B>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Outcome, sqlmq::Error>> + Send + 'static,
{
    tokio::spawn(
        Worker::builder(client)
            .queue_raw(name, handler)
            .concurrency(64)
            .run(stop.clone()),
    )
}

/// [`RUNS`] runs sleeping [`NAP`]: how late each resumes.
async fn sleep<B: Db>(ctx: &Ctx<B>, bar: &Bar) -> Result<Latencies> {
    let (b, runs) = (bar.clone(), scaled(ctx, RUNS, 10));
    with_client(ctx, "nap", POOL, |client| async move {
        let queue = client.create_queue("nap", QueueConfig::default()).await?;
        b.phase("durable sleeps", runs);
        let due: Arc<Mutex<HashMap<MessageId, Instant>>> = Arc::default();
        let late = Arc::new(Latencies::default());
        let resumed = Arc::new(Tracker::new(runs));
        let stop = CancellationToken::new();
        let (d, l, r, bb) = (due.clone(), late.clone(), resumed.clone(), b.clone());
        let worker = spawn_worker(&client, "nap", &stop, move |m, ctx| {
            let (due, late, resumed, bb) = (d.clone(), l.clone(), r.clone(), bb.clone());
            async move {
                due.lock()
                    .expect("poisoned")
                    .entry(m.id)
                    .or_insert_with(|| Instant::now() + NAP);
                ctx.sleep(NAP).await?;
                let at = due.lock().expect("poisoned")[&m.id];
                late.record(Instant::now().saturating_duration_since(at));
                resumed.record([m.id]);
                bb.set(resumed.delivered());
                Ok(Outcome::Done)
            }
        });
        let sent: Vec<MessageId> = queue
            .send_batch((0..runs).map(|i| Message::new(i.to_string())).collect())
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect();
        wait_for(&resumed, runs, Duration::from_secs(120)).await?;
        stop.cancel();
        worker.await??;
        ensure_whole(resumed.check(&sent))?;
        Ok(Arc::try_unwrap(late).unwrap_or_default())
    })
    .await
}

/// [`RUNS`] runs waiting for an event each, woken one by one by emits from another client.
async fn event<B: Db>(ctx: &Ctx<B>, bar: &Bar) -> Result<Latencies> {
    let (b, runs) = (bar.clone(), scaled(ctx, RUNS, 10));
    with_client(ctx, "evt", POOL, |client| async move {
        let queue = client.create_queue("evt", QueueConfig::default()).await?;
        let emitted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let latency = Arc::new(Latencies::default());
        let resumed = Arc::new(Tracker::new(runs));
        let stop = CancellationToken::new();
        let (e, l, r, bb) = (emitted.clone(), latency.clone(), resumed.clone(), b.clone());
        let worker = spawn_worker(&client, "evt", &stop, move |m, ctx| {
            let (emitted, latency, resumed, bb) = (e.clone(), l.clone(), r.clone(), bb.clone());
            async move {
                let name = String::from_utf8_lossy(&m.body).into_owned();
                let _: Option<u64> = ctx.wait_for_event(&name, Duration::from_secs(600)).await?;
                if let Some(at) = emitted.lock().expect("poisoned").get(&name) {
                    latency.record(at.elapsed());
                }
                resumed.record([m.id]);
                bb.set(resumed.delivered());
                Ok(Outcome::Done)
            }
        });
        let names: Vec<String> = (0..runs).map(|i| format!("bench-event-{i}")).collect();
        let sent: Vec<MessageId> = queue
            .send_batch(names.iter().map(|n| Message::new(n.clone())).collect())
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect();
        b.phase("runs suspended in wait_for_event", runs);
        let deadline = Instant::now() + Duration::from_secs(120);
        while client.awaited_events(runs as usize + 1).await?.len() < runs as usize {
            anyhow::ensure!(Instant::now() < deadline, "the runs did not all wait");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        b.phase("emits from another client → resumed", runs);
        let (emitter, _) = super::worker::producer(ctx, &client, "evt").await?;
        for (i, name) in names.iter().enumerate() {
            emitted
                .lock()
                .expect("poisoned")
                .insert(name.clone(), Instant::now());
            emitter.emit_event(name, &i).await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        wait_for(&resumed, runs, Duration::from_secs(60)).await?;
        stop.cancel();
        worker.await??;
        emitter.pool().close().await;
        ensure_whole(resumed.check(&sent))?;
        Ok(Arc::try_unwrap(latency).unwrap_or_default())
    })
    .await
}

/// Claims of [`CLAIM`] among [`READY`] ready messages, timed, in a queue where `sleepers` runs
/// sleep for an hour.
async fn claims<B: Db>(ctx: &Ctx<B>, bar: &Bar, sleepers: u64) -> Result<Latencies> {
    let (b, ready) = (bar.clone(), scaled(ctx, READY, 100));
    with_client(ctx, "zzz", POOL, |client| async move {
        let queue = client.create_queue("zzz", QueueConfig::default()).await?;
        if sleepers > 0 {
            b.phase("runs put to sleep", sleepers);
            let mut sent = 0;
            while sent < sleepers {
                let take = 10_000.min(sleepers - sent);
                queue
                    .send_batch((0..take).map(|i| Message::new(i.to_string())).collect())
                    .await?;
                sent += take;
            }
            let asleep = Arc::new(Tracker::new(sleepers));
            let stop = CancellationToken::new();
            let (a, bb) = (asleep.clone(), b.clone());
            let worker = spawn_worker(&client, "zzz", &stop, move |m, ctx| {
                let (asleep, bb) = (a.clone(), bb.clone());
                async move {
                    ctx.step("before", || async { Ok::<_, Infallible>(1) })
                        .await?;
                    asleep.record([m.id]);
                    bb.set(asleep.delivered());
                    ctx.sleep(Duration::from_secs(3600)).await?;
                    Ok(Outcome::Done)
                }
            });
            let timeout = Duration::from_secs(60) + Duration::from_millis(sleepers * 10);
            wait_for(&asleep, sleepers, timeout).await?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while queue.stats().await?.in_flight > 0 {
                anyhow::ensure!(Instant::now() < deadline, "runs still in flight");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            stop.cancel();
            worker.await??;
        }
        b.phase("ready messages sent", ready);
        queue
            .send_batch((0..ready).map(|i| Message::new(i.to_string())).collect())
            .await?;
        let samples = ready / CLAIM as u64;
        b.phase(
            &format!("claims of {CLAIM}, {sleepers} runs asleep"),
            samples,
        );
        let latency = Latencies::default();
        for i in 0..samples {
            let started = Instant::now();
            let got = queue.receive(CLAIM, Duration::from_secs(60)).await?;
            latency.record(started.elapsed());
            let receipts: Vec<_> = got.iter().map(sqlmq::Delivery::receipt).collect();
            queue.ack_batch(&receipts).await?;
            b.set(i + 1);
        }
        Ok(latency)
    })
    .await
}

/// Every run resumed once.
pub(crate) fn ensure_whole(check: super::track::Check) -> Result<()> {
    anyhow::ensure!(
        check.duplicates + check.losses + check.unexpected == 0,
        "runs lost or resumed twice: {} lost, {} twice",
        check.losses,
        check.duplicates + check.unexpected
    );
    Ok(())
}

/// Wait until `tracker` has seen `n` messages, at most `limit`.
pub(crate) async fn wait_for(tracker: &Tracker<MessageId>, n: u64, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    while tracker.delivered() < n {
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {n} within {limit:?}",
            tracker.delivered()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
