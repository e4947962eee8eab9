//! Dead letters: list and redrive (purge is `admin::purge_batch` with `PurgeScope::Dead`).
//!
//! As on MySQL, without the row locks: a redrive runs in a write transaction that has the
//! database to itself, so its read of the dead letters needs no `FOR UPDATE`/`SKIP LOCKED`.

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::keys::Keyed;
use super::{SqliteStore, exec_id_list, fetch_id_list, headers_at, id_at, opt_text_at};
use crate::domain::{DeadLetter, MessageId, Result, parse_errors, time_from_micros};
use crate::store::DeadLetters;
use crate::store::rows::Entry;

const LIST: &str = "SELECT d.id, d.attempts, d.died_at, m.created_at, m.errors, m.ordering_key, \
    m.headers, m.body FROM {p}dead d JOIN {p}messages m ON m.id = d.id WHERE d.queue_id = ? \
    ORDER BY d.died_at, d.id LIMIT ?";
const OLDEST: &str = "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
    FROM {p}dead d JOIN {p}messages m ON m.id = d.id \
    WHERE d.queue_id = ? ORDER BY d.died_at, d.id LIMIT ?";
const BY_IDS: &str = "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
    FROM {p}dead d JOIN {p}messages m ON m.id = d.id WHERE d.id IN ({list})";
const DELETE_DEAD: &str = "DELETE FROM {p}dead WHERE id IN ({list})";

fn decode_dead_letter(row: &SqliteRow) -> Result<DeadLetter> {
    let errors: Option<Vec<u8>> = row.try_get(4)?;
    Ok(DeadLetter {
        id: id_at(row, 0)?,
        attempts: row.try_get::<i64, _>(1)?.clamp(0, u32::MAX as i64) as u32,
        died_at: time_from_micros(row.try_get(2)?),
        enqueued_at: time_from_micros(row.try_get(3)?),
        errors: parse_errors(errors.as_deref().map(String::from_utf8_lossy).as_deref()),
        ordering_key: opt_text_at(row, 5)?,
        headers: headers_at(row, 6)?,
        body: row.try_get(7)?,
        partition: None,
        offset: None,
        member: None,
    })
}

impl DeadLetters<Sqlite> for SqliteStore {
    /// The oldest `limit` dead letters of `queue_id`.
    async fn dead_letters(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let rows = sqlx::query(self.st.get(LIST))
            .bind(queue_id)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(decode_dead_letter).collect()
    }

    /// Put dead letters back into the queue with their attempts reset: the given ids, or the
    /// oldest `limit` when `ids` is `None`. Returns the ids redriven.
    async fn redrive(
        &self,
        conn: &mut SqliteConnection,
        queue_id: i32,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let rows = match ids {
            Some(ids) => fetch_id_list(&self.st, conn, BY_IDS, ids).await?,
            None => {
                sqlx::query(self.st.get(OLDEST))
                    .bind(queue_id)
                    .bind(limit as i64)
                    .fetch_all(&mut *conn)
                    .await?
            }
        };
        let mut plain = Vec::new();
        let mut keyed = Vec::new();
        let mut done = Vec::new();
        for row in rows
            .iter()
            .filter(|r| r.try_get::<i32, _>(1).ok() == Some(queue_id))
        {
            // Attempts start over; the token keeps counting so that fencing stays monotonic.
            let entry = Entry {
                id: id_at(row, 0)?,
                priority: row.try_get(2)?,
                attempts: 0,
                token: row.try_get(3)?,
            };
            done.push(entry.id);
            match opt_text_at(row, 4)? {
                None => plain.push((entry, 0)),
                Some(key) => keyed.push(Keyed {
                    key,
                    entry,
                    delay_us: 0,
                }),
            }
        }
        exec_id_list(&self.st, conn, DELETE_DEAD, &done).await?;
        self.place(conn, queue_id, &plain).await?;
        self.enqueue_keyed(conn, queue_id, keyed).await?;
        Ok(done)
    }
}
