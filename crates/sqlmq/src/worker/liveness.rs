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

use std::time::{Duration, Instant};

use rand::RngExt;
use tokio_util::sync::CancellationToken;

use super::WorkerBuilder;
use super::schema::SchemaWatch;
use crate::client::Client;
use crate::consume::Consumer;
use crate::consume::SourceId;
use crate::domain::Result;
use crate::source::Source;
use crate::store::Backend;
use crate::store::rows::ProcessRegistration;

/// Rows released per transaction.
const RELEASE_BATCH: usize = 500;
/// The schema version is read every this many heartbeats.
const SCHEMA_EVERY: u64 = 3;

/// This process's registration.
pub(crate) struct Registration<B: Backend> {
    pub client: Client<B>,
    pub sources: Vec<Source<B>>,
    pub interval: Duration,
    /// The schema version, looked at with each heartbeat.
    pub schema: SchemaWatch,
}

impl<B: Backend> Registration<B> {
    fn silence(&self) -> Duration {
        // Saturating: an interval of `Duration::MAX` (never silent for long enough) is valid.
        self.interval
            .saturating_mul(WorkerBuilder::MISSED_HEARTBEATS)
    }

    fn queue_ids(&self) -> Vec<i32> {
        let queues = self.sources.iter().filter_map(|s| match s {
            Source::Queue(q) => Some(q.id()),
            Source::Group(_) => None,
        });
        queues.collect()
    }

    pub(crate) async fn register(&self) -> Result<()> {
        let store = self.client.store();
        let mut conn = self.client.conns().acquire().await?;
        let host = self
            .client
            .owner_id()
            .split(':')
            .next()
            .unwrap_or("localhost");
        let registration = ProcessRegistration {
            id: self.client.owner_id(),
            kind: "worker",
            host,
            pid: std::process::id() as i32,
            queue_ids: &self.queue_ids(),
            silence: self.silence(),
        };
        store.register_process(&mut conn, &registration).await
    }

    /// Heartbeat, watch the others and the schema until `stop`; a newer schema cancels
    /// `claims` (see `schema.rs`).
    pub(crate) async fn run(&self, stop: CancellationToken, claims: CancellationToken) {
        for beat in 0u64.. {
            let wait = self.interval.mul_f64(rand::rng().random_range(0.9..1.1));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.cancelled() => return,
            }
            let outage = self.client.outage();
            let started = Instant::now();
            match self.beat().await {
                Ok(()) => outage.succeeded(),
                // An unavailable database is logged once, by the client's outage.
                Err(e) if outage.failed_since(&e, started) => continue,
                Err(e) => tracing::warn!("heartbeat failed: {e}"),
            }
            // The schema every third beat (15 s by default): a rolling upgrade waits that
            // long, and an idle worker spends a statement less per beat.
            if beat % SCHEMA_EVERY == 0
                && let Err(e) = self.schema.check(&self.client, &claims).await
                && !outage.failed_since(&e, started)
            {
                tracing::warn!("reading the schema version failed: {e}");
            }
            if let Err(e) = self.reap().await
                && !outage.failed_since(&e, started)
            {
                tracing::warn!("releasing dead processes' claims failed: {e}");
            }
        }
    }

    async fn beat(&self) -> Result<()> {
        let store = self.client.store();
        let mut conn = self.client.conns().acquire().await?;
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
        let store = self.client.store();
        let dead = {
            let mut conn = self.client.conns().read().await?;
            store.dead_processes(&mut conn).await?
        };
        for process in dead.iter().filter(|p| p.id != self.client.owner_id()) {
            // Forget it first, and only if it is still silent: a slow process that heartbeats
            // now keeps its claims, and of two reapers only one releases them. A process that
            // comes back after this finds its row gone, registers again, and its stale acks are
            // refused by fencing.
            let pruned = {
                let mut conn = self.client.conns().acquire().await?;
                store.prune_process(&mut conn, &process.id).await?
            };
            if !pruned {
                continue;
            }
            let reason = format!("process {} stopped heartbeating", process.id);
            let mut released = 0;
            for &queue_id in &process.queue_ids {
                let source = SourceId::Queue(queue_id);
                released += release(&self.client, source, &process.id, &reason).await?;
            }
            // Groups are not listed in the process row: a member may join any group at any
            // time. Its leases say where it holds records.
            let groups = {
                let mut conn = self.client.conns().read().await?;
                store.groups_of_owner(&mut conn, &process.id).await?
            };
            for group_id in groups {
                let source = SourceId::Group(group_id);
                released += release(&self.client, source, &process.id, &reason).await?;
            }
            tracing::warn!(
                process = process.id,
                released,
                "released the claims of a dead process"
            );
            metrics::counter!(crate::telemetry::catalogue::RELEASED_FROM_DEAD_PROCESS.name())
                .increment(released as u64);
        }
        Ok(())
    }

    /// Clean exit: release what this process still holds, then remove its row.
    pub(crate) async fn deregister(&self) -> Result<usize> {
        let (mut released, owner) = (0, self.client.owner_id());
        for source in &self.sources {
            let consumer = source.consumer();
            released += consumer
                .release_owned(owner, "worker shut down", RELEASE_BATCH)
                .await?;
        }
        let mut conn = self.client.conns().acquire().await?;
        self.client
            .store()
            .deregister_process(&mut conn, self.client.owner_id())
            .await?;
        Ok(released)
    }
}

/// Release every lease `owner` holds in `source` (of a dead process: its name is unknown here,
/// and only the source's id is needed).
async fn release<B: Backend>(
    client: &Client<B>,
    source: SourceId,
    owner: &str,
    reason: &str,
) -> Result<usize> {
    let consumer = Consumer {
        client,
        id: source,
        name: match source {
            SourceId::Queue(id) => format!("queue #{id}"),
            SourceId::Group(id) => format!("group #{id}"),
        },
    };
    consumer.release_owned(owner, reason, RELEASE_BATCH).await
}
