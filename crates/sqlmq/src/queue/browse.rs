//! Looking at a queue's messages: by state a page at a time, one by id, those of a key. Plain
//! reads on the reader pool: they take no lease and no lock, so a claim never waits for them.

use super::Queue;
use crate::domain::{After, Error, MessageId, MessagePage, MessageState, QueuedMessage, Result};
use crate::store::Backend;

/// The largest page (and key listing) one read returns.
const MAX_PAGE: usize = 10_000;

/// A page size (or key listing size) one read may return.
fn check_limit(limit: usize) -> Result<()> {
    if (1..=MAX_PAGE).contains(&limit) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "limit must be 1..={MAX_PAGE}, got {limit}"
        )))
    }
}

impl<B: Backend> Queue<B> {
    /// Up to `limit` (1 to 10 000) messages in `state`, in the order that state hands them out
    /// (ready: by priority, then the order they became ready; scheduled: by due time; blocked:
    /// by key, then their place in its line; in flight: by lease end). Give the page's `next`
    /// as `after` for the following page. Each page reads one index range: cheap however long
    /// the queue. Dead letters have [`Queue::dead_letters`].
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let page = q.browse(sqlmq::inspect::MessageState::InFlight, None, 20).await?;
    /// for m in &page.messages {
    ///     println!("{} held by {:?} until {:?}", m.id, m.owner, m.lease_until);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn browse(
        &self,
        state: MessageState,
        after: Option<&str>,
        limit: usize,
    ) -> Result<MessagePage> {
        self.client.require_schema()?;
        if state == MessageState::Dead {
            return Err(Error::InvalidArgument(
                "dead letters are listed by dead_letters, not browse".into(),
            ));
        }
        if state == MessageState::Cancelling {
            return Err(Error::InvalidArgument(
                "messages cancelled in flight are not browsed: look one up by id".into(),
            ));
        }
        check_limit(limit)?;
        let after = after.map(|a| After::decode(state, a)).transpose()?;
        let mut conn = self.conns().read().await?;
        // One more than asked tells whether a next page exists.
        let mut rows = self
            .store()
            .browse(&mut conn, self.id(), state, after.as_ref(), limit + 1)
            .await?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = match rows.last() {
            Some((_, position)) if more => Some(position.encode()),
            _ => None,
        };
        Ok(MessagePage {
            messages: rows.into_iter().map(|(m, _)| m).collect(),
            next,
        })
    }

    /// The message `id` in whatever state it is (dead letters included); `None` when this
    /// queue has no such message: never sent here, or acked, taken, cancelled or purged.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// match q.message(id).await? {
    ///     Some(m) => println!("{}: {}", m.id, m.state),
    ///     None => println!("gone"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn message(&self, id: MessageId) -> Result<Option<QueuedMessage>> {
        self.client.require_schema()?;
        let mut conn = self.conns().read().await?;
        self.store().find_message(&mut conn, self.id(), id).await
    }

    /// The messages that carry `key` (up to `limit`, 1 to 10 000), in any state but dead: those
    /// of that ordering key (its head first, then its waiting line in order), and the one the
    /// idempotency key names while its deduplication window is open.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// for m in q.messages_by_key("customer-42", 100).await? {
    ///     println!("{} {}", m.id, m.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn messages_by_key(&self, key: &str, limit: usize) -> Result<Vec<QueuedMessage>> {
        self.client.require_schema()?;
        check_limit(limit)?;
        let mut conn = self.conns().read().await?;
        let store = self.store();
        let ids = store.ids_by_key(&mut conn, self.id(), key, limit).await?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids.into_iter().take(limit) {
            if let Some(m) = store.find_message(&mut conn, self.id(), id).await? {
                out.push(m);
            }
        }
        Ok(out)
    }
}
