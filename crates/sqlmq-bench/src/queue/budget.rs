//! `queue.budget`: what each queue operation costs the server, in statements. One client with
//! a pool of its own sends single messages, claims and acks them one at a time (the steady
//! state of mixed traffic, where a claim finds one or two messages), claims and acks batches of
//! 100, claims an empty queue, and takes (`take_in` and a commit) one and 100 at a time; around
//! each phase the per-session counters of every connection of its pool are read (as in
//! `queue.idle`, which explains why session counters are exact on a shared server). A
//! statement inside a multi-statement text query counts once, like any other. Each figure is
//! statements (`Questions`); its note gives, per operation, the commits (`Com_commit`), the
//! rows changed (`Handler_write` + `Handler_update` + `Handler_delete`: row operations of the
//! storage engine) and the rows read (`Handler_read_*`).
//!
//! SQLite has no such counter: there the scenario reports itself not available.

use std::future::Future;

use anyhow::{Result, bail};
use sqlmq::{Message, Queue, QueueConfig};

use crate::args::LEASE;
use crate::backend::{Db, delta_at, not_available};
use crate::context::Ctx;
use crate::outcome::Outcome;
use crate::report::{Figure, Unit};

/// Operations per phase.
const OPS: usize = 200;

/// `queue.budget`.
pub async fn budget<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    if let Some(why) = B::NO_STATEMENT_COUNTER {
        return Ok(Outcome::NotAvailable(not_available::<B>(why)));
    }
    let bar = ctx.bar("queue.budget");
    let client = ctx.client("budget", 2).await?;
    let result = async {
        let queue = client
            .create_queue("budget", QueueConfig::default())
            .await?;
        bar.phase("phases", 6);
        let send = per_op(&client, OPS, async {
            for i in 0..OPS {
                queue.send(Message::new(format!("m{i}"))).await?;
            }
            Ok(())
        })
        .await?;
        bar.set(1);
        let one = per_op(&client, OPS, async {
            for _ in 0..OPS {
                claim_and_ack(&queue, 1).await?;
            }
            Ok(())
        })
        .await?;
        bar.set(2);
        let messages: Vec<Message> = (0..OPS).map(|i| Message::new(format!("b{i}"))).collect();
        queue.send_batch(messages).await?;
        let batch = per_op(&client, OPS, async {
            for _ in 0..OPS / 100 {
                claim_and_ack(&queue, 100).await?;
            }
            Ok(())
        })
        .await?;
        bar.set(3);
        let empty = per_op(&client, OPS, async {
            for _ in 0..OPS {
                if !queue.receive(10, LEASE).await?.is_empty() {
                    bail!("the drained queue returned a message");
                }
            }
            Ok(())
        })
        .await?;
        bar.set(4);
        let messages: Vec<Message> = (0..OPS).map(|i| Message::new(format!("t{i}"))).collect();
        queue.send_batch(messages).await?;
        let take_one = per_op(&client, OPS, async {
            for _ in 0..OPS {
                take(&client, &queue, 1).await?;
            }
            Ok(())
        })
        .await?;
        bar.set(5);
        let messages: Vec<Message> = (0..OPS).map(|i| Message::new(format!("u{i}"))).collect();
        queue.send_batch(messages).await?;
        let take_batch = per_op(&client, OPS, async {
            for _ in 0..OPS / 100 {
                take(&client, &queue, 100).await?;
            }
            Ok(())
        })
        .await?;
        bar.set(6);
        anyhow::Ok((send, one, batch, empty, take_one, take_batch))
    }
    .await;
    bar.finish();
    ctx.release(client).await?;
    let (send, one, batch, empty, take_one, take_batch) = result?;
    let figure = |key: &str, label: &str, b: Budget, note: &str| {
        Figure::new(key, label, b.statements, Unit::StatementsPerOp).note(format!(
            "{note}; per operation {:.2} commits, {:.1} rows changed, {:.1} rows read",
            b.commits, b.changed, b.read
        ))
    };
    Ok(Outcome::Ran(vec![
        figure(
            "queue.budget.send",
            "statements per single send",
            send,
            "Queue::send of one message",
        ),
        figure(
            "queue.budget.claim_ack.1",
            "statements per message, claimed and acked one at a time",
            one,
            "receive(1) then ack_batch of it, per message",
        ),
        figure(
            "queue.budget.claim_ack.100",
            "statements per message, claimed and acked 100 at a time",
            batch,
            "receive(100) then one ack_batch, per message",
        ),
        figure(
            "queue.budget.empty_claim",
            "statements per empty claim",
            empty,
            "receive(10) of an empty queue",
        ),
        figure(
            "queue.budget.take.1",
            "statements per message, taken one at a time",
            take_one,
            "begin, take_in(1), commit, per message",
        ),
        figure(
            "queue.budget.take.100",
            "statements per message, taken 100 at a time",
            take_batch,
            "begin, take_in(100), commit, per message",
        ),
    ]))
}

/// The session counters [`per_op`] reads, in this order.
const COUNTERS: &[&str] = &[
    "Questions",
    "Com_commit",
    "Handler_write",
    "Handler_update",
    "Handler_delete",
    "Handler_read_first",
    "Handler_read_key",
    "Handler_read_last",
    "Handler_read_next",
    "Handler_read_prev",
    "Handler_read_rnd",
    "Handler_read_rnd_next",
];

/// What one operation cost the server.
#[derive(Clone, Copy, Debug)]
struct Budget {
    statements: f64,
    commits: f64,
    changed: f64,
    read: f64,
}

/// What an operation of `phase` (`ops` operations) cost on `client`'s connections, less what
/// reading the counters costs.
async fn per_op<B: Db>(
    client: &sqlmq::Client<B>,
    ops: usize,
    phase: impl Future<Output = Result<()>>,
) -> Result<Budget> {
    let pool = client.pool();
    let a = B::counters(pool, COUNTERS).await?;
    let b = B::counters(pool, COUNTERS).await?;
    let before = B::counters(pool, COUNTERS).await?;
    phase.await?;
    let after = B::counters(pool, COUNTERS).await?;
    let per_op = |range: std::ops::Range<usize>| {
        let total: u64 = range
            .map(|i| delta_at(&before, &after, i).saturating_sub(delta_at(&a, &b, i)))
            .sum();
        total as f64 / ops as f64
    };
    Ok(Budget {
        statements: per_op(0..1),
        commits: per_op(1..2),
        changed: per_op(2..5),
        read: per_op(5..COUNTERS.len()),
    })
}

/// Take up to `n` messages in a transaction of their own and commit; fails when none was ready.
async fn take<B: Db>(client: &sqlmq::Client<B>, queue: &Queue<B>, n: usize) -> Result<()> {
    let mut tx = client.begin().await?;
    let got = queue.take_in(&mut tx, n).await?;
    tx.commit().await?;
    if got.is_empty() {
        bail!("nothing to take");
    }
    Ok(())
}

/// Claim up to `n` messages and ack them in one batch; fails when none was ready.
async fn claim_and_ack<B: Db>(queue: &Queue<B>, n: usize) -> Result<()> {
    let got = queue.receive(n, LEASE).await?;
    if got.is_empty() {
        bail!("nothing to claim");
    }
    let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
    queue.ack_batch(&receipts).await?;
    Ok(())
}
