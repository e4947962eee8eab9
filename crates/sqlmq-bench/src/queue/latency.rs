//! `queue.latency`: end-to-end latency, from the call to `send` (the body carries the time) to
//! the moment a polling consumer has the message in hand, before it acks.
//!
//! - busy: one producer sends at a moderate [`BUSY_RATE_PER_S`], one consumer polls; its poll
//!   delay stays near its 10 ms floor because claims keep finding messages.
//! - after idle: [`IDLE_PAIRS`] independent queues, each with one consumer that has found
//!   nothing for `idle_first` (10 s in both quick and full runs) so that its poll delay sits at
//!   its 1 s cap; then one message arrives at a random moment. Later rounds wait `idle_gap`
//!   (longer than the 2.5 s the delay needs to climb back to its cap) plus a random fraction of
//!   a second. Pairs sample in parallel to gather enough samples in little time; each pair is
//!   one consumer of one queue, so a sample is what one idle worker sees.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use sqlmq::{Message, MessageId, QueueConfig};
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use super::consumer::{Consumer, Mode};
use super::{AbortOnDrop, POOL, with_client, with_queue};
use crate::args::{BUSY_RATE_PER_S, IDLE_PAIRS};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::{Latencies, stamped};
use crate::outcome::Outcome;
use crate::report::Figure;
use crate::track::Tracker;

/// Messages per claim of the latency consumers (they rarely find more than one).
const BATCH: usize = 10;

/// `queue.latency`.
pub async fn latency<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let bar = ctx.bar("queue.latency");
    let (origin, plan) = (ctx.origin, &ctx.plan);
    let b = bar.clone();
    let busy = with_queue(ctx, "lat", 4, |queue| async move {
        let n = plan.busy_latency;
        b.phase(&format!("busy: {BUSY_RATE_PER_S} msg/s, 1 consumer"), n);
        let tracker = Arc::new(Tracker::new(n));
        let latencies = Arc::new(Latencies::default());
        let consumer = Consumer {
            queue: queue.clone(),
            batch: BATCH,
            tracker: Arc::clone(&tracker),
            bar: b.clone(),
            latency: Some((Arc::clone(&latencies), origin)),
            mode: Mode::Leases,
            retried: None,
        };
        let mut consumer = AbortOnDrop(tokio::spawn(consumer.run()));
        let mut ids = Vec::with_capacity(n as usize);
        let mut tick = tokio::time::interval(Duration::from_secs(1) / BUSY_RATE_PER_S as u32);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        for _ in 0..n {
            tick.tick().await;
            let m = Message::new(stamped(origin));
            ids.push(m.id());
            queue.send(m).await?;
        }
        tracker.sending_done();
        (&mut consumer.0).await??;
        Ok((latencies.summary(), tracker.check(&ids)))
    })
    .await?;

    let b = bar.clone();
    let idle = with_client(ctx, "lati", POOL, |client| async move {
        let total = IDLE_PAIRS as u64 * plan.idle_rounds;
        b.phase(
            &format!(
                "after {}s idle, {IDLE_PAIRS} queues",
                plan.idle_first.as_secs_f64()
            ),
            total,
        );
        let tracker = Arc::new(Tracker::new(total));
        let latencies = Arc::new(Latencies::default());
        let sent: Arc<Mutex<Vec<MessageId>>> = Arc::default();
        let mut consumers = JoinSet::new();
        let mut drivers = JoinSet::new();
        for pair in 0..IDLE_PAIRS {
            let queue = client
                .create_queue(&format!("idle{pair}"), QueueConfig::default())
                .await?;
            let consumer = Consumer {
                queue: queue.clone(),
                batch: BATCH,
                tracker: Arc::clone(&tracker),
                bar: b.clone(),
                latency: Some((Arc::clone(&latencies), origin)),
                mode: Mode::Leases,
                retried: None,
            };
            consumers.spawn(consumer.run());
            let sent = Arc::clone(&sent);
            let (first, gap, rounds) = (plan.idle_first, plan.idle_gap, plan.idle_rounds);
            drivers.spawn(async move {
                tokio::time::sleep(first + jitter()).await;
                for round in 0..rounds {
                    let m = Message::new(stamped(origin));
                    sent.lock().expect("poisoned").push(m.id());
                    queue.send(m).await?;
                    if round + 1 < rounds {
                        tokio::time::sleep(gap + jitter()).await;
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(r) = drivers.join_next().await {
            r??;
        }
        tracker.sending_done();
        while let Some(r) = consumers.join_next().await {
            r??;
        }
        let check = tracker.check(sent.lock().expect("poisoned").iter());
        Ok((latencies.summary(), check))
    })
    .await?;
    bar.finish();

    Ok(Outcome::Ran(vec![
        Figure::latency(
            "queue.latency.busy",
            format!("sqlmq latency, busy {BUSY_RATE_PER_S} msg/s"),
            busy.0,
        )
        .checked(busy.1),
        Figure::latency(
            "queue.latency.idle",
            format!(
                "sqlmq latency after {}s idle",
                ctx.plan.idle_first.as_secs_f64()
            ),
            idle.0,
        )
        .checked(idle.1)
        .note(format!(
            "{} samples from {IDLE_PAIRS} independent queue/consumer pairs; an idle consumer \
             polls every 1 s ± 20%",
            idle.0.samples
        )),
    ]))
}

/// A random wait below one second: sends land at random moments of the consumers' poll cycle.
fn jitter() -> Duration {
    Duration::from_secs_f64(rand::random::<f64>())
}
