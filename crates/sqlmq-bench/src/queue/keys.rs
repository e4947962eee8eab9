//! `queue.keys`: `queue.drain`'s lease drain (the same backlog, 8 consumers, claims of 100, one
//! `ack_batch` per claim) of messages that each carry a concurrency key, spread over
//! [`KEYS`] keys, on a queue whose `concurrency_limit` no key reaches, against `queue.drain.8`
//! of the same run: what a key costs a message when its limit never binds. Nothing waits in
//! `blocked` (a message is admitted at send while its key has room), so what differs from a
//! plain message is the key's `key_slots` row: locked, read and written by the send that
//! admits the message and again by the ack that frees its slot, each time after reading the
//! queue's limit. The pre-fill is timed too, beside the same pre-fill without keys: the send
//! pays the other half of a key's cost. On MySQL/MariaDB these acks can deadlock with each
//! other on the key rows: the consumers retry them, and the figure's note says how often.

use anyhow::Result;
use sqlmq::{Message, QueueConfig};

use super::consumer::Mode;
use super::drain::{Drained, drain_backlog};
use super::{Backlog, timed_plain_fill};
use crate::args::CONSUMERS;
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::body;
use crate::outcome::Outcome;
use crate::report::Figure;

/// Concurrency keys the backlog is spread over, round robin: each `send_batch` of the pre-fill
/// (10 000 messages) carries every key, a hundred messages each.
pub const KEYS: u64 = 100;
/// The queue's `concurrency_limit`: above the most messages one key ever holds (the full
/// run's 200 000 messages over [`KEYS`] keys are 2 000 a key), so every message is admitted at
/// send and none waits.
pub const UNBINDING_PER_KEY: u32 = 10_000;

/// The note of every figure: the limit and why it does not bind.
const NOTE: &str = "100 concurrency keys, round robin; concurrency_limit 10000, above any key's \
     count, so every message is admitted at send (each key's key_slots row locked, read and \
     written per send_batch) and its ack frees the slot (the same again, per message acked)";

/// The queue of this scenario, with or without keyed messages in it.
fn config() -> QueueConfig {
    QueueConfig::default().concurrency_limit(Some(UNBINDING_PER_KEY))
}

/// The backlog's `i`-th message: the plain pre-fill's message with key `i mod KEYS`.
fn keyed(i: u64) -> Message {
    Message::new(body(0)).concurrency_key(format!("key-{}", i % KEYS))
}

/// `queue.keys`.
pub async fn keys<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.drain;
    let bar = ctx.bar("queue.keys");
    let how = ", concurrency keys";
    let run = async {
        let plain_fill = timed_plain_fill(ctx, &bar, "keys", config()).await?;
        let keyed = drain_backlog(
            ctx,
            &bar,
            Mode::Leases,
            how,
            config(),
            Backlog::Made(keyed),
            true,
        )
        .await?;
        anyhow::Ok((plain_fill, keyed))
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
            retried_acks,
        },
    ) = run?;
    let mut drain_note = format!("{NOTE}; ratio: against the same drain of plain messages");
    // Retried, not fatal: the error tells its caller to retry, and a consumer of such a queue
    // must (concurrent acks of keyed messages can deadlock on the key rows on MySQL/MariaDB).
    drain_note.push_str(&format!(
        "; {retried_acks} ack_batch calls rolled back by the server (a deadlock) and retried"
    ));
    if lost_acks > 0 {
        drain_note.push_str(&format!("; {lost_acks} acks found their lease lost"));
    }
    Ok(Outcome::Ran(vec![
        Figure::rate(
            "queue.keys.send.plain",
            "sqlmq pre-fill, send_batch of 10 000, no keys",
            n,
            plain_fill,
        )
        .note("the same queue configuration, the same messages without their keys"),
        Figure::rate(
            "queue.keys.send",
            "sqlmq pre-fill, send_batch of 10 000, concurrency keys",
            n,
            fill,
        )
        .against("queue.keys.send.plain")
        .note(NOTE),
        Figure::rate(
            "queue.keys.drain.8",
            format!("sqlmq drain, {CONSUMERS} consumers{how}"),
            n,
            drain,
        )
        .against("queue.drain.8")
        .checked(check)
        .note(drain_note),
    ]))
}
