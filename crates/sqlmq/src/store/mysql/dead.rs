//! Dead letters: list and redrive (purge is `admin::purge_batch` with `PurgeScope::Dead`).

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::admin::DELETE_DEAD;
use super::keys::Keyed;
use super::{MySqlStore, exec_id_list, fetch_id_list, headers_at, id_at, micros, opt_text_at};
use crate::domain::Result;
use crate::domain::{DeadLetter, MessageId, parse_errors, time_from_micros};
use crate::store::DeadLetters;
use crate::store::rows::Entry;
use sqlx::MySql;

pub(crate) const LIST: &str = concat!(
    "SELECT d.id, d.attempts, ",
    micros!("d.died_at"),
    ", ",
    micros!("m.created_at"),
    ", m.errors, m.ordering_key, m.headers, m.body ",
    "FROM {p}dead d FORCE INDEX (queue_died) STRAIGHT_JOIN {p}messages m ON m.id = d.id WHERE d.queue_id = ? ",
    "ORDER BY d.died_at, d.id LIMIT ?"
);
pub(crate) const CLAIM_ALL: &str = "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
    FROM {p}dead d FORCE INDEX (queue_died) STRAIGHT_JOIN {p}messages m ON m.id = d.id \
    WHERE d.queue_id = ? ORDER BY d.died_at, d.id LIMIT ? FOR UPDATE SKIP LOCKED";
pub(crate) const CLAIM_IDS: &str = "SELECT d.id, d.queue_id, d.priority, d.token, m.ordering_key \
    FROM {p}dead d FORCE INDEX (PRIMARY) STRAIGHT_JOIN {p}messages m ON m.id = d.id WHERE d.id IN ({list}) FOR UPDATE";

fn decode_dead_letter(row: &MySqlRow) -> Result<DeadLetter> {
    let errors: Option<Vec<u8>> = row.try_get(4)?;
    Ok(DeadLetter {
        id: id_at(row, 0)?,
        attempts: row.try_get::<i32, _>(1)?.max(0) as u32,
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

impl DeadLetters<MySql> for MySqlStore {
    /// The oldest `limit` dead letters of `queue_id`.
    async fn dead_letters(
        &self,
        conn: &mut MySqlConnection,
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
        conn: &mut MySqlConnection,
        queue_id: i32,
        ids: Option<&[MessageId]>,
        limit: usize,
    ) -> Result<Vec<MessageId>> {
        let rows = match ids {
            Some(ids) => fetch_id_list(&self.st, conn, CLAIM_IDS, ids).await?,
            None => {
                sqlx::query(self.st.get(CLAIM_ALL))
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
