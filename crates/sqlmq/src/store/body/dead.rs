//! A queue's dead letters: list and redrive (purge is `admin.rs`'s, with `PurgeScope::Dead`).

use super::slots::{split_key, stored_key};
use super::{Columns, SqlStore, Statement};
use crate::domain::{DeadLetter, MessageId, Result, parse_errors, time_from_micros};
use crate::store::Backend;
use crate::store::rows::{Entry, Keyed};

/// The dead-letter statements.
pub struct DeadSql {
    /// The oldest n dead letters of a queue (queue, n): `id, attempts, died (µs), enqueued
    /// (µs), errors, ordering_key, headers, body`.
    pub list: &'static str,
    /// Take the oldest n dead letters of a queue (queue, n): `id, queue_id, priority, token,
    /// ordering_key`.
    pub claim_oldest: &'static str,
    /// Take dead letters by id (`{list}` of ids): the columns of [`DeadSql::claim_oldest`].
    pub claim_ids: &'static str,
}

fn decode_dead_letter<R: Columns>(row: &R) -> Result<DeadLetter>
where
    R::Database: super::Types,
{
    let errors: Option<Vec<u8>> = row.col(4)?;
    let (ordering_key, concurrency_key, _) = split_key(row.opt_text_at(5)?);
    Ok(DeadLetter {
        id: row.id_at(0)?,
        attempts: row.col::<i64>(1)?.clamp(0, u32::MAX as i64) as u32,
        died_at: time_from_micros(row.col(2)?),
        enqueued_at: time_from_micros(row.col(3)?),
        errors: parse_errors(errors.as_deref().map(String::from_utf8_lossy).as_deref()),
        ordering_key,
        concurrency_key,
        headers: row.headers_at(6)?,
        body: row.col(7)?,
        partition: None,
        offset: None,
        member: None,
    })
}

/// A queue's dead letters (purged through `SqlStore::purge_batch`).
impl<B: Backend> SqlStore<B> {
    /// The oldest `limit` dead letters, with their error histories.
    pub(crate) async fn dead_letters(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let rows = self
            .query(B::DEAD.list)
            .arg(queue_id)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter().map(decode_dead_letter).collect()
    }

    /// Put dead letters back with their attempts reset: `ids`, or the oldest `limit` when
    /// `None`. Returns the ids redriven.
    pub(crate) async fn redrive(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let rows = match ids {
            Some(ids) => self.fetch_id_list(conn, B::DEAD.claim_ids, ids).await?,
            None => {
                self.query(B::DEAD.claim_oldest)
                    .arg(queue_id)
                    .arg(limit as i64)
                    .rows(conn)
                    .await?
            }
        };
        let mut plain = Vec::new();
        let mut keyed = Vec::new();
        let mut done = Vec::new();
        let mut tracked = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.col::<i32>(1).ok() == Some(queue_id))
        {
            // Attempts start over; the token keeps counting so that fencing stays monotonic.
            let entry = Entry {
                id: row.id_at(0)?,
                priority: row.col(2)?,
                attempts: 0,
                token: row.col(3)?,
            };
            done.push(entry.id);
            let stored = row.opt_text_at(4)?;
            let (ordering, concurrency, is_tracked) = split_key(stored);
            if is_tracked {
                tracked.push(entry.id);
            }
            match stored_key(ordering.as_deref(), concurrency.as_deref(), false) {
                None => plain.push((entry, 0)),
                Some(key) => keyed.push(Keyed {
                    key,
                    entry,
                    delay_us: 0,
                }),
            }
        }
        self.exec_id_list(conn, B::ADMIN.delete_dead, &done).await?;
        self.place(conn, queue_id, &plain).await?;
        self.enqueue_keyed(conn, queue_id, keyed).await?;
        self.redrive_flow(conn, &tracked).await?;
        Ok(done)
    }
}
