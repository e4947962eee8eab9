//! Deleting a topic, and its partitions' counters.

use serde::Serialize;

use super::Topic;
use crate::client::{Client, Subject};
use crate::error::Result;
use crate::store::mysql::MySqlStore;
use crate::tx;

/// Rows deleted per transaction when a topic or a group goes.
const DELETE_CHUNK: u64 = 1000;

/// One partition of a topic: its retained offsets and bytes.
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
/// for p in t.partitions().await? {
///     println!("partition {}: offsets {}..{} ({} bytes)", p.partition, p.start, p.end, p.bytes);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PartitionInfo {
    /// The partition.
    pub partition: u32,
    /// The first offset still retained.
    pub start: i64,
    /// The end: the offset the next record will get (records so far, retention aside).
    pub end: i64,
    /// Bytes of bodies retained.
    pub bytes: i64,
}

impl Topic {
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
        let (store, id) = (&self.inner.store, topic.id());
        for table in 0..=MySqlStore::TOPIC_TABLE_COUNT {
            loop {
                let deleted = tx::run(self.pool(), "delete_topic", |conn, _| {
                    Box::pin(store.delete_topic_chunk(conn, id, table))
                })
                .await?;
                if deleted < DELETE_CHUNK {
                    break;
                }
            }
        }
        self.inner
            .wakeups
            .lock()
            .expect("poisoned")
            .remove(&Subject::Topic(id));
        Ok(())
    }
}
