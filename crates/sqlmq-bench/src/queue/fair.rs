//! `queue.fair`: a fair queue (`QueueConfig::fair`) against a first-in-first-out one.
//!
//! - `queue.fair.drain.8`: `queue.drain`'s lease drain (the same backlog size, 8 consumers,
//!   claims of 100, one `ack_batch` per claim) of messages spread round robin over
//!   [`DRAIN_KEYS`] fairness keys on a fair queue, against `queue.drain.8` of the same run. The
//!   claim reads messages in start-time order instead of arrival order; the ack is the same.
//! - `queue.fair.send`: that backlog's pre-fill against the same pre-fill on a plain queue:
//!   the send pays for the start times (each message's key read, the keys' finish times read
//!   and written, the queue's clock read).
//! - `queue.fair.claim.large` against `queue.fair.claim.small`: the median time of one
//!   `receive(10)` on a fair queue with [`LARGE_KEYS`] keys and the large backlog of
//!   `queue.claim`, against one with [`SMALL_KEYS`] keys and its small backlog: whether the
//!   claim's cost grows with keys or backlog.

use anyhow::Result;
use sqlmq::{Message, QueueConfig};

use super::claim::{WARM_UP, timed_claims};
use super::consumer::Mode;
use super::drain::{Drained, drain_backlog};
use super::{Backlog, fill_with, timed_plain_fill, with_queue_config};
use crate::args::{CLAIM_N, CONSUMERS};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::body;
use crate::outcome::Outcome;
use crate::report::{Figure, grouped};

/// Fairness keys of the drained backlog, round robin.
pub const DRAIN_KEYS: u64 = 1_000;
/// Keys of the claim-latency queue with the small backlog.
pub const SMALL_KEYS: u64 = 10;
/// Keys of the claim-latency queue with the large backlog.
pub const LARGE_KEYS: u64 = 10_000;

fn fair() -> QueueConfig {
    QueueConfig::default().fair(true)
}

fn drain_message(i: u64) -> Message {
    Message::new(body(0)).fairness_key(format!("tenant-{}", i % DRAIN_KEYS))
}

fn small_message(i: u64) -> Message {
    Message::new(body(0)).fairness_key(format!("tenant-{}", i % SMALL_KEYS))
}

fn large_message(i: u64) -> Message {
    Message::new(body(0)).fairness_key(format!("tenant-{}", i % LARGE_KEYS))
}

/// `queue.fair`.
pub async fn fair_queue<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.drain;
    let plan = &ctx.plan;
    let bar = ctx.bar("queue.fair");
    let how = ", fair queue, 1 000 fairness keys";
    let run = async {
        let plain_fill = timed_plain_fill(ctx, &bar, "fairplain", QueueConfig::default()).await?;
        let drained = drain_backlog(
            ctx,
            &bar,
            Mode::Leases,
            how,
            fair(),
            Backlog::Made(drain_message),
            false,
        )
        .await?;
        let per_phase = (WARM_UP + plan.claim_samples) * CLAIM_N as u64;
        let b = bar.clone();
        let small = with_queue_config(ctx, "fairsmall", 4, fair(), |queue| async move {
            fill_with(&queue, plan.claim_small + per_phase, &b, small_message).await?;
            timed_claims(&queue, plan.claim_samples, &b).await
        })
        .await?;
        let b = bar.clone();
        let large = with_queue_config(ctx, "fairlarge", 4, fair(), |queue| async move {
            fill_with(&queue, plan.claim_large + per_phase, &b, large_message).await?;
            timed_claims(&queue, plan.claim_samples, &b).await
        })
        .await?;
        anyhow::Ok((plain_fill, drained, small, large))
    }
    .await;
    bar.finish();
    let (
        plain_fill,
        Drained {
            fill,
            drain,
            check,
            lost_acks,
            ..
        },
        small,
        large,
    ) = run?;
    let mut drain_note =
        "1 000 fairness keys, round robin; ratio: against the same drain on a plain queue"
            .to_owned();
    if lost_acks > 0 {
        drain_note.push_str(&format!("; {lost_acks} acks found their lease lost"));
    }
    let label = |keys: u64, backlog: u64| {
        format!(
            "sqlmq claim {CLAIM_N}, fair queue, {} keys, backlog {}",
            grouped(keys),
            grouped(backlog)
        )
    };
    Ok(Outcome::Ran(vec![
        Figure::rate(
            "queue.fair.send.plain",
            "sqlmq pre-fill, send_batch of 10 000, plain queue",
            n,
            plain_fill,
        )
        .note("the same messages without fairness keys, on a queue that is not fair"),
        Figure::rate(
            "queue.fair.send",
            "sqlmq pre-fill, send_batch of 10 000, fair queue, 1 000 keys",
            n,
            fill,
        )
        .against("queue.fair.send.plain")
        .note("each send_batch reads back its messages' keys, reads the keys' finish times and the queue's clock, and writes the finish times"),
        Figure::rate(
            "queue.fair.drain.8",
            format!("sqlmq drain, {CONSUMERS} consumers{how}"),
            n,
            drain,
        )
        .against("queue.drain.8")
        .checked(check)
        .note(drain_note),
        Figure::latency(
            "queue.fair.claim.small",
            label(SMALL_KEYS, plan.claim_small),
            small,
        ),
        Figure::latency(
            "queue.fair.claim.large",
            label(LARGE_KEYS, plan.claim_large),
            large,
        )
        .against("queue.fair.claim.small")
        .note("ratio of median claim times: near 1 means the fair claim's cost grows with neither the keys nor the backlog"),
    ]))
}
