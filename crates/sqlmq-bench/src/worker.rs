//! The worker runtime's scenarios.
//!
//! - `worker.e2e`: a pre-filled queue drained by one worker process running a no-op typed
//!   handler, until the worker stops on its own (all acks flushed), against the raw `receive`/
//!   `ack_batch` loop of `queue.drain`; then the bench's peak memory.
//! - `worker.limits`: the same on a queue with `max_in_flight` and `rate_limit` set far above
//!   anything it reaches, against `worker.e2e`: what the limited queue's gate costs the worker
//!   when it never shuts.
//! - `worker.latency`: send → handler start, busy (a producer at a moderate rate) and after the
//!   worker has been idle (a minute in a full run). Messages come through another `Client`, so
//!   only polling can wake the worker, as for a message sent by another process.
//! - `worker.idle`: statements per second an idle worker process costs the server, and the
//!   trade-off table: for each poll ceiling, the idle statements/s and the latency of a message
//!   sent to the idle worker. Where statements cannot be counted (SQLite: no server), the
//!   latencies are measured and the statement figures reported as not available.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sqlmq::worker::{CancellationToken, WorkerReport};
use sqlmq::{
    Client, Delivery, Job, JobContext, Message, MessageId, Outcome, Queue, QueueConfig, Worker,
};
use tokio::time::MissedTickBehavior;

use super::args::BUSY_RATE_PER_S;
use super::backend::{Db, count_statements, not_available};
use super::context::Ctx;
use super::measure::{Latencies, Summary, peak_rss_bytes};
use super::outcome::Outcome as Ran;
use super::progress::Bar;
use super::queue::{AbortOnDrop, POOL, UNBINDING_NOTE, unbinding_limits, with_client};
use super::report::{Figure, Unavailable, Unit};
use super::track::{Check, Tracker};

/// Handlers running at once in the throughput scenario: two full batches per claim loop, so
/// that a loop's next claim is in flight while its previous batch is handled.
pub(crate) const E2E_CONCURRENCY: usize =
    2 * E2E_BATCH * sqlmq::worker::WorkerBuilder::DEFAULT_CLAIMERS;
/// Messages per claim in the throughput scenario (as `queue.drain`'s consumers).
pub(crate) const E2E_BATCH: usize = 100;
/// Pre-fill batch (not measured).
const FILL_BATCH: u64 = 10_000;
/// The poll ceiling the library ships with (the idle figure is taken at it).
pub(crate) const DEFAULT_CEILING: Duration = sqlmq::worker::WorkerBuilder::DEFAULT_POLL_CEILING;

/// The no-op job of the throughput scenario.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Noop(pub(crate) u64);

impl Job for Noop {
    const NAME: &'static str = "bench_noop";
}

/// `worker.e2e`.
pub async fn e2e<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let n = ctx.plan.worker_messages;
    let bar = ctx.bar("worker.e2e");
    let run = e2e_run(
        ctx,
        &bar,
        "worker, no-op typed handler",
        QueueConfig::default(),
    )
    .await;
    bar.finish();
    let (elapsed, check, report) = run?;
    let mut figures = vec![
        Figure::rate(
            "worker.e2e",
            format!("sqlmq worker, no-op typed handler, {E2E_CONCURRENCY} slots"),
            n,
            elapsed,
        )
        .against("queue.drain.8")
        .checked(check)
        .note(format!(
            "one worker process, {} claim loops sharing {E2E_CONCURRENCY} slots, claims of up to \
             {E2E_BATCH}, batched acks; timed until the worker stopped on its own with every ack \
             flushed ({} acked)",
            sqlmq::worker::WorkerBuilder::DEFAULT_CLAIMERS,
            report.acked
        )),
    ];
    if let Some(bytes) = peak_rss_bytes() {
        figures.push(
            Figure::new(
                "worker.memory.peak",
                "bench peak RSS after the worker",
                bytes as f64 / f64::from(1u32 << 20),
                Unit::MiB,
            )
            .note("VmHWM of the whole bench process, all scenarios so far included"),
        );
    }
    Ok(Ran::Ran(figures))
}

