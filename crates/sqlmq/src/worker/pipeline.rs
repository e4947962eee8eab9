//! Exactly-once pipelines: a handler's [`JobTransaction`] sends to queues and publishes to
//! topics, so that consuming a message, writing business rows, producing the results and
//! acking commit as one database transaction — what Kafka needs a transactions protocol for.
//! A crash at any point leaves everything or nothing: an input handled again after a crash
//! finds none of its earlier outputs.

use super::context::JobTransaction;
use crate::client::Subject;
use crate::domain::{Message, Published, Record, Result, Sent};
use crate::queue::Queue;
use crate::store::Backend;
use crate::topic::Topic;

impl<B: Backend> JobTransaction<B> {
    /// Send `message` to `queue` in this transaction: it exists once the transaction commits
    /// (with the handler's ack) and never if it rolls back. Local consumers of the queue are
    /// woken after the commit.
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext, receipts: sqlmq::Queue) -> anyhow::Result<()> {
    /// let mut tx = ctx.begin().await?;
    /// tx.send(&receipts, sqlmq::Message::new(format!("receipt for {}", ctx.id()))).await?;
    /// tx.commit().await?; // the receipt and the ack, or neither
    /// # Ok(()) }
    /// ```
    pub async fn send(&mut self, queue: &Queue<B>, message: Message) -> Result<Sent> {
        let sent = queue.send_in(&mut self.tx, message).await?;
        let (client, id) = (queue.client().clone(), queue.id());
        self.after_commit
            .push(Box::new(move || client.notify_local(Subject::Queue(id))));
        Ok(sent)
    }

    /// Publish `record` to `topic` in this transaction: it exists once the transaction
    /// commits (with the handler's ack) and never if it rolls back; its offset is given after
    /// the commit, as for [`Topic::publish_in`].
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext, enriched: sqlmq::Topic) -> anyhow::Result<()> {
    /// let mut tx = ctx.begin().await?;
    /// let key = ctx.ordering_key().unwrap_or("none").to_owned();
    /// tx.publish(&enriched, sqlmq::Record::new("enriched").key(key)).await?;
    /// tx.commit().await?; // the output record and the input's ack, or neither
    /// # Ok(()) }
    /// ```
    pub async fn publish(&mut self, topic: &Topic<B>, record: Record) -> Result<Published> {
        let published = topic.publish_in(&mut self.tx, record).await?;
        if !published.duplicate {
            let (topic, partition) = (topic.clone(), published.partition);
            self.after_commit
                .push(Box::new(move || topic.wake_after_commit(vec![partition])));
        }
        Ok(published)
    }
}
