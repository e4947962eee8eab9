//! `queue.budget`: what each queue operation costs the server, in statements. One client with
//! a pool of its own sends single messages, claims and acks them one at a time (the steady
//! state of mixed traffic, where a claim finds one or two messages), claims and acks batches of
//! 100, and claims an empty queue; around each phase the per-session `Questions` counters of
//! every connection of its pool are read (as in `queue.idle`, which explains the counter and
//! why session counters are exact on a shared server). A statement inside a multi-statement
//! text query counts once, like any other.
//!
//! SQLite has no such counter: there the scenario reports itself not available.

use std::future::Future;

use anyhow::{Result, bail};
use sqlmq::{Message, Queue, QueueConfig};

use crate::args::LEASE;
use crate::backend::{Db, delta, not_available};
use crate::context::Ctx;
use crate::registry::Outcome;
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
        bar.phase("phases", 4);
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
        anyhow::Ok((send, one, batch, empty))
    }
    .await;
    bar.finish();
    ctx.release(client).await?;
    let (send, one, batch, empty) = result?;
    let figure = |key: &str, label: &str, v: f64, note: &str| {
        Figure::new(key, label, v, Unit::StatementsPerOp).note(note.to_owned())
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
    ]))
}

/// Statements per operation of `phase` (`ops` operations) on `client`'s connections, less what
/// reading the counters costs.
async fn per_op<B: Db>(
    client: &sqlmq::Client<B>,
    ops: usize,
    phase: impl Future<Output = Result<()>>,
) -> Result<f64> {
    let pool = client.pool();
    let a = B::statements(pool).await?;
    let b = B::statements(pool).await?;
    let overhead = delta(&a, &b);
    let before = B::statements(pool).await?;
    phase.await?;
    let after = B::statements(pool).await?;
    Ok(delta(&before, &after).saturating_sub(overhead) as f64 / ops as f64)
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
