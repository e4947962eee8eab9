//! `Limits`: a limited queue's gate — its limits row locked, its leases counted, its recent
//! deliveries counted and recorded. Only the locking read differs by backend ([`LimitSql`]).

use std::time::Duration;

use super::{Columns, SqlStore, Statement};
use crate::domain::{RateLimit, Result};
use crate::store::{Backend, Limits};

/// The gate's statements whose shape differs by backend.
pub struct LimitSql {
    /// A queue's limits, the row locked until the transaction ends (queue id):
    /// `max_in_flight, rate_count, rate_window_us`.
    pub lock: &'static str,
}

/// A queue's limits from the three columns at `first`: `max_in_flight, rate_count,
/// rate_window_us` (each NULL for none).
pub(crate) fn decode_limits<R: Columns>(
    row: &R,
    first: usize,
) -> Result<(Option<u32>, Option<RateLimit>)>
where
    R::Database: super::Types,
{
    let max = row.col::<Option<i64>>(first)?;
    let rate = match (
        row.col::<Option<i64>>(first + 1)?,
        row.col::<Option<i64>>(first + 2)?,
    ) {
        (Some(count), Some(us)) => Some(RateLimit::new(
            count.clamp(1, u32::MAX as i64) as u32,
            Duration::from_micros(us.max(1) as u64),
        )),
        _ => None,
    };
    Ok((max.map(|n| n.clamp(1, u32::MAX as i64) as u32), rate))
}

const IN_FLIGHT: &str = "SELECT COUNT(*) FROM {p}leases WHERE queue_id = ?";
const FORGET: &str = "DELETE FROM {p}queue_deliveries WHERE queue_id = ? AND at_us <= ?";
/// `SUM` is a DECIMAL on MySQL: cast back to an integer (`SIGNED` is an integer to SQLite too).
const RECENT: &str = "SELECT CAST(COALESCE(SUM(n), 0) AS SIGNED), MIN(at_us) \
    FROM {p}queue_deliveries WHERE queue_id = ? AND at_us > ?";
const RECORD: &str = "INSERT INTO {p}queue_deliveries (queue_id, at_us, n) VALUES (?, ?, ?)";

impl<B: Backend> Limits<B> for SqlStore<B> {
    async fn lock_limits(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<Option<(Option<u32>, Option<RateLimit>)>> {
        let Some(row) = self.query(B::LIMITS.lock).arg(queue_id).first(conn).await? else {
            return Ok(None);
        };
        Ok(Some(decode_limits(&row, 0)?))
    }

    async fn in_flight(&self, conn: &mut B::Connection, queue_id: i32) -> Result<u64> {
        let row = self.query(IN_FLIGHT).arg(queue_id).first(conn).await?;
        Ok(row
            .map(|r| r.col::<i64>(0))
            .transpose()?
            .unwrap_or(0)
            .max(0) as u64)
    }

    async fn recent_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        before_us: i64,
    ) -> Result<(u64, Option<i64>)> {
        self.query(FORGET)
            .arg(queue_id)
            .arg(before_us)
            .run(conn)
            .await?;
        let Some(row) = self
            .query(RECENT)
            .arg(queue_id)
            .arg(before_us)
            .first(conn)
            .await?
        else {
            return Ok((0, None));
        };
        Ok((row.col::<i64>(0)?.max(0) as u64, row.col(1)?))
    }

    async fn record_deliveries(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        at_us: i64,
        n: usize,
    ) -> Result<()> {
        self.query(RECORD)
            .arg(queue_id)
            .arg(at_us)
            .arg(n as i64)
            .run(conn)
            .await?;
        Ok(())
    }
}
