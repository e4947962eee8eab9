//! `worker.fleet`: a fleet of idle worker processes on one database — what they cost the server
//! together while nothing comes, and how soon one of them starts a message sent by another
//! process. Each "process" is a client of its own (its own pool, probe, heartbeat and, where
//! the server allows, its own follower of the database's commits), as separate processes
//! would be; each works its own queue, so a send wakes exactly one.

use std::time::Duration;

use anyhow::Result;
use sqlmq::{Client, QueueConfig};

use super::backend::{Db, count_statements, not_available};
use super::context::Ctx;
use super::measure::Latencies;
use super::outcome::Outcome as Ran;
use super::queue::with_client;
use super::report::{Figure, Unavailable, Unit};
use super::worker::{DEFAULT_CEILING, Timed, one_sample, producer, settle};

/// Worker processes in the fleet.
pub const FLEET: usize = 20;
/// How long the fleet settles when notifications are live: their probes climb to a 3 s
/// ceiling (10 ms doubling), and a third of the fleet should have reached it.
const NOTIFIED_SETTLE: Duration = Duration::from_secs(9);

/// `worker.fleet`.
pub async fn fleet<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let plan = &ctx.plan;
    let bar = ctx.bar("worker.fleet");
    let b = bar.clone();
    let (statements, latency, notifications) = with_client(ctx, "wflt", 2, |first| async move {
        let mut clients = vec![first.clone()];
        for _ in 1..FLEET {
            clients.push(
                Client::builder()
                    .table_prefix(first.table_prefix())
                    .max_connections(2)
                    .open::<B>(&ctx.scratch.url)
                    .await?,
            );
        }
        let mut workers = Vec::new();
        for (i, client) in clients.iter().enumerate() {
            let name = format!("wflt{i}");
            first.create_queue(&name, QueueConfig::default()).await?;
            workers.push(Timed::start(client, &name, DEFAULT_CEILING));
        }
        let (other, _) = producer(ctx, &first, "wflt0").await?;
        b.phase(&format!("{FLEET} idle workers: settling"), 1);
        // Until the first follower has said whether it runs (a few ms; connect time at most).
        for _ in 0..100 {
            if !matches!(
                first.notifications(),
                sqlmq::client::NotificationStatus::Starting
                    | sqlmq::client::NotificationStatus::NotStarted
            ) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let notifications = first.notifications();
        tokio::time::sleep(if notifications.is_live() {
            NOTIFIED_SETTLE
        } else {
            settle(DEFAULT_CEILING)
        })
        .await;
        let statements = if B::NO_STATEMENT_COUNTER.is_none() {
            b.phase(&format!("{FLEET} idle workers: counting statements"), 1);
            let pools: Vec<_> = clients.iter().map(|c| c.pool()).collect();
            Some(count_statements(&pools, plan.tradeoff_window).await?)
        } else {
            None
        };
        b.phase(
            &format!("{FLEET} idle workers: wakeups"),
            plan.tradeoff_samples,
        );
        let latencies = Latencies::default();
        for i in 0..plan.tradeoff_samples as usize {
            let n = i % FLEET;
            let q = other.queue(&format!("wflt{n}")).await?;
            tokio::time::sleep(settle(DEFAULT_CEILING)).await;
            latencies.record(one_sample(&q, &workers[n]).await?);
            b.set(i as u64 + 1);
        }
        for worker in workers {
            worker.stop().await?;
        }
        other.pool().close().await;
        for c in clients.iter().skip(1) {
            c.pool().close().await;
        }
        Ok((statements, latencies.summary(), notifications))
    })
    .await?;
    bar.finish();
    let mut figures = Vec::new();
    let label = format!("sqlmq fleet of {FLEET} idle workers");
    let unavailable = match statements {
        Some((n, window)) => {
            let rate = n as f64 / window.as_secs_f64();
            figures.push(
                Figure::new("worker.fleet.queries", label, rate, Unit::QueriesPerS).note(format!(
                    "{n} statements in {:.1} s from {FLEET} idle worker processes together \
                     ({:.2}/s each: probes, heartbeats, maintenance), per-session Questions \
                     counters; notifications {notifications}",
                    window.as_secs_f64(),
                    rate / FLEET as f64
                )),
            );
            Vec::new()
        }
        None => vec![Unavailable {
            key: "worker.fleet.queries".into(),
            label,
            reason: not_available::<B>(B::NO_STATEMENT_COUNTER.unwrap_or_default()),
        }],
    };
    figures.push(
        Figure::latency(
            "worker.fleet.latency",
            format!("sqlmq fleet of {FLEET}: idle wakeup"),
            latency,
        )
        .note(format!(
            "send from another client to one idle worker of the fleet → handler start; \
             notifications {notifications}"
        )),
    );
    if unavailable.is_empty() {
        Ok(Ran::Ran(figures))
    } else {
        Ok(Ran::Partly(figures, unavailable))
    }
}
