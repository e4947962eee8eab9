//! Liveness without a master: every worker process registers and heartbeats; every live one
//! watches the others and releases the claims of any that went silent.
//!
//! A process is dead once it missed three heartbeats (its row's `expires_at` passed). The first
//! live process to notice deletes its row — only while it is still silent, and only one reaper
//! succeeds — then releases the dead one's leases on every queue it consumed — back to `ready`
//! at once, instead of after their (possibly long) leases — and in every consumer group where it
//! holds leases (for the group's other members to take at once). Releases take rows with
//! `SKIP LOCKED`, so running them anywhere at the same time is harmless.
//! Leases stay the authority: a process that was only slow finds its claims gone and its acks
//! rejected by fencing, and re-registers when its next heartbeat finds its row missing.

use std::time::Duration;

use rand::RngExt;
use tokio_util::sync::CancellationToken;

use super::source::Source;
use crate::client::Client;
use crate::consume::{RetryPolicy, decide};
use crate::domain::Failure;
use crate::domain::Result;

/// Default interval between heartbeats (EMS renews client leases every 5 s).
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// Heartbeats a process may miss before it is declared dead.
pub const MISSED_HEARTBEATS: u32 = 3;

/// Rows released per transaction.
const RELEASE_BATCH: usize = 500;

/// This process's registration.
pub(crate) struct Registration {
    pub client: Client,
    pub sources: Vec<Source>,
    pub interval: Duration,
}

impl Registration {
    fn silence(&self) -> Duration {
        self.interval * MISSED_HEARTBEATS
    }

    fn queue_ids(&self) -> Vec<i32> {
        let queues = self.sources.iter().filter_map(|s| match s {
            Source::Queue(q) => Some(q.id()),
            Source::Group(_) => None,
        });
        queues.collect()
    }

    pub(crate) async fn register(&self) -> Result<()> {
        let store = &self.client.inner.store;
        let mut conn = self.client.pool().acquire().await?;
        let host = self
            .client
            .owner_id()
            .split(':')
            .next()
            .unwrap_or("localhost");
        store
            .register_process(
                &mut conn,
                self.client.owner_id(),
                "worker",
                host,
                &self.queue_ids(),
                self.silence(),
            )
            .await
    }

    /// Heartbeat and watch the others until `stop`.
    pub(crate) async fn run(&self, stop: CancellationToken) {
        loop {
            let wait = self.interval.mul_f64(rand::rng().random_range(0.9..1.1));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.cancelled() => return,
            }
            if let Err(e) = self.beat().await {
                tracing::warn!("heartbeat failed: {e}");
            }
            if let Err(e) = self.reap().await {
                tracing::warn!("releasing dead processes' claims failed: {e}");
            }
        }
    }

    async fn beat(&self) -> Result<()> {
        let store = &self.client.inner.store;
        let mut conn = self.client.pool().acquire().await?;
        if !store
            .heartbeat(&mut conn, self.client.owner_id(), self.silence())
            .await?
        {
            tracing::warn!(
                process = self.client.owner_id(),
                "this process was declared dead by a peer (missed heartbeats); its claims were \
                 released. Registering again"
            );
            drop(conn);
            self.register().await?;
        }
        Ok(())
    }

    /// Forget every dead process and release its claims.
    async fn reap(&self) -> Result<()> {
        let store = &self.client.inner.store;
        let dead = {
            let mut conn = self.client.pool().acquire().await?;
            store.dead_processes(&mut conn).await?
        };
        for process in dead.iter().filter(|p| p.id != self.client.owner_id()) {
            // Forget it first, and only if it is still silent: a slow process that heartbeats
            // now keeps its claims, and of two reapers only one releases them. A process that
            // comes back after this finds its row gone, registers again, and its stale acks are
            // refused by fencing.
            let pruned = {
                let mut conn = self.client.pool().acquire().await?;
                store.prune_process(&mut conn, &process.id).await?
            };
            if !pruned {
                continue;
            }
            let reason = format!("process {} stopped heartbeating", process.id);
            let mut released = 0;
            for &queue_id in &process.queue_ids {
                released += release_all(&self.client, queue_id, &process.id, &reason).await?;
            }
            // Groups are not listed in the process row: a member may join any group at any
            // time. Its leases say where it holds records.
            let groups = {
                let mut conn = self.client.pool().acquire().await?;
                store.groups_of_owner(&mut conn, &process.id).await?
            };
            for group_id in groups {
                released += release_group(&self.client, group_id, &process.id, &reason).await?;
            }
            tracing::warn!(
                process = process.id,
                released,
                "released the claims of a dead process"
            );
            metrics::counter!("sqlmq_released_from_dead_process_total").increment(released as u64);
        }
        Ok(())
    }

    /// Clean exit: release what this process still holds, then remove its row.
    pub(crate) async fn deregister(&self) -> Result<usize> {
        let (mut released, owner) = (0, self.client.owner_id());
        for source in &self.sources {
            let reason = "worker shut down";
            released += match source {
                Source::Queue(q) => release_all(&self.client, q.id(), owner, reason).await?,
                Source::Group(g) => release_group(&self.client, g.id(), owner, reason).await?,
            };
        }
        let mut conn = self.client.pool().acquire().await?;
        self.client
            .inner
            .store
            .deregister_process(&mut conn, self.client.owner_id())
            .await?;
        Ok(released)
    }
}

/// Release every lease `owner` holds on `queue_id`, in small transactions.
async fn release_all(client: &Client, queue_id: i32, owner: &str, reason: &str) -> Result<usize> {
    let store = &client.inner.store;
    let mut total = 0;
    loop {
        let released = crate::tx::run(client.pool(), "release_owned", |conn, _| {
            Box::pin(async move {
                let Some(queue) = store.queue_by_id(conn, queue_id).await? else {
                    return Ok(0); // the queue was deleted with its leases
                };
                let policy = RetryPolicy::of(queue.config.max_attempts, &queue.config.backoff);
                let decide = |attempts| decide(Failure::Released { reason }, attempts, policy);
                let r = store
                    .release_owned(conn, queue.id, owner, RELEASE_BATCH, &decide)
                    .await?;
                Ok(r.released + r.dead_lettered)
            })
        })
        .await?;
        total += released;
        if released < RELEASE_BATCH {
            return Ok(total);
        }
    }
}

/// Release every lease `owner` holds in consumer group `group_id`, in small transactions.
async fn release_group(client: &Client, group_id: i32, owner: &str, reason: &str) -> Result<usize> {
    let store = &client.inner.store;
    let mut total = 0;
    loop {
        let released = crate::tx::run(client.pool(), "release_group_owned", |conn, _| {
            Box::pin(async move {
                let Some(group) = store.group_by_id(conn, group_id).await? else {
                    return Ok(0); // the group was deleted with its leases
                };
                let policy = RetryPolicy::of(group.config.max_attempts, &group.config.backoff);
                let decide = |attempts| decide(Failure::Released { reason }, attempts, policy);
                let r = store
                    .release_group_owned(conn, group.id, owner, RELEASE_BATCH, &decide)
                    .await?;
                Ok(r.released + r.dead_lettered)
            })
        })
        .await?;
        total += released;
        if released < RELEASE_BATCH {
            return Ok(total);
        }
    }
}