/// One run of `worker.e2e`: `ctx.plan.worker_messages` no-op jobs pre-filled (not timed) into
/// a fresh queue created with `config`, then drained by one worker with a no-op typed handler
/// until it stops on its own; `phase` names it on the progress bar. Returns the time from the
/// worker's start to its stop, the delivery check and the worker's report.
async fn e2e_run<B: Db>(
    ctx: &Ctx<B>,
    bar: &Bar,
    phase: &str,
    config: QueueConfig,
) -> Result<(Duration, Check, WorkerReport)> {
    let n = ctx.plan.worker_messages;
    let b = bar.clone();
    with_client(ctx, "wrk", POOL, |client| async move {
        let queue = client.create_queue("wrk", config).await?;
        b.phase("pre-fill (send_batch)", n);
        let mut ids = Vec::with_capacity(n as usize);
        while (ids.len() as u64) < n {
            let take = FILL_BATCH.min(n - ids.len() as u64);
            let batch = (0..take)
                .map(|i| Message::job(&Noop(ids.len() as u64 + i)))
                .collect::<sqlmq::Result<Vec<_>>>()?;
            ids.extend(queue.send_batch(batch).await?.into_iter().map(|s| s.id));
            b.set(ids.len() as u64);
        }
        e2e_worker(&client, "wrk", &ids, &b, phase).await
    })
    .await
}

/// The throughput scenarios' worker: [`E2E_CONCURRENCY`] slots, claims of up to
/// [`E2E_BATCH`], a no-op typed handler, on `source` (a queue, or `topic/group`) holding the
/// jobs `ids`, until it stops on its own; `phase` names it on the progress bar. Returns the
/// time from the worker's start to its stop, the delivery check and the worker's report.
pub(crate) async fn e2e_worker<B: Db>(
    client: &Client<B>,
    source: &str,
    ids: &[MessageId],
    bar: &Bar,
    phase: &str,
) -> Result<(Duration, Check, WorkerReport)> {
    let n = ids.len() as u64;
    bar.phase(phase, n);
    let tracker = Arc::new(Tracker::new(n));
    let (t, b) = (Arc::clone(&tracker), bar.clone());
    let handler = move |_job: Noop, ctx: JobContext<B>| {
        t.record([ctx.id()]);
        b.set(t.delivered());
        async { Ok::<_, Infallible>(Outcome::Done) }
    };
    let started = Instant::now();
    let report = Worker::builder(client)
        .source(source.parse()?, handler)
        .concurrency(E2E_CONCURRENCY)
        .max_batch(E2E_BATCH)
        .stop_when_drained()
        .run(CancellationToken::new())
        .await?;
    Ok((started.elapsed(), tracker.check(ids), report))
}

/// `worker.limits`: `worker.e2e` on a queue with limits that never bind, against `worker.e2e`
/// of the same run.
pub async fn limits<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let n = ctx.plan.worker_messages;
    let bar = ctx.bar("worker.limits");
    let run = e2e_run(
        ctx,
        &bar,
        "worker, no-op typed handler, limits not binding",
        unbinding_limits(),
    )
    .await;
    bar.finish();
    let (elapsed, check, report) = run?;
    Ok(Ran::Ran(vec![
        Figure::rate(
            "worker.limits",
            format!(
                "sqlmq worker, no-op typed handler, {E2E_CONCURRENCY} slots, limits not binding"
            ),
            n,
            elapsed,
        )
        .against("worker.e2e")
        .checked(check)
        .note(format!(
            "{UNBINDING_NOTE}; otherwise worker.e2e ({} acked); ratio: against the same worker \
             on a queue without limits",
            report.acked
        )),
    ]))
}

/// When each message reached a handler.
type Started = Arc<Mutex<HashMap<MessageId, Instant>>>;

/// A worker on `queue` that records when each message's handler starts; stopped (and joined)
/// when dropped.
pub(crate) struct Timed {
    started: Started,
    stop: CancellationToken,
    run: AbortOnDrop<sqlmq::Result<WorkerReport>>,
}

