//! A limited queue's gate — its limits row locked, its leases counted, its recent
//! deliveries counted and recorded. Only the gate's read differs by backend ([`LimitSql`]: the
//! lock, the clock).

use std::time::Duration;

use super::settle::Lease;
use super::slots::stored_key_of;
use super::{Columns, SqlStore, Statement};
use crate::domain::{Delivery, RateLimit, Result, Settlement};
use crate::store::Backend;
use crate::store::rows::Entry;
use crate::store::rows::{GateRead, QueueLimits};

/// The gate's statements whose shape differs by backend.
pub struct LimitSql {
    /// The gate's read, one statement ([`gate_read`]): key (empty), key (empty), queue id.
    pub gate: &'static str,
}

/// The gate's read: a queue's limits, the row locked until the transaction ends, with what
/// they are checked against — `{limit columns}, leases, now (µs), deliveries since the window
/// began, the oldest of them (µs)` — in one statement and one round trip. The outer locking
/// clause locks the limits row only: the subqueries are plain reads (InnoDB locks a nested
/// subquery's rows only when it has a locking clause of its own), so acks and claims of the
/// leases counted are not held up. `$now` is the backend's clock in µs, `$lock` its locking
/// clause.
macro_rules! gate_read {
    ($now:expr, $lock:literal) => {
        concat!(
            "SELECT ",
            $crate::store::body::limits::limit_columns!("l"),
            ", (SELECT COUNT(*) FROM {p}leases e WHERE e.queue_id = l.queue_id), ",
            $now,
            ", (SELECT CAST(COALESCE(SUM(d.n), 0) AS SIGNED) FROM {p}queue_deliveries d \
             WHERE d.queue_id = l.queue_id AND d.slot_key = ? AND d.at_us > ",
            $now,
            " - l.rate_window_us), (SELECT MIN(d.at_us) FROM {p}queue_deliveries d \
             WHERE d.queue_id = l.queue_id AND d.slot_key = ? AND d.at_us > ",
            $now,
            " - l.rate_window_us) FROM {p}queue_limits l WHERE l.queue_id = ?",
            $lock
        )
    };
}
pub(crate) use gate_read;

/// The columns of a queue's limits, in the order [`decode_limits`] reads them.
macro_rules! limit_columns {
    ($t:literal) => {
        concat!(
            $t,
            ".max_in_flight, ",
            $t,
            ".rate_count, ",
            $t,
            ".rate_window_us, ",
            $t,
            ".concurrency_limit, ",
            $t,
            ".key_rate_count, ",
            $t,
            ".key_rate_window_us"
        )
    };
}
pub(crate) use limit_columns;

/// A count column (NULL for none) as a limit.
fn count_at<R: Columns>(row: &R, at: usize) -> Result<Option<u32>>
where
    R::Database: super::Types,
{
    Ok(row
        .col::<Option<i64>>(at)?
        .map(|n| n.clamp(1, u32::MAX as i64) as u32))
}

/// A rate from its count and window (µs) columns at `at` (NULL for none).
fn rate_at<R: Columns>(row: &R, at: usize) -> Result<Option<RateLimit>>
where
    R::Database: super::Types,
{
    Ok(
        match (count_at(row, at)?, row.col::<Option<i64>>(at + 1)?) {
            (Some(count), Some(us)) => Some(RateLimit::new(
                count,
                Duration::from_micros(us.max(1) as u64),
            )),
            _ => None,
        },
    )
}

/// A queue's limits from the columns of [`limit_columns`] at `first`.
pub(crate) fn decode_limits<R: Columns>(row: &R, first: usize) -> Result<QueueLimits>
where
    R::Database: super::Types,
{
    Ok(QueueLimits {
        max_in_flight: count_at(row, first)?,
        rate: rate_at(row, first + 1)?,
        concurrency: count_at(row, first + 3)?,
        rate_per_key: rate_at(row, first + 4)?,
    })
}

/// A window's deliveries from a row of `count, oldest (µs)` (none: 0).
pub(crate) fn window_sum<R: Columns>(row: Option<R>) -> Result<(u64, Option<i64>)>
where
    R::Database: super::Types,
{
    let Some(row) = row else {
        return Ok((0, None));
    };
    Ok((row.col::<i64>(0)?.max(0) as u64, row.col(1)?))
}

