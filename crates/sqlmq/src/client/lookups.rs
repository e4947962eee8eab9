//! Counts of worker processes and the wakeup probes (queues and topics are found by their own
//! modules: `queue/lookups.rs`, `topic/lookups.rs`).

use crate::domain::{ProcessInfo, Result};
use crate::store::Backend;
use crate::store::prelude::*;
use crate::store::rows::{GroupSignal, QueueSignal};

use super::Client;

impl<B: Backend> Client<B> {
    /// The wakeup probe over `queue_ids` (one non-locking query).
    pub(crate) async fn probe(&self, queue_ids: &[i32]) -> Result<Vec<QueueSignal>> {
        if queue_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.reader().acquire().await?;
        self.inner.store.probe(&mut conn, queue_ids).await
    }

    /// The wakeup probe over consumer groups `group_ids` (one non-locking query).
    pub(crate) async fn probe_groups(&self, group_ids: &[i32]) -> Result<Vec<GroupSignal>> {
        let mut conn = self.reader().acquire().await?;
        self.inner.store.probe_groups(&mut conn, group_ids).await
    }

    /// Every registered worker process.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for p in client.processes().await? { println!("{} {:?}", p.id, p.silent_for) }
    /// # Ok(()) }
    /// ```
    pub async fn processes(&self) -> Result<Vec<ProcessInfo>> {
        self.require_schema()?;
        let mut conn = self.reader().acquire().await?;
        self.inner.store.processes(&mut conn).await
    }
}
