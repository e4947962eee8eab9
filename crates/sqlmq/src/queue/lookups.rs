//! Creating, finding and deleting queues, and their counts: methods of [`Client`], built here
//! so that the client module needs to know nothing of queues.

use super::Queue;
use crate::client::{Client, Subject};
use crate::domain::{Error, QueueConfig, QueueStats, Result, validate_name};
use crate::store::Backend;
use crate::store::prelude::*;

impl<B: Backend> Client<B> {
    /// ```
    pub async fn create_queue(&self, name: &str, config: QueueConfig) -> Result<Queue<B>> {
        validate_name("queue", name)?;
        config.validate()?;
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        let row = self
            .inner
            .store
            .upsert_queue(&mut conn, name, &config)
            .await?;
        Ok(Queue::new(self.clone(), row.id, row.name))
    }

    /// ```
    pub async fn queue(&self, name: &str) -> Result<Queue<B>> {
        validate_name("queue", name)?;
        self.require_schema()?;
        let mut conn = self.reader().acquire().await?;
        match self.inner.store.queue_by_name(&mut conn, name).await? {
            Some(row) => Ok(Queue::new(self.clone(), row.id, row.name)),
            None => Err(Error::UnknownQueue(name.to_owned())),
        }
    }

    /// ```
    pub async fn queue_configs(&self) -> Result<Vec<(String, QueueConfig)>> {
        self.require_schema()?;
        let mut conn = self.reader().acquire().await?;
        let rows = self.inner.store.all_queues(&mut conn).await?;
        Ok(rows.into_iter().map(|r| (r.name, r.config)).collect())
    }

    /// ```
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>> {
        self.require_schema()?;
        let store = &self.inner.store;
        let mut conn = self.reader().acquire().await?;
        let queues = store.all_queues(&mut conn).await?;
        let counts = store.counts(&mut conn).await?;
        let mut out = Vec::with_capacity(queues.len());
        for q in queues {
            let c = counts.get(&q.id).copied().unwrap_or_default();
            let oldest = if c.ready > 0 {
                store.oldest_ready_us(&mut conn, q.id).await?
            } else {
                None
            };
            out.push(QueueStats {
                name: q.name,
                paused: q.paused,
                ready: c.ready,
                scheduled: c.scheduled,
                blocked: c.blocked,
                in_flight: c.in_flight,
                dead: c.dead,
                oldest_ready_age_ms: oldest.map(|us| (us.max(0) / 1000) as u64),
            });
        }
        Ok(out)
    }

    /// ```
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let queue = self.queue(name).await?;
        queue.purge().await?;
        queue.purge_dead_letters().await?;
        let mut conn = self.inner.pool.acquire().await?;
        self.inner
            .store
            .delete_queue_row(&mut conn, queue.id())
            .await?;
        self.forget(Subject::Queue(queue.id()));
        Ok(())
    }
}
