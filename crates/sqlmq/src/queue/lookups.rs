//! Creating, finding and deleting queues, and their counts: methods of [`Client`], built here
//! so that the client module needs to know nothing of queues.

use super::Queue;
use crate::client::{Client, Subject};
use crate::domain::{Error, QueueConfig, QueueStats, Result, validate_name};
use crate::store::Backend;
use crate::tx;

impl<B: Backend> Client<B> {
    /// Create a queue, or update the configuration of an existing one (its messages are kept).
    /// Declaring queues at application start-up is the intended use.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// use sqlmq::QueueConfig;
    /// use sqlmq::queue::Backoff;
    /// let config = QueueConfig::default().max_attempts(5).backoff("10s,1m,10m".parse()?);
    /// let q = client.create_queue("webhooks", config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_queue(&self, name: &str, config: QueueConfig) -> Result<Queue<B>> {
        validate_name("queue", name)?;
        config.validate()?;
        self.require_schema()?;
        let (store, config) = (&self.inner.db.store, &config);
        // The queue row and its limits row together.
        let row = tx::run(&self.inner.db.conns, "create_queue", |conn, _| {
            Box::pin(store.upsert_queue(conn, name, config))
        })
        .await?;
        Ok(Queue::new(
            self.clone(),
            row.id,
            row.name,
            row.config.is_limited(),
        ))
    }

    /// A handle to an existing queue.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// match client.queue("emails").await {
    ///     Ok(q) => println!("found {}", q.name()),
    ///     Err(sqlmq::Error::UnknownQueue(name)) => println!("no queue {name}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn queue(&self, name: &str) -> Result<Queue<B>> {
        validate_name("queue", name)?;
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        match self.inner.db.store.queue_by_name(&mut conn, name).await? {
            Some(row) => Ok(Queue::new(
                self.clone(),
                row.id,
                row.name,
                row.config.is_limited(),
            )),
            None => Err(Error::UnknownQueue(name.to_owned())),
        }
    }

    /// The configuration of every queue, by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for (name, config) in client.queue_configs().await? { println!("{name}: {config:?}") }
    /// # Ok(()) }
    /// ```
    pub async fn queue_configs(&self) -> Result<Vec<(String, QueueConfig)>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self.inner.db.store.all_queues(&mut conn).await?;
        Ok(rows.into_iter().map(|r| (r.name, r.config)).collect())
    }

    /// Counts of every queue's messages by state, sorted by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for s in client.queue_stats().await? { println!("{} {}", s.name, s.ready) }
    /// # Ok(()) }
    /// ```
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>> {
        self.require_schema()?;
        // One snapshot: each state is a table of its own, and a message moving between two
        // of them (a claim, a nack) while they were counted by statements at different
        // instants would be counted twice or not at all.
        tx::snapshot(self.conns(), |conn, _| {
            Box::pin(self.read_queue_stats(conn))
        })
        .await
    }

    /// The counts as the reads on `conn` see them.
    async fn read_queue_stats(&self, conn: &mut B::Connection) -> Result<Vec<QueueStats>> {
        let store = &self.inner.db.store;
        let queues = store.all_queues(&mut *conn).await?;
        let counts = store.counts(&mut *conn).await?;
        let mut out = Vec::with_capacity(queues.len());
        for q in queues {
            let c = counts.get(&q.id).copied().unwrap_or_default();
            let oldest = if c.ready > 0 {
                store.oldest_ready_us(&mut *conn, q.id).await?
            } else {
                None
            };
            out.push(QueueStats {
                name: q.name,
                paused: q.paused,
                ready: c.ready,
                scheduled: c.scheduled,
                blocked: c.blocked,
                waiting: c.waiting,
                in_flight: c.in_flight,
                dead: c.dead,
                oldest_ready_age_ms: oldest.map(|us| (us.max(0) / 1000) as u64),
            });
        }
        Ok(out)
    }

    /// Delete a queue with all its messages and dead letters. Stop its producers first: a
    /// message sent while the queue is being deleted may be lost with it, and a `Queue` handle
    /// taken before the deletion is not re-checked on send (its messages would be orphans, never
    /// delivered).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.delete_queue("old-jobs").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let queue = self.queue(name).await?;
        queue.purge().await?;
        queue.purge_dead_letters().await?;
        let mut conn = self.inner.db.conns.acquire().await?;
        self.inner
            .db
            .store
            .delete_queue_row(&mut conn, queue.id())
            .await?;
        self.forget(Subject::Queue(queue.id()));
        Ok(())
    }
}