/// The key under which the whole queue's deliveries are counted.
pub(crate) const WHOLE_QUEUE: &[u8] = b"";
const FORGET: &str =
    "DELETE FROM {p}queue_deliveries WHERE queue_id = ? AND slot_key = ? AND at_us <= ?";
/// `SUM` is a DECIMAL on MySQL: cast back to an integer (`SIGNED` is an integer to SQLite too).
const RECENT: &str = "SELECT CAST(COALESCE(SUM(n), 0) AS SIGNED), MIN(at_us) \
    FROM {p}queue_deliveries WHERE queue_id = ? AND slot_key = ? AND at_us > ?";
const RECORD: &str =
    "INSERT INTO {p}queue_deliveries (queue_id, slot_key, at_us, n) VALUES (?, ?, ?, ?)";

/// A limited queue's gate: what its claims may take, read and counted under the lock of its
/// limits row, so that the claims of every process are counted one after the other.
impl<B: Backend> SqlStore<B> {
    /// The queue's limits, their row locked until the transaction ends (on a backend with
    /// row locks), with its leases, the clock and the whole queue's deliveries in its rate
    /// window (see [`GateRead`]); `None` when it has no limits.
    pub(crate) async fn gate(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<Option<GateRead>> {
        let Some(row) = self
            .query(B::LIMITS.gate)
            .arg(WHOLE_QUEUE)
            .arg(WHOLE_QUEUE)
            .arg(queue_id)
            .first(conn)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(GateRead {
            limits: decode_limits(&row, 0)?,
            in_flight: row.col::<i64>(6)?.max(0) as u64,
            now_us: row.col(7)?,
            delivered: row.col::<i64>(8)?.max(0) as u64,
            oldest_us: row.col(9)?,
        }))
    }

    /// Forget `key`'s deliveries at or before `before_us` (as for
    /// `SqlStore::recent_deliveries`).
    pub(crate) async fn forget_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        before_us: i64,
    ) -> Result<()> {
        self.query(FORGET)
            .arg(queue_id)
            .arg(key)
            .arg(before_us)
            .run(conn)
            .await?;
        Ok(())
    }

    /// Forget deliveries at or before `before_us`, then count those after it: how many, and
    /// when the oldest of them was (µs). `key`: the whole queue's (empty) or one concurrency
    /// key's (stored form).
    pub(crate) async fn recent_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        before_us: i64,
    ) -> Result<(u64, Option<i64>)> {
        self.forget_deliveries(conn, queue_id, key, before_us)
            .await?;
        let row = self
            .query(RECENT)
            .arg(queue_id)
            .arg(key)
            .arg(before_us)
            .first(conn)
            .await?;
        window_sum(row)
    }

    /// Record `n` deliveries at `at_us` (of `key`, as for `SqlStore::recent_deliveries`).
    pub(crate) async fn record_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &[u8],
        at_us: i64,
        n: usize,
    ) -> Result<()> {
        self.query(RECORD)
            .arg(queue_id)
            .arg(key)
            .arg(at_us)
            .arg(n as i64)
            .run(conn)
            .await?;
        Ok(())
    }

    /// Put back messages this transaction claimed, undelivered: each due again after its
    /// delay (µs), its attempt not counted.
    pub(crate) async fn put_back(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        claimed: &[(Delivery, i64)],
    ) -> Result<()> {
        let endings = claimed
            .iter()
            .map(|(d, delay_us)| {
                let lease = Lease {
                    entry: Entry {
                        id: d.id,
                        priority: d.priority,
                        token: d.token as i64,
                        attempts: d.attempt as i32,
                    },
                    queue_id,
                    ordering_key: stored_key_of(d).map(String::into_bytes),
                    live: true,
                };
                let settlement = Settlement {
                    retry_after: Some(Duration::from_micros((*delay_us).max(1) as u64)),
                    // The claim counted an attempt that was never made.
                    attempts: d.attempt.saturating_sub(1),
                    error: None,
                    outcome: "snoozed",
                };
                (lease, settlement)
            })
            .collect();
        self.end_leases(conn, queue_id, endings).await?;
        Ok(())
    }
}
