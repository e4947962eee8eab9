//! A queue's messages looked at by state, one index range per page.

use super::slots::split_key;
use super::{Columns, SqlStore, Statement};
use crate::domain::{
    After, MessageId, MessageState, QueuedMessage, Result, duration_from_micros, parse_errors,
    time_from_micros,
};
use crate::store::Backend;

/// The browsing statements. Each returns the columns [`decode`] reads: `id, state (0 ready,
/// 1 scheduled, 2 blocked, 3 in flight, 4 dead, 5 waiting), priority, attempts, run_at, lease_until,
/// claimed_at, died_at (µs or NULL), owner, ordering_key, headers, body, created (µs), deadline
/// (µs or NULL), run timeout (µs or NULL), errors, position` — the position being the number the state orders by (priority, due time, lease
/// end, or the place in its key's line).
pub struct BrowseSql {
    /// The first page of a state (queue, n), in the order of: ready, scheduled, blocked, in
    /// flight, waiting.
    pub first: [&'static str; 5],
    /// A page past a position (queue, position, position, id or key, … see each; n): ready,
    /// scheduled and in flight take (queue, number, number, id, n); blocked takes (queue, key,
    /// key, place, n).
    pub after: [&'static str; 5],
    /// One message by id in any state (id, queue).
    pub find: &'static str,
    /// The ids carrying a key (queue, key, queue, key, queue, key, n): its ordering key's head,
    /// the idempotency key's message, its ordering key's waiting line.
    pub by_key: &'static str,
}

fn slot(state: MessageState) -> usize {
    match state {
        MessageState::Ready => 0,
        MessageState::Scheduled => 1,
        MessageState::Blocked => 2,
        MessageState::InFlight | MessageState::Dead | MessageState::Cancelling => 3,
        MessageState::Waiting => 4,
    }
}

fn opt_time<R: Columns>(row: &R, idx: usize) -> Result<Option<std::time::SystemTime>>
where
    R::Database: super::Types,
{
    Ok(row.col::<Option<i64>>(idx)?.map(time_from_micros))
}

/// A row of [`BrowseSql`]'s columns; `None` when the message is in no state (a statement that
/// found it between two moves of a transaction cannot, but a row of `find` whose joins all
/// missed can).
fn decode<R: Columns>(row: &R) -> Result<Option<(QueuedMessage, i64)>>
where
    R::Database: super::Types,
{
    let Some(state) = row.col::<Option<i64>>(1)?.and_then(MessageState::from_code) else {
        return Ok(None);
    };
    let errors: Option<Vec<u8>> = row.col(15)?;
    let (ordering_key, concurrency_key, _) = split_key(row.opt_text_at(9)?);
    let message = QueuedMessage {
        id: row.id_at(0)?,
        state,
        priority: row.col(2)?,
        attempts: row.col::<i64>(3)?.clamp(0, u32::MAX as i64) as u32,
        run_at: opt_time(row, 4)?,
        lease_until: opt_time(row, 5)?,
        claimed_at: opt_time(row, 6)?,
        died_at: opt_time(row, 7)?,
        owner: row.opt_text_at(8)?,
        ordering_key,
        concurrency_key,
        headers: row.headers_at(10)?,
        body: row.col(11)?,
        enqueued_at: time_from_micros(row.col(12)?),
        deadline: opt_time(row, 13)?,
        run_timeout: row.col::<Option<i64>>(14)?.map(duration_from_micros),
        errors: parse_errors(errors.as_deref().map(String::from_utf8_lossy).as_deref()),
    };
    Ok(Some((message, row.col(16)?)))
}

/// Looking at a queue's messages: plain reads that take no lock and no lease, each a bounded
/// walk of one index.
impl<B: Backend> SqlStore<B> {
    /// Up to `limit` messages of `state` (not [`MessageState::Dead`]) past `after`, in the
    /// order the state hands them out.
    pub(crate) async fn browse(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        state: MessageState,
        after: Option<&After>,
        limit: usize,
    ) -> Result<Vec<(QueuedMessage, After)>> {
        let i = slot(state);
        let query = match after {
            None => self.query(B::BROWSE.first[i]).arg(queue_id),
            Some(After::Ordered(at, id)) => self
                .query(B::BROWSE.after[i])
                .arg(queue_id)
                .arg(*at)
                .arg(*at)
                .arg(id.bytes()),
            Some(After::Keyed(key, seq)) => self
                .query(B::BROWSE.after[i])
                .arg(queue_id)
                .arg(key.as_slice())
                .arg(key.as_slice())
                .arg(*seq),
        };
        let rows = query.arg(limit as i64).rows(conn).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some((message, position)) = decode(row)? else {
                continue;
            };
            let next = match state {
                MessageState::Blocked => {
                    After::Keyed(row.col::<Option<Vec<u8>>>(9)?.unwrap_or_default(), position)
                }
                _ => After::Ordered(position, message.id),
            };
            out.push((message, next));
        }
        Ok(out)
    }

    /// The message `id` of the queue in whatever state it is; `None` when the queue has no
    /// such message (never sent, acked, taken, purged or cancelled).
    pub(crate) async fn find_message(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
    ) -> Result<Option<QueuedMessage>> {
        let rows = self
            .query(B::BROWSE.find)
            .arg(id.bytes())
            .arg(queue_id)
            .rows(conn)
            .await?;
        match rows.first() {
            Some(row) => Ok(decode(row)?.map(|(m, _)| m)),
            None => Ok(None),
        }
    }

    /// The ids of the queue's messages that carry `key`: the head and the waiting line of
    /// that ordering key (up to `limit`), and the message the idempotency key names while its
    /// window is open.
    pub(crate) async fn ids_by_key(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &str,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let key = key.as_bytes();
        let rows = self
            .query(B::BROWSE.by_key)
            .arg(queue_id)
            .arg(key)
            .arg(queue_id)
            .arg(key)
            .arg(queue_id)
            .arg(key)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            let id = row.id_at(0)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }
}
