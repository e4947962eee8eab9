//! What both claims share: reading the claim read's rows as deliveries. The claims themselves
//! are each backend's (`<backend>/claim.rs`): `SKIP LOCKED` on a server, one writer on SQLite.

use std::time::Duration;

use super::slots::split_key;
use super::{Columns, Types};
use crate::domain::{Delivery, Result, duration_from_micros, micros_of, time_from_micros};

/// The deliveries of a claim read's `rows` (`id, priority, attempts, token, ordering_key,
/// idempotency_key, headers, body, enqueued (µs), the database's now (µs), deadline (µs),
/// run timeout (µs)`), leased for
/// `lease` from that now: each is its next attempt, under the next fencing token.
pub(crate) fn deliveries<R: Columns>(rows: &[R], lease: Duration) -> Result<Vec<Delivery>>
where
    R::Database: Types,
{
    let lease_us = micros_of(lease);
    let mut claimed = Vec::with_capacity(rows.len());
    for row in rows {
        let now_us: i64 = row.col(9)?;
        let (ordering_key, concurrency_key, tracked) = split_key(row.opt_text_at(4)?);
        claimed.push(Delivery {
            id: row.id_at(0)?,
            priority: row.col(1)?,
            attempt: (row.col::<i32>(2)? + 1).max(1) as u32,
            token: (row.col::<i64>(3)? + 1) as u64,
            ordering_key,
            concurrency_key,
            idempotency_key: row.opt_text_at(5)?,
            headers: row.headers_at(6)?,
            body: row.col(7)?,
            enqueued_at: time_from_micros(row.col(8)?),
            lease_expires_at: time_from_micros(now_us.saturating_add(lease_us)),
            deadline: row.col::<Option<i64>>(10)?.map(time_from_micros),
            run_timeout: row.col::<Option<i64>>(11)?.map(duration_from_micros),
            partition: None,
            offset: None,
            tracked,
            claimed_at: time_from_micros(now_us),
        });
    }
    Ok(claimed)
}
