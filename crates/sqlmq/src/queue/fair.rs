//! A fair queue's keys: their weights and backlogs (the mode is the queue's configuration,
//! [`QueueConfig::fair`](crate::QueueConfig::fair); the start times are the store's,
//! `store/body/fair.rs`).

use super::Queue;
use crate::domain::{FairnessKey, Result};
use crate::store::Backend;

impl<B: Backend> Queue<B> {
    /// Set fairness key `key`'s weight (1 to [`MAX_WEIGHT`](crate::queue::MAX_WEIGHT); every
    /// key starts at 1): while several keys have messages ready, each gets claims in
    /// proportion to its weight. It applies to the key's messages that become ready after it;
    /// the empty key is that of messages sent without one. A key may be weighted before it
    /// sends anything.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// q.set_weight("enterprise-7", 3).await?; // three times a default key's share
    /// # Ok(()) }
    /// ```
    pub async fn set_weight(&self, key: &str, weight: u32) -> Result<()> {
        self.client.require_schema()?;
        let mut conn = self.conns().acquire().await?;
        self.store()
            .set_weight(&mut conn, self.id(), key, weight)
            .await
    }

    /// The `limit` fairness keys (at most 1 024) with the most messages ready, most first, each
    /// with its weight, messages in flight, the age of its oldest ready message and its
    /// counters (`arrived`, `settled`: their rates are the key's arrival and completion
    /// rates); then keys with messages in flight and nothing ready; then keys with a weight
    /// set and neither. It counts every ready message of the queue: an operator's view, not
    /// something to call per message.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// for k in q.fairness_keys(10).await? {
    ///     println!(
    ///         "{:>12} ×{} {} ready, {} in flight, oldest {} ms; {} arrived, {} settled",
    ///         k.key, k.weight, k.ready, k.in_flight, k.oldest_ready_ms, k.arrived, k.settled
    ///     );
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn fairness_keys(&self, limit: usize) -> Result<Vec<FairnessKey>> {
        self.client.require_schema()?;
        let mut conn = self.conns().read().await?;
        self.store()
            .fairness_keys(&mut conn, self.id(), limit)
            .await
    }
}