impl Timed {
    pub(crate) fn start<B: Db>(client: &Client<B>, queue: &str, ceiling: Duration) -> Timed {
        let started: Started = Arc::default();
        let s = Arc::clone(&started);
        let handler = move |d: Delivery, _ctx: JobContext<B>| {
            s.lock()
                .expect("poisoned")
                .entry(d.id)
                .or_insert_with(Instant::now);
            async { Ok::<_, Infallible>(Outcome::Done) }
        };
        let stop = CancellationToken::new();
        let builder = Worker::builder(client)
            .queue_raw(queue, handler)
            .concurrency(8)
            .poll_interval(sqlmq::worker::WorkerBuilder::DEFAULT_POLL_FLOOR, ceiling);
        let run = AbortOnDrop(tokio::spawn(builder.run(stop.clone())));
        Timed { started, stop, run }
    }

    /// Wait until `id` was handled; its start time.
    async fn handled(&self, id: MessageId) -> Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(at) = self.started.lock().expect("poisoned").get(&id) {
                return Ok(*at);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "message {id} not handled within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    pub(crate) async fn stop(mut self) -> Result<WorkerReport> {
        self.stop.cancel();
        Ok((&mut self.run.0).await.context("worker task")??)
    }
}

/// A second client on `client`'s tables: its sends wake the worker only through polling.
pub(crate) async fn producer<B: Db>(
    ctx: &Ctx<B>,
    client: &Client<B>,
    queue: &str,
) -> Result<(Client<B>, Queue<B>)> {
    let other = Client::builder()
        .table_prefix(client.table_prefix())
        .max_connections(2)
        .open::<B>(&ctx.scratch.url)
        .await?;
    let q = other.queue(queue).await?;
    Ok((other, q))
}

/// Send one message and return the time from the call to its handler's start.
pub(crate) async fn one_sample<B: Db>(q: &Queue<B>, worker: &Timed) -> Result<Duration> {
    let m = Message::new("x");
    let id = m.id();
    let sent = Instant::now();
    q.send(m).await?;
    Ok(worker.handled(id).await?.saturating_duration_since(sent))
}

/// A wait long enough for the worker's poll delay to climb back to `ceiling` (it doubles from
/// 10 ms), plus a random fraction of the ceiling so that sends land anywhere in its cycle.
pub(crate) fn settle(ceiling: Duration) -> Duration {
    ceiling * 3 + Duration::from_millis(200) + ceiling.mul_f64(rand::random::<f64>())
}

/// `worker.latency`.
pub async fn latency<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let plan = &ctx.plan;
    let bar = ctx.bar("worker.latency");
    let b = bar.clone();
    let (busy, idle, notifications) = with_client(ctx, "wlat", 8, |client| async move {
        client.create_queue("wlat", QueueConfig::default()).await?;
        let worker = Timed::start(&client, "wlat", DEFAULT_CEILING);
        let (other, q) = producer(ctx, &client, "wlat").await?;

        b.phase(&format!("busy: {BUSY_RATE_PER_S} msg/s"), plan.worker_busy);
        let busy = Latencies::default();
        let mut tick = tokio::time::interval(Duration::from_secs(1) / BUSY_RATE_PER_S as u32);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut sent = Vec::with_capacity(plan.worker_busy as usize);
        for i in 0..plan.worker_busy {
            tick.tick().await;
            let m = Message::new("x");
            sent.push((m.id(), Instant::now()));
            q.send(m).await?;
            b.set(i + 1);
        }
        for (id, at) in sent {
            busy.record(worker.handled(id).await?.saturating_duration_since(at));
        }

        let first = plan.worker_idle_first;
        b.phase(
            &format!("after {}s idle", first.as_secs()),
            plan.worker_idle_samples,
        );
        tokio::time::sleep(first).await;
        let idle = Latencies::default();
        for i in 0..plan.worker_idle_samples {
            if i > 0 {
                tokio::time::sleep(settle(DEFAULT_CEILING)).await;
            }
            idle.record(one_sample(&q, &worker).await?);
            b.set(i + 1);
        }
        let notifications = client.notifications();
        worker.stop().await?;
        other.pool().close().await;
        Ok((busy.summary(), idle.summary(), notifications))
    })
    .await?;
    bar.finish();
    let ceiling = DEFAULT_CEILING.as_millis();
    Ok(Ran::Ran(vec![
        Figure::latency(
            "worker.latency.busy",
            format!("sqlmq worker latency, busy {BUSY_RATE_PER_S} msg/s"),
            busy,
        )
        .note("send from another client → handler start"),
        Figure::latency(
            "worker.latency.idle",
            format!(
                "sqlmq worker latency after {}s idle",
                plan.worker_idle_first.as_secs()
            ),
            idle,
        )
        .note(format!(
            "send from another client (no in-process wakeup) → handler start; poll ceiling \
             {ceiling} ms (the default); notifications {notifications}"
        )),
    ]))
}

