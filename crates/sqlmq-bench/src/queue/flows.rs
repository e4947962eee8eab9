//! `queue.flows`: what batches and dependencies cost. `queue.drain`'s lease drain (the same
//! backlog size, 8 consumers, claims of 100, one `ack_batch` per claim) of messages that each
//! depend on one message acked before (so each is delivered at once, but its send resolves the
//! dependency and its ack is recorded in the flow tables), and of members of batches of
//! [`BATCH`] (each ack also counts into its batch, whose row every consumer's acks update, and
//! the last finishes it and sends its callback), each against `queue.drain.8` of the same run;
//! both pre-fills against the same pre-fill of plain messages.

use anyhow::Result;
use sqlmq::QueueConfig;

use super::consumer::Mode;
use super::drain::{Drained, drain_backlog};
use super::{Backlog, timed_plain_fill};
use crate::args::CONSUMERS;
use crate::backend::Db;
use crate::context::Ctx;
use crate::outcome::Outcome;
use crate::report::Figure;

/// Members per batch: one batch's row takes the counts of 1 000 acks, from every consumer.
pub const BATCH: u64 = 1_000;

/// `queue.flows`.
pub async fn flows<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.drain;
    let bar = ctx.bar("queue.flows");
    let run = async {
        let plain = timed_plain_fill(ctx, &bar, "flows", QueueConfig::default()).await?;
        let deps = drain_backlog(
            ctx,
            &bar,
            Mode::Leases,
            ", each depending on an acked message",
            QueueConfig::default(),
            Backlog::Dependants,
            true,
        )
        .await?;
        let batches = drain_backlog(
            ctx,
            &bar,
            Mode::Leases,
            ", members of batches of 1 000",
            QueueConfig::default(),
            Backlog::Batches(BATCH),
            true,
        )
        .await?;
        anyhow::Ok((plain, deps, batches))
    }
    .await;
    bar.finish();
    let (plain, deps, batches) = run?;
    let notes = |d: &Drained, what: &str| {
        let mut note = format!("{what}; ratio: against the same drain of plain messages");
        if d.retried_acks > 0 {
            note.push_str(&format!(
                "; {} ack_batch calls rolled back by the server and retried",
                d.retried_acks
            ));
        }
        if d.lost_acks > 0 {
            note.push_str(&format!("; {} acks found their lease lost", d.lost_acks));
        }
        note
    };
    let dep_what = "each message depends on one message acked before the pre-fill: delivered at \
        once, tracked (its flow_nodes row written at send, locked and updated at its ack)";
    let batch_what = "sealed batches of 1 000 members with an on_complete callback: each ack \
        also updates its batch's row, and the last sends the callback";
    Ok(Outcome::Ran(vec![
        Figure::rate(
            "queue.flows.send.plain",
            "sqlmq pre-fill, send_batch of 10 000, plain",
            n,
            plain,
        )
        .note("the pre-fill the two below are compared with"),
        Figure::rate(
            "queue.flows.send.deps",
            "sqlmq pre-fill, send_batch of 10 000, each with a dependency",
            n,
            deps.fill,
        )
        .against("queue.flows.send.plain")
        .note(dep_what),
        Figure::rate(
            "queue.flows.deps.drain.8",
            format!("sqlmq drain, {CONSUMERS} consumers, each message with a dependency"),
            n,
            deps.drain,
        )
        .against("queue.drain.8")
        .checked(deps.check)
        .note(notes(&deps, dep_what)),
        Figure::rate(
            "queue.flows.send.batch",
            "sqlmq pre-fill, create_batch of 1 000 members",
            n,
            batches.fill,
        )
        .against("queue.flows.send.plain")
        .note(batch_what),
        Figure::rate(
            "queue.flows.batch.drain.8",
            format!("sqlmq drain, {CONSUMERS} consumers, batch members"),
            n,
            batches.drain,
        )
        .against("queue.drain.8")
        .checked(batches.check)
        .note(notes(&batches, batch_what)),
    ]))
}
