//! Deleting topics and groups, and a topic's partitions' counters.

use super::Topic;
use crate::client::{Client, Subject};
use crate::domain::PartitionInfo;
use crate::domain::Result;
use crate::store::mysql::{groups::DELETE_GROUP, topics::DELETE_TOPIC};
use crate::tx;

/// Rows deleted per transaction when a topic or a group goes (the `LIMIT` of its statements).
const DELETE_CHUNK: u64 = 1000;

/// Run each of `statements` (one parameter: `id`) in transactions of its own until it deletes
/// fewer than [`DELETE_CHUNK`] rows: a large topic or group goes without one huge transaction.
async fn delete_in_chunks(
    client: &Client,
    op: &'static str,
    statements: &'static [&'static str],
    id: i32,
) -> Result<()> {
    let store = &client.inner.store;
    for &statement in statements {
        loop {
            let deleted = tx::run(client.pool(), op, |conn, _| {
                Box::pin(store.delete_chunk(conn, statement, id))
            })
            .await?;
            if deleted < DELETE_CHUNK {
                break;
            }
        }
    }
    Ok(())
}

impl Topic {
    /// Delete a group with its position, leases, retries, dead letters and history (in small
    /// transactions). Stop its members first.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// t.delete_group("old-consumer").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_group(&self, name: &str) -> Result<()> {
        let group = self.group(name).await?;
        delete_in_chunks(&self.client, "delete_group", &DELETE_GROUP, group.id()).await
    }

    /// Every partition's retained offset range and size, as stored now.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let records: i64 = t.partitions().await?.iter().map(|p| p.end - p.start).sum();
    /// # Ok(()) }
    /// ```
    pub async fn partitions(&self) -> Result<Vec<PartitionInfo>> {
        self.client.require_schema()?;
        let mut conn = self.client.pool().acquire().await?;
        let rows = self
            .client
            .inner
            .store
            .partitions(&mut conn, self.id())
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| PartitionInfo {
                partition: r.partition as u32,
                start: r.low_offset,
                end: r.next_offset,
                bytes: r.bytes,
            })
            .collect())
    }
}

impl Client {
    /// Delete a topic with its records and every consumer group (in small transactions).
    /// Stop its producers and consumers first: a publish through a handle taken before the
    /// deletion would leave rows nobody reads.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.delete_topic("old-events").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        let topic = self.topic(name).await?;
        for group in topic.groups().await? {
            topic.delete_group(group.name()).await?;
        }
        let id = topic.id();
        delete_in_chunks(self, "delete_topic", &DELETE_TOPIC, id).await?;
        self.inner
            .wakeups
            .lock()
            .expect("poisoned")
            .remove(&Subject::Topic(id));
        Ok(())
    }
}
