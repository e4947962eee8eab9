//! `queue.limits`: `queue.drain`'s lease drain (the same backlog, 8 consumers, claims of 100,
//! one `ack_batch` per claim) on a queue whose `max_in_flight` and `rate_limit` are set far
//! above anything the drain reaches, against `queue.drain.8` of the same run: what a limited
//! queue's gate costs when it never shuts. (`receive_in` and `take_in` refuse a limited queue,
//! so only the lease drain has a limited twin.)

use anyhow::Result;

use super::consumer::Mode;
use super::drain::drain_once;
use super::{UNBINDING_NOTE, unbinding_limits};
use crate::args::CONSUMERS;
use crate::backend::Db;
use crate::context::Ctx;
use crate::outcome::Outcome;
use crate::report::Figure;

/// `queue.limits`.
pub async fn limits<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.drain;
    let bar = ctx.bar("queue.limits");
    let how = ", limits not binding";
    let run = drain_once(ctx, &bar, Mode::Leases, how, unbinding_limits()).await;
    bar.finish();
    let (elapsed, check, lost_acks) = run?;
    let mut note = format!("{UNBINDING_NOTE}; ratio: against the same drain without limits");
    if lost_acks > 0 {
        note.push_str(&format!("; {lost_acks} acks found their lease lost"));
    }
    Ok(Outcome::Ran(vec![
        Figure::rate(
            "queue.limits.drain.8",
            format!("sqlmq drain, {CONSUMERS} consumers{how}"),
            n,
            elapsed,
        )
        .against("queue.drain.8")
        .checked(check)
        .note(note),
    ]))
}
