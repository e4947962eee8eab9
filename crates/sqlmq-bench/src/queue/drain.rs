//! `queue.drain`: a pre-filled queue drained by 8 consumers (claims of 100, one `ack_batch`
//! per claim), beside the raw INSERT-then-DELETE lifecycle rate; then the same in the lock-held
//! mode (`receive_in`, `ack_batch_in` and one commit per batch) and with `take_in` (one commit
//! per batch, no lease); then the process's peak memory.
//! `queue.mixed`: 4 producers sending single messages while 8 consumers drain (with leases, with
//! `take_in`, then with leases through a client each). The send rate is shown beside the rate of the same 4 producers alone (how
//! much the consumers slow them down), the ack rate beside the raw lifecycle rate; the drain
//! should be limited by the producers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use sqlmq::{Message, MessageId, Queue, QueueConfig};
use tokio::task::JoinSet;

use super::consumer::{Consumer, Mode};
use super::produce::sends;
use super::{AbortOnDrop, Backlog, POOL, fill_backlog, plain, with_queue, with_queue_config};
use crate::args::{CONSUMERS, MIXED_PRODUCERS, RECEIVE_BATCH};
use crate::backend::{Db, not_available};
use crate::context::Ctx;
use crate::measure::{body, peak_rss_bytes};
use crate::outcome::Outcome;
use crate::progress::Bar;
use crate::raw::{self, split};
use crate::raw_queue;
use crate::report::{Figure, Unavailable, Unit};
use crate::track::{Check, Tracker};

/// How often the mixed scenario samples its backlog (sent minus acked).
const BACKLOG_SAMPLE: Duration = Duration::from_millis(20);

/// One run of `queue.drain`: how its consumers consume, and how it is reported.
struct Drain {
    mode: Mode,
    key: &'static str,
    /// Appended to the label and the progress phase.
    how: &'static str,
    note: Option<&'static str>,
    baseline: &'static str,
}

/// The runs of `queue.drain`, in order.
const DRAINS: [Drain; 3] = [
    Drain {
        mode: Mode::Leases,
        key: "queue.drain.8",
        how: "",
        note: None,
        baseline: raw::LIFECYCLE,
    },
    Drain {
        mode: Mode::LockHeld,
        key: "queue.drain.lock_held.8",
        how: ", lock-held",
        note: Some("receive_in, ack_batch_in and one commit per claim of 100"),
        baseline: raw::LIFECYCLE,
    },
    Drain {
        mode: Mode::Take,
        key: "queue.drain.take.8",
        how: ", take_in",
        note: Some(
            "take_in of 100 and a commit: the pattern of raw.queue.drain.8 on sqlmq's tables; \
             peer.postgres.drain.8 runs it on PostgreSQL",
        ),
        baseline: raw_queue::DRAIN,
    },
];

/// One run of `queue.mixed` beside its 4 producers: how the consumers consume, whether every
/// producer and consumer has a client of its own, and how it is reported.
struct Mixed {
    mode: Mode,
    /// Each producer and consumer through a client of its own, as separate processes would
    /// be (no shared pool, no shared group commit).
    separate: bool,
    produce_key: &'static str,
    consume_key: &'static str,
    /// Appended to the labels and the progress phase.
    how: &'static str,
    /// What the consumers' rate is compared with.
    baseline: &'static str,
}

/// The runs of `queue.mixed`, in order.
const MIXED: [Mixed; 3] = [
    Mixed {
        mode: Mode::Leases,
        separate: false,
        produce_key: "queue.mixed.produce",
        consume_key: "queue.mixed.consume",
        how: "",
        baseline: raw::LIFECYCLE,
    },
    Mixed {
        mode: Mode::Take,
        separate: false,
        produce_key: "queue.mixed.take.produce",
        consume_key: "queue.mixed.take.consume",
        how: " (take_in)",
        baseline: raw_queue::MIXED,
    },
    Mixed {
        mode: Mode::Leases,
        separate: true,
        produce_key: "queue.mixed.clients.produce",
        consume_key: "queue.mixed.clients.consume",
        how: " (clients of their own)",
        baseline: "queue.mixed.consume",
    },
];

