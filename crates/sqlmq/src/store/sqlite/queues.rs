//! Queue rows.
//!
//! As on MySQL, but the upsert returns the row it wrote (`RETURNING`), so creating a queue is
//! one statement instead of an upsert and a read.

use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, now_us};
use crate::domain::{Backoff, Error, QueueConfig, Result};
use crate::store::Queues;
use crate::store::rows::QueueRow;

/// The columns [`decode`] reads, in order.
macro_rules! queue_columns {
    () => {
        "id, name, paused, max_attempts, backoff, dedup_window_ms"
    };
}

const UPSERT: &str = concat!(
    "INSERT INTO {p}queues ",
    "(name, paused, max_attempts, backoff, dedup_window_ms, created_at, updated_at) ",
    "VALUES (?, 0, ?, ?, ?, ",
    now_us!(),
    ", ",
    now_us!(),
    ") ON CONFLICT (name) DO UPDATE SET max_attempts = excluded.max_attempts, ",
    "backoff = excluded.backoff, dedup_window_ms = excluded.dedup_window_ms, ",
    "updated_at = excluded.updated_at RETURNING ",
    queue_columns!()
);
const BY_NAME: &str = concat!(
    "SELECT ",
    queue_columns!(),
    " FROM {p}queues WHERE name = ?"
);
const BY_ID: &str = concat!("SELECT ", queue_columns!(), " FROM {p}queues WHERE id = ?");
const ALL: &str = concat!("SELECT ", queue_columns!(), " FROM {p}queues ORDER BY name");
const SET_PAUSED: &str = concat!(
    "UPDATE {p}queues SET paused = ?, updated_at = ",
    now_us!(),
    " WHERE name = ?"
);
const DELETE: &str = "DELETE FROM {p}queues WHERE id = ?";

fn decode(row: &SqliteRow) -> Result<QueueRow> {
    let backoff: String = row.try_get(4)?;
    let backoff: Backoff = serde_json::from_str(&backoff)
        .map_err(|e| Error::Corrupt(format!("queue backoff {backoff:?}: {e}")))?;
    Ok(QueueRow {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        paused: row.try_get::<i64, _>(2)? != 0,
        config: QueueConfig {
            max_attempts: row.try_get::<i64, _>(3)?.clamp(1, u32::MAX as i64) as u32,
            backoff,
            dedup_window: Duration::from_millis(row.try_get::<i64, _>(5)?.max(0) as u64),
        },
    })
}

impl Queues<Sqlite> for SqliteStore {
    /// Create the queue, or update the configuration of an existing one.
    async fn upsert_queue(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
        config: &QueueConfig,
    ) -> Result<QueueRow> {
        let row = sqlx::query(self.st.get(UPSERT))
            .bind(name)
            .bind(config.max_attempts as i64)
            .bind(serde_json::to_string(&config.backoff)?)
            .bind(config.dedup_window.as_millis().min(i64::MAX as u128) as i64)
            .fetch_one(&mut *conn)
            .await?;
        decode(&row)
    }

    async fn queue_by_name(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
    ) -> Result<Option<QueueRow>> {
        let row = sqlx::query(self.st.get(BY_NAME))
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn queue_by_id(&self, conn: &mut SqliteConnection, id: i32) -> Result<Option<QueueRow>> {
        let row = sqlx::query(self.st.get(BY_ID))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn all_queues(&self, conn: &mut SqliteConnection) -> Result<Vec<QueueRow>> {
        let rows = sqlx::query(self.st.get(ALL)).fetch_all(&mut *conn).await?;
        rows.iter().map(decode).collect()
    }

    /// Returns false when the queue does not exist.
    async fn set_paused(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
        paused: bool,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(SET_PAUSED))
            .bind(paused as i64)
            .bind(name)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Delete the queue row (its messages must already be gone).
    async fn delete_queue_row(&self, conn: &mut SqliteConnection, id: i32) -> Result<()> {
        sqlx::query(self.st.get(DELETE))
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
