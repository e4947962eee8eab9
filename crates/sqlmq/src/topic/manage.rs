//! Deleting topics and groups, and a topic's partitions' counters.

use super::Topic;
use crate::client::{Client, Subject};
use crate::domain::PartitionInfo;
use crate::domain::Result;
use crate::store::Backend;
use crate::store::SqlStore;
use crate::tx;

/// What a deletion removes.
#[derive(Clone, Copy)]
enum Deletion {
    Topic(i32),
    Group(i32),
}

/// Delete a topic's or a group's rows in transactions of their own, about a thousand rows each
/// (`delete_chunk` deletes one): a large topic or group goes without one huge transaction.
async fn delete_in_chunks<B: Backend>(
    client: &Client<B>,
    op: &'static str,
    what: Deletion,
) -> Result<()> {
    let store = client.store();
    while tx::run(client.conns(), op, |conn, _| {
        Box::pin(delete_chunk::<B>(store, conn, what))
    })
    .await?
        > 0
    {}
    Ok(())
}

/// One chunk of a deletion: the store's steps of it in order (one table each, the topic or
/// group row last), up to the first that still finds rows. Returns rows deleted; 0 when
/// nothing is left.
async fn delete_chunk<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    what: Deletion,
) -> Result<u64> {
    for step in 0.. {
        let deleted = match what {
            Deletion::Topic(id) => store.delete_topic_rows(conn, id, step).await?,
            Deletion::Group(id) => store.delete_group_rows(conn, id, step).await?,
        };
        match deleted {
            None => break,
            Some(0) => {}
            Some(n) => return Ok(n),
        }
    }
    Ok(0)
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
        delete_in_chunks(&self.client, "delete_group", Deletion::Group(group.id())).await
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
        let mut conn = self.client.conns().read().await?;
        let rows = self
            .client
            .inner
            .db
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
        delete_in_chunks(self, "delete_topic", Deletion::Topic(id)).await?;
        self.forget(Subject::Topic(id));
        Ok(())
    }
}