/// `queue.drain`.
pub async fn drain<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.drain;
    let bar = ctx.bar("queue.drain");
    let mut figures = Vec::new();
    for v in DRAINS {
        let (elapsed, check, lost_acks) =
            drain_once(ctx, &bar, v.mode, v.how, QueueConfig::default()).await?;
        let label = format!("sqlmq drain, {CONSUMERS} consumers{}", v.how);
        let mut drained = Figure::rate(v.key, label, n, elapsed)
            .against(v.baseline)
            .checked(check);
        if let Some(note) = v.note {
            drained = drained.note(note);
        }
        if lost_acks > 0 {
            drained = drained.note(format!("{lost_acks} acks found their lease lost"));
        }
        figures.push(drained);
    }
    bar.finish();
    if let Some(bytes) = peak_rss_bytes() {
        figures.push(
            Figure::new(
                "queue.memory.peak",
                "bench peak RSS after drain",
                bytes as f64 / f64::from(1u32 << 20),
                Unit::MiB,
            )
            .note("VmHWM of /proc/self/status: the whole bench process (its id bookkeeping and all scenarios run so far included)"),
        );
    }
    Ok(Outcome::Ran(figures))
}

/// One drain of `queue.drain`: `ctx.plan.drain` messages pre-filled (not timed) into a fresh
/// queue created with `config`, then drained by 8 consumers in `mode`; `how` names it on the
/// progress bar. Returns the time from the first claim to the last ack, the delivery check
/// and the acks that found their lease lost.
pub(super) async fn drain_once<B: Db>(
    ctx: &Ctx<B>,
    bar: &Bar,
    mode: Mode,
    how: &str,
    config: QueueConfig,
) -> Result<(Duration, Check, u64)> {
    let d = drain_backlog(ctx, bar, mode, how, config, Backlog::Made(plain), false).await?;
    Ok((d.drain, d.check, d.lost_acks))
}

/// What [`drain_backlog`] measured.
pub(super) struct Drained {
    /// The pre-fill: every `send_batch`, one after the other.
    pub fill: Duration,
    /// From the first claim to the last ack.
    pub drain: Duration,
    /// Every message delivered once?
    pub check: Check,
    /// Acks that found their lease lost.
    pub lost_acks: u64,
    /// `ack_batch` calls the server rolled back and the consumer retried.
    pub retried_acks: u64,
}

/// Like [`drain_once`], the backlog `backlog`; the pre-fill is timed too (it is still not part
/// of the drain's time). With `retry`, an `ack_batch` the server
/// rolls back is retried and counted instead of ending the drain.
pub(super) async fn drain_backlog<B: Db>(
    ctx: &Ctx<B>,
    bar: &Bar,
    mode: Mode,
    how: &str,
    config: QueueConfig,
    backlog: Backlog,
    retry: bool,
) -> Result<Drained> {
    let n = ctx.plan.drain;
    let b = bar.clone();
    let retried: Option<Arc<AtomicU64>> = retry.then(Arc::default);
    with_queue_config(ctx, "drain", POOL, config, |queue| async move {
        let filling = Instant::now();
        let ids = fill_backlog(&queue, n, &b, backlog).await?;
        let fill = filling.elapsed();
        let tracker = Arc::new(Tracker::new(n));
        tracker.sending_done();
        b.phase(&format!("drain, {CONSUMERS} consumers{how}"), n);
        let started = Instant::now();
        let consumer = Consumer {
            queue,
            batch: RECEIVE_BATCH,
            tracker: Arc::clone(&tracker),
            bar: b.clone(),
            latency: None,
            mode,
            retried: retried.clone(),
        };
        let lost_acks = consumer.run_many(CONSUMERS).await?;
        Ok(Drained {
            fill,
            drain: tracker.last_delivery().saturating_duration_since(started),
            check: tracker.check(&ids),
            lost_acks,
            retried_acks: retried.map_or(0, |r| r.load(Ordering::Relaxed)),
        })
    })
    .await
}

