//! Deleting topics and groups, and a topic's partitions' counters.

use super::Topic;
use crate::client::{Client, Subject};
use crate::domain::PartitionInfo;
use crate::domain::Result;
use crate::store::Backend;
use crate::store::prelude::*;
use crate::tx;

/// Delete a topic's or a group's rows in transactions of their own, about a thousand rows each
/// (`chunk` deletes one): a large topic or group goes without one huge transaction.
async fn delete_in_chunks<B: Backend, F>(
    client: &Client<B>,
    op: &'static str,
    chunk: F,
) -> Result<()>
where
    F: for<'c> Fn(&'c B::Store, &'c mut B::Connection) -> tx::TxFuture<'c, u64>,
{
    let store = client.store();
    while tx::run(client.pool(), op, |conn, _| chunk(store, conn)).await? > 0 {}
    Ok(())
}

impl<B: Backend> Topic<B> {
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
        let id = group.id();
        delete_in_chunks(&self.client, "delete_group", |store, conn| {
            Box::pin(store.delete_group_chunk(conn, id))
        })
        .await
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
        let mut conn = self.client.reader().acquire().await?;
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

impl<B: Backend> Client<B> {
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
        delete_in_chunks(self, "delete_topic", |store, conn| {
            Box::pin(store.delete_topic_chunk(conn, id))
        })
        .await?;
        self.forget(Subject::Topic(id));
        Ok(())
    }
}
