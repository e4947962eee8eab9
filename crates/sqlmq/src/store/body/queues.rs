//! Queue rows.

use std::time::Duration;

use super::{Columns, SqlStore, Statement};
use crate::domain::{Backoff, Error, QueueConfig, Result, millis_of};
use crate::store::Backend;
use crate::store::rows::QueueRow;

/// The queue rows' statements that differ by backend.
pub struct QueueSql {
    /// Create a queue, or update an existing one's configuration (name, max attempts,
    /// backoff as JSON, dedup window in ms, fair: 1 or NULL).
    pub upsert: &'static str,
    /// Pause or resume a queue (paused as 0/1, name).
    pub set_paused: &'static str,
    /// Create or replace a queue's limits (queue id, most in flight, rate count, rate window
    /// in µs, per-key concurrency; each NULL for none).
    pub upsert_limits: &'static str,
}

/// The columns [`decode`] reads, in order: the queue row and its limits (NULL when it has
/// none).
macro_rules! queue_columns {
    () => {
        concat!(
            "SELECT q.id, q.name, q.paused, q.max_attempts, q.backoff, q.dedup_window_ms, q.fair, ",
            super::limits::limit_columns!("l"),
            " FROM {p}queues q LEFT JOIN {p}queue_limits l ON l.queue_id = q.id"
        )
    };
}
pub(crate) const BY_NAME: &str = concat!(queue_columns!(), " WHERE q.name = ?");
pub(crate) const BY_ID: &str = concat!(queue_columns!(), " WHERE q.id = ?");
const ALL: &str = concat!(queue_columns!(), " ORDER BY q.name");
const DELETE: &str = "DELETE FROM {p}queues WHERE id = ?";
/// The cancels and progress rows left by a deleted queue's in-flight messages (queue).
const DELETE_CANCELS: &str = "DELETE FROM {p}cancels WHERE queue_id = ?";
const DELETE_PROGRESS: &str = "DELETE FROM {p}progress WHERE queue_id = ?";
const DELETE_LIMITS: &str = "DELETE FROM {p}queue_limits WHERE queue_id = ?";
const DELETE_DELIVERIES: &str = "DELETE FROM {p}queue_deliveries WHERE queue_id = ?";
const DELETE_SLOTS: &str = "DELETE FROM {p}key_slots WHERE queue_id = ?";
const DELETE_FAIR_KEYS: &str = "DELETE FROM {p}fair_keys WHERE queue_id = ?";

fn decode<R: Columns>(row: &R) -> Result<QueueRow>
where
    R::Database: super::Types,
{
    let backoff: String = row.col(4)?;
    let backoff: Backoff = serde_json::from_str(&backoff)
        .map_err(|e| Error::Corrupt(format!("queue backoff {backoff:?}: {e}")))?;
    let limits = super::limits::decode_limits(row, 7)?;
    Ok(QueueRow {
        id: row.col(0)?,
        name: row.col(1)?,
        paused: row.col::<i64>(2)? != 0,
        config: QueueConfig {
            max_attempts: row.col::<i64>(3)?.clamp(1, u32::MAX as i64) as u32,
            backoff,
            dedup_window: Duration::from_millis(row.col::<i64>(5)?.max(0) as u64),
            max_in_flight: limits.max_in_flight,
            rate_limit: limits.rate,
            concurrency_limit: limits.concurrency,
            rate_limit_per_key: limits.rate_per_key,
            fair: row.col::<Option<i64>>(6)?.is_some_and(|f| f != 0),
        },
    })
}

/// Queue rows. Names are compared by the backend's rules (MySQL's `ascii_bin` ignores
/// trailing spaces, SQLite compares bytes); the engine passes validated names only, which have
/// no spaces.
impl<B: Backend> SqlStore<B> {
    /// Create the queue, or update the configuration of an existing one.
    pub(crate) async fn upsert_queue(
        &self,
        conn: &mut B::Connection,
        name: &str,
        config: &QueueConfig,
    ) -> Result<QueueRow> {
        self.query(B::QUEUES.upsert)
            .arg(name)
            .arg(i64::from(config.max_attempts))
            .arg(serde_json::to_string(&config.backoff)?)
            .arg(millis_of(config.dedup_window))
            // NULL rather than 0: a schema reverse keeps refusing only while a queue is fair.
            .arg(config.fair.then_some(1i64))
            .run(conn)
            .await?;
        let row = self
            .queue_by_name(conn, name)
            .await?
            .ok_or_else(|| Error::UnknownQueue(name.to_owned()))?;
        if config.has_limits() {
            let rate = config.rate_limit.as_ref();
            self.query(B::QUEUES.upsert_limits)
                .arg(row.id)
                .arg(config.max_in_flight.map(i64::from))
                .arg(rate.map(|r| i64::from(r.count)))
                .arg(rate.map(|r| r.per.as_micros() as i64))
                .arg(config.concurrency_limit.map(i64::from))
                .arg(config.rate_limit_per_key.map(|r| i64::from(r.count)))
                .arg(config.rate_limit_per_key.map(|r| r.per.as_micros() as i64))
                .run(conn)
                .await?;
        } else {
            self.query(DELETE_LIMITS).arg(row.id).run(conn).await?;
        }
        self.queue_by_name(conn, name)
            .await?
            .ok_or_else(|| Error::UnknownQueue(name.to_owned()))
    }

    /// A queue row read by name or id, decoded, with whether the queue is fair noted for its
    /// claims and placements (`fair.rs`).
    fn noted(&self, row: Option<B::Row>) -> Result<Option<QueueRow>> {
        let row = row.as_ref().map(decode).transpose()?;
        if let Some(q) = &row {
            self.fair_modes.note(q.id, q.config.fair);
        }
        Ok(row)
    }

    pub(crate) async fn queue_by_name(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> Result<Option<QueueRow>> {
        let row = self.query(BY_NAME).arg(name).first(conn).await?;
        self.noted(row)
    }

    pub(crate) async fn queue_by_id(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> Result<Option<QueueRow>> {
        let row = self.query(BY_ID).arg(id).first(conn).await?;
        self.noted(row)
    }

    /// Every queue, by name.
    pub(crate) async fn all_queues(&self, conn: &mut B::Connection) -> Result<Vec<QueueRow>> {
        let rows = self.query(ALL).rows(conn).await?;
        rows.iter().map(decode).collect()
    }

    /// Returns false when the queue does not exist.
    pub(crate) async fn set_paused(
        &self,
        conn: &mut B::Connection,
        name: &str,
        paused: bool,
    ) -> Result<bool> {
        let done = self
            .query(B::QUEUES.set_paused)
            .arg(i64::from(paused))
            .arg(name)
            .run(conn)
            .await?;
        Ok(done == 1)
    }

    /// Delete the queue row (its messages must already be gone).
    pub(crate) async fn delete_queue_row(&self, conn: &mut B::Connection, id: i32) -> Result<()> {
        self.query(DELETE_DELIVERIES).arg(id).run(conn).await?;
        self.query(DELETE_SLOTS).arg(id).run(conn).await?;
        self.query(DELETE_FAIR_KEYS).arg(id).run(conn).await?;
        self.query(DELETE_LIMITS).arg(id).run(conn).await?;
        self.query(DELETE_CANCELS).arg(id).run(conn).await?;
        self.query(DELETE_PROGRESS).arg(id).run(conn).await?;
        self.query(DELETE).arg(id).run(conn).await?;
        Ok(())
    }
}