/// `queue.mixed`: first the 4 producers alone (the rate they reach without consumers), then
/// the same producers with 8 consumers draining at the same time, with leases and then with
/// `take_in`.
pub async fn mixed<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.mixed;
    let bar = ctx.bar("queue.mixed");
    let b = bar.clone();
    let alone = with_queue(ctx, "mixed", POOL, |queue| async move {
        b.phase(&format!("{MIXED_PRODUCERS} producers alone"), n);
        sends(&queue, MIXED_PRODUCERS, n, &b).await
    })
    .await;
    let alone = match alone {
        Ok(alone) => alone,
        Err(e) => {
            bar.finish();
            return Err(e);
        }
    };
    let mut figures = vec![
        Figure::rate(
            "queue.mixed.alone",
            format!("sqlmq send, {MIXED_PRODUCERS} producers"),
            n,
            alone,
        )
        .against(raw::INSERT_MANY),
    ];
    let mut unavailable = Vec::new();
    for v in &MIXED {
        if let (true, Some(why)) = (v.separate, B::NO_SEPARATE_CLIENTS) {
            for (key, what) in [
                (
                    v.produce_key,
                    format!("sent by {MIXED_PRODUCERS} producers"),
                ),
                (v.consume_key, format!("acked by {CONSUMERS} consumers")),
            ] {
                unavailable.push(Unavailable {
                    key: key.to_owned(),
                    label: format!("sqlmq mixed{}: {what}", v.how),
                    reason: not_available::<B>(why),
                });
            }
            continue;
        }
        let settled = if v.mode == Mode::Take {
            "removed"
        } else {
            "acked"
        };
        let run = mixed_run(ctx, &bar, v).await;
        if run.is_err() {
            bar.finish();
        }
        let (produced, consumed, check, lost_acks, max_backlog) = run?;
        let mut note = format!(
            "largest backlog seen (sent, not yet acked): {max_backlog}; consumers finished \
             {:.2} s after the producers",
            consumed.saturating_sub(produced).as_secs_f64()
        );
        if lost_acks > 0 {
            note.push_str(&format!("; {lost_acks} acks found their lease lost"));
        }
        figures.push(
            Figure::rate(
                v.produce_key,
                format!("sqlmq mixed{}: sent by {MIXED_PRODUCERS} producers", v.how),
                n,
                produced,
            )
            .against("queue.mixed.alone")
            .note("ratio: how much the consumers running at the same time slow the producers down"),
        );
        figures.push(
            Figure::rate(
                v.consume_key,
                format!("sqlmq mixed{}: {settled} by {CONSUMERS} consumers", v.how),
                n,
                consumed,
            )
            .against(v.baseline)
            .checked(check)
            .note(note),
        );
    }
    bar.finish();
    Ok(if unavailable.is_empty() {
        Outcome::Ran(figures)
    } else {
        Outcome::Partly(figures, unavailable)
    })
}

/// One mixed run `v`: the 4 producers sending single messages while 8 consumers drain.
/// Returns the producers' and the consumers' times, the delivery check, the acks that lost
/// their lease and the largest backlog seen.
async fn mixed_run<B: Db>(
    ctx: &Ctx<B>,
    bar: &Bar,
    v: &Mixed,
) -> Result<(Duration, Duration, Check, u64, u64)> {
    let n = ctx.plan.mixed;
    let b = bar.clone();
    with_queue(ctx, "mixed", POOL, |queue| async move {
        let count = MIXED_PRODUCERS + CONSUMERS;
        let all = if v.separate {
            siblings(ctx, &queue, count).await?
        } else {
            vec![queue.clone(); count]
        };
        let mut handles = all.clone();
        let consumer_queues = handles.split_off(MIXED_PRODUCERS);
        let run = mixed_traffic(&b, n, v.mode, v.how, handles, consumer_queues).await;
        if v.separate {
            close(&all).await;
        }
        run
    })
    .await
}