/// One row of the trade-off table.
struct Tradeoff {
    ceiling: Duration,
    /// Statements counted over the window, and the window; `None` where statements cannot be
    /// counted.
    statements: Option<(u64, Duration)>,
    latency: Summary,
    /// Whether the worker's client followed the database's commits.
    notifications: sqlmq::client::NotificationStatus,
}

/// `worker.idle`.
pub async fn idle<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let plan = &ctx.plan;
    let bar = ctx.bar("worker.idle");
    let mut rows = Vec::new();
    for &ceiling in &plan.tradeoff_ceilings {
        let b = bar.clone();
        let row = with_client(ctx, "widl", 4, |client| async move {
            client.create_queue("widl", QueueConfig::default()).await?;
            let worker = Timed::start(&client, "widl", ceiling);
            let (other, q) = producer(ctx, &client, "widl").await?;
            // Let the poll delay reach the ceiling.
            tokio::time::sleep(settle(ceiling) + Duration::from_millis(500)).await;
            let statements = if B::NO_STATEMENT_COUNTER.is_none() {
                b.phase(
                    &format!("ceiling {} ms: counting statements", ceiling.as_millis()),
                    1,
                );
                Some(count_statements(&[client.pool()], plan.tradeoff_window).await?)
            } else {
                None
            };
            b.phase(
                &format!("ceiling {} ms: idle wakeups", ceiling.as_millis()),
                plan.tradeoff_samples,
            );
            let latencies = Latencies::default();
            for i in 0..plan.tradeoff_samples {
                tokio::time::sleep(settle(ceiling)).await;
                latencies.record(one_sample(&q, &worker).await?);
                b.set(i + 1);
            }
            let notifications = client.notifications();
            worker.stop().await?;
            other.pool().close().await;
            Ok(Tradeoff {
                ceiling,
                statements,
                latency: latencies.summary(),
                notifications,
            })
        })
        .await?;
        rows.push(row);
    }
    bar.finish();
    let mut figures = Vec::new();
    let mut unavailable = Vec::new();
    for row in &rows {
        let ms = row.ceiling.as_millis();
        let default = row.ceiling == DEFAULT_CEILING;
        let key = |what: &str| {
            if default {
                format!("worker.idle.{what}")
            } else {
                format!("worker.idle.{ms}ms.{what}")
            }
        };
        let label = format!("sqlmq idle worker, poll ceiling {ms} ms");
        match row.statements {
            Some((statements, window)) => figures.push(
                Figure::new(
                    key("queries"),
                    label,
                    statements as f64 / window.as_secs_f64(),
                    Unit::QueriesPerS,
                )
                .note(format!(
                    "{statements} statements in {:.1} s from one idle worker process (probe, \
                     heartbeat, maintenance), per-session Questions counters; notifications {}",
                    window.as_secs_f64(),
                    row.notifications
                )),
            ),
            None => unavailable.push(Unavailable {
                key: key("queries"),
                label,
                reason: not_available::<B>(B::NO_STATEMENT_COUNTER.unwrap_or_default()),
            }),
        }
        figures.push(
            Figure::latency(
                &key("latency"),
                format!("sqlmq idle wakeup, poll ceiling {ms} ms"),
                row.latency,
            )
            .note(format!(
                "send from another client to an idle worker → handler start; notifications {}",
                row.notifications
            )),
        );
    }
    if unavailable.is_empty() {
        Ok(Ran::Ran(figures))
    } else {
        Ok(Ran::Partly(figures, unavailable))
    }
}
