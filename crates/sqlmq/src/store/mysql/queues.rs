//! Queue rows.

use std::time::Duration;

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::MySqlStore;
use crate::domain::Backoff;
use crate::domain::QueueConfig;
use crate::domain::{Error, Result};
use crate::store::Queues;
use crate::store::rows::QueueRow;
use sqlx::MySql;

const UPSERT: &str = "INSERT INTO {p}queues \
    (name, paused, max_attempts, backoff, dedup_window_ms, created_at, updated_at) \
    VALUES (?, 0, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) \
    ON DUPLICATE KEY UPDATE max_attempts = VALUES(max_attempts), backoff = VALUES(backoff), \
    dedup_window_ms = VALUES(dedup_window_ms), updated_at = VALUES(updated_at)";
pub(crate) const BY_NAME: &str =
    "SELECT id, name, paused, max_attempts, backoff, dedup_window_ms FROM {p}queues WHERE name = ?";
pub(crate) const BY_ID: &str =
    "SELECT id, name, paused, max_attempts, backoff, dedup_window_ms FROM {p}queues WHERE id = ?";
const ALL: &str =
    "SELECT id, name, paused, max_attempts, backoff, dedup_window_ms FROM {p}queues ORDER BY name";
const SET_PAUSED: &str =
    "UPDATE {p}queues SET paused = ?, updated_at = UTC_TIMESTAMP(6) WHERE name = ?";
const DELETE: &str = "DELETE FROM {p}queues WHERE id = ?";

fn decode(row: &MySqlRow) -> Result<QueueRow> {
    let backoff: String = row.try_get(4)?;
    let backoff: Backoff = serde_json::from_str(&backoff)
        .map_err(|e| Error::Corrupt(format!("queue backoff {backoff:?}: {e}")))?;
    Ok(QueueRow {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        paused: row.try_get::<i8, _>(2)? != 0,
        config: QueueConfig {
            max_attempts: row.try_get::<i32, _>(3)?.max(1) as u32,
            backoff,
            dedup_window: Duration::from_millis(row.try_get::<i64, _>(5)?.max(0) as u64),
        },
    })
}

impl Queues<MySql> for MySqlStore {
    /// Create the queue, or update the configuration of an existing one.
    async fn upsert_queue(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
        config: &QueueConfig,
    ) -> Result<QueueRow> {
        sqlx::query(self.st.get(UPSERT))
            .bind(name)
            .bind(config.max_attempts as i32)
            .bind(serde_json::to_string(&config.backoff)?)
            .bind(config.dedup_window.as_millis() as i64)
            .execute(&mut *conn)
            .await?;
        self.queue_by_name(conn, name)
            .await?
            .ok_or_else(|| Error::UnknownQueue(name.to_owned()))
    }

    async fn queue_by_name(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
    ) -> Result<Option<QueueRow>> {
        let row = sqlx::query(self.st.get(BY_NAME))
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn queue_by_id(&self, conn: &mut MySqlConnection, id: i32) -> Result<Option<QueueRow>> {
        let row = sqlx::query(self.st.get(BY_ID))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn all_queues(&self, conn: &mut MySqlConnection) -> Result<Vec<QueueRow>> {
        let rows = sqlx::query(self.st.get(ALL)).fetch_all(&mut *conn).await?;
        rows.iter().map(decode).collect()
    }

    /// Returns false when the queue does not exist.
    async fn set_paused(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
        paused: bool,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(SET_PAUSED))
            .bind(paused as i8)
            .bind(name)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Delete the queue row (its messages must already be gone).
    async fn delete_queue_row(&self, conn: &mut MySqlConnection, id: i32) -> Result<()> {
        sqlx::query(self.st.get(DELETE))
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