/// `count` handles of `queue`, each through a client of its own (2 connections) on the same
/// tables: what as many processes would hold.
async fn siblings<B: Db>(ctx: &Ctx<B>, queue: &Queue<B>, count: usize) -> Result<Vec<Queue<B>>> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let opened = async {
            let client = sqlmq::Client::builder()
                .table_prefix(queue.client().table_prefix())
                .max_connections(2)
                .open::<B>(&ctx.scratch.url)
                .await?;
            anyhow::Ok(client.queue(queue.name()).await?)
        }
        .await;
        match opened {
            Ok(q) => out.push(q),
            Err(e) => {
                close(&out).await;
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// Close the pools of the clients of `queues` (from [`siblings`]).
async fn close<B: Db>(queues: &[Queue<B>]) {
    for q in queues {
        q.client().pool().close().await;
    }
}

/// The traffic of [`mixed_run`]: `n` messages, one producer on each of `producer_queues`, one
/// consumer in `mode` on each of `consumer_queues`; `how` names the run on the progress bar.
async fn mixed_traffic<B: Db>(
    b: &Bar,
    n: u64,
    mode: Mode,
    how: &str,
    producer_queues: Vec<Queue<B>>,
    consumer_queues: Vec<Queue<B>>,
) -> Result<(Duration, Duration, Check, u64, u64)> {
    b.phase(
        &format!("{MIXED_PRODUCERS} producers + {CONSUMERS} consumers{how}"),
        n,
    );
    let tracker = Arc::new(Tracker::new(n));
    let sent_ids: Arc<Mutex<Vec<MessageId>>> = Arc::default();
    let sent = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let consumer = Consumer {
        queue: consumer_queues[0].clone(),
        batch: RECEIVE_BATCH,
        tracker: Arc::clone(&tracker),
        bar: b.clone(),
        latency: None,
        mode,
        retried: None,
    };
    let consumers = tokio::spawn(async move { consumer.run_each(consumer_queues).await });
    let mut consumers = AbortOnDrop(consumers);
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (tracker, sent, done) = (Arc::clone(&tracker), Arc::clone(&sent), Arc::clone(&done));
        tokio::spawn(async move {
            let mut max = 0;
            while !done.load(Ordering::Relaxed) {
                let backlog = sent
                    .load(Ordering::Relaxed)
                    .saturating_sub(tracker.delivered());
                max = max.max(backlog);
                tokio::time::sleep(BACKLOG_SAMPLE).await;
            }
            max
        })
    };
    let mut sampler = AbortOnDrop(sampler);
    let mut producers = JoinSet::new();
    for (count, q) in split(n, MIXED_PRODUCERS).into_iter().zip(producer_queues) {
        let (ids, sent) = (Arc::clone(&sent_ids), Arc::clone(&sent));
        producers.spawn(async move {
            for _ in 0..count {
                let m = Message::new(body(0));
                let id = m.id();
                q.send(m).await?;
                ids.lock().expect("poisoned").push(id);
                sent.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = producers.join_next().await {
        r??;
    }
    let produced = started.elapsed();
    tracker.sending_done();
    let lost = (&mut consumers.0).await??;
    done.store(true, Ordering::Relaxed);
    let max_backlog = (&mut sampler.0).await?;
    let consumed = tracker.last_delivery().saturating_duration_since(started);
    let check = tracker.check(sent_ids.lock().expect("poisoned").iter());
    Ok((produced, consumed, check, lost, max_backlog))
}
