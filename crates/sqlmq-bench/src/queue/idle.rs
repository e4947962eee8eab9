//! `queue.idle`: what one idle consumer costs the database. A consumer polls an empty queue
//! with the adaptive delay of `sqlmq consume` (10 ms doubling to 1 s, ± 20 %); after a ramp
//! during which its delay climbs to the cap, the statements the server executes for it are
//! counted over a window.
//!
//! Counting: the consumer has a client of its own whose pool holds 2 connections; at each end of
//! the window the consumer task itself (between two polls, when no connection is in use) reads
//! `SHOW SESSION STATUS LIKE 'Questions'` on every connection of its pool, keyed by
//! `CONNECTION_ID()`. The difference is what its polls cost, minus the statements of the
//! reading itself (measured by two back-to-back readings before the window). `Questions`
//! counts statements sent by clients, prepared-statement executions included; it does not count
//! pings (sqlx pings a connection before reusing it) or prepares. Session counters are exact
//! even when other clients use the server, unlike the global ones.
//!
//! SQLite has no server and no such counter: there the scenario reports itself not available
//! ([`Db::NO_STATEMENT_COUNTER`]) rather than a number.

use std::time::Instant;

use anyhow::{Result, bail};
use sqlmq::{Queue, QueueConfig};

use crate::args::LEASE;
use crate::backend::{Db, delta, not_available, reading_overhead};
use crate::context::Ctx;
use crate::outcome::Outcome;
use crate::report::{Figure, Unit};
use sqlmq_cli_common::poll::PollDelay;

/// Messages per claim of the idle consumer.
const BATCH: usize = 10;

/// `queue.idle`.
pub async fn idle<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    if let Some(why) = B::NO_STATEMENT_COUNTER {
        return Ok(Outcome::NotAvailable(not_available::<B>(why)));
    }
    let plan = &ctx.plan;
    let bar = ctx.bar("queue.idle");
    // Its own client: the pool then holds only this consumer's connections.
    let client = ctx.client("idle", 2).await?;
    let result = async {
        let queue = client.create_queue("idle", QueueConfig::default()).await?;
        let pool = client.pool();
        let mut poll = PollDelay::default();
        let ramp = plan.idle_ramp.as_millis() as u64;
        let window = plan.idle_window.as_millis() as u64;
        bar.phase("ramp-up (ms)", ramp);
        let started = Instant::now();
        while started.elapsed() < plan.idle_ramp {
            poll_once(&queue, &mut poll).await?;
            bar.set(started.elapsed().as_millis() as u64);
        }
        let overhead = reading_overhead(pool).await?;
        bar.phase("counting statements (ms)", window);
        let before = B::statements(pool).await?;
        let t0 = Instant::now();
        let mut polls = 0u64;
        while t0.elapsed() < plan.idle_window {
            poll_once(&queue, &mut poll).await?;
            polls += 1;
            bar.set(t0.elapsed().as_millis() as u64);
        }
        let after = B::statements(pool).await?;
        let elapsed = t0.elapsed();
        let executed = delta(&before, &after).saturating_sub(overhead);
        anyhow::Ok((executed, polls, elapsed))
    }
    .await;
    bar.finish();
    ctx.release(client).await?;
    let (executed, polls, elapsed) = result?;
    let secs = elapsed.as_secs_f64();
    Ok(Outcome::Ran(vec![
        Figure::new(
            "queue.idle.queries",
            "sqlmq idle consumer, statements",
            executed as f64 / secs,
            Unit::QueriesPerS,
        )
        .note(format!(
            "{executed} statements for {polls} empty claims in {secs:.1} s ({:.2} claims/s), \
             counted with per-session Questions counters",
            polls as f64 / secs
        )),
    ]))
}

/// One poll of an empty queue, then the adaptive wait.
async fn poll_once<B: Db>(queue: &Queue<B>, poll: &mut PollDelay) -> Result<()> {
    if !queue.receive(BATCH, LEASE).await?.is_empty() {
        bail!("the idle queue received a message");
    }
    tokio::time::sleep(poll.next_delay()).await;
    Ok(())
}
