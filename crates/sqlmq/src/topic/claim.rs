//! The cluster-group claim: which records a member gets, in one short transaction.
//!
//! 1. Due retries first (a replay or a reset may have put one of them in flight meanwhile: it is
//!    being delivered, so its retry is dropped).
//! 2. Then fresh offsets from the partition cursors, starting at a rotating partition so that
//!    members spread over partitions. Below a partition's first retained offset the records are
//!    gone (retention): the cursor jumps and the records are counted as skipped. With strict
//!    order a partition with a record in flight or waiting to retry hands out nothing, and
//!    otherwise one record at a time. Offsets below the cursor's high-water mark were handed
//!    out before a reset moved it back: records still in flight are skipped and the others get
//!    a token above their last one, so that earlier receipts stay fenced.
//! 3. One lease per record, with a fencing token one above the record's last.
//!
//! Cursors move independently of acks: a slow or failing record holds up nothing but itself,
//! unless the topic asks for strict order. The store supplies the reads and writes (see
//! `store/body/group_claim.rs`); every decision above is made here, including which cursors to
//! lock and when to wait for one ([`cursors_with_work`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::domain::{Delivery, Error, MessageId, Result, micros_of, time_from_micros};

use crate::store::rows::{Cursor, CursorScan, LoggedRow, NewGroupLeases};
use crate::store::{Backend, SqlStore};

/// Cursors locked per statement when the first one locked did not fill the claim.
const MORE_CURSORS: i64 = 3;

/// What a claim asks for.
pub(crate) struct GroupClaimRequest<'a> {
    pub group_id: i32,
    pub topic_id: i32,
    /// One record in flight per partition.
    pub strict: bool,
    /// The topic's partition count as the handle knows it.
    pub partitions: u32,
    /// The partition to look at first.
    pub start: i32,
    /// Most records to hand out.
    pub n: usize,
    pub lease: Duration,
    /// The claiming process (owner id).
    pub owner: &'a str,
}

/// What a claim found.
#[derive(Debug, Default)]
pub(crate) struct GroupClaim {
    pub deliveries: Vec<Delivery>,
    /// Offsets skipped because retention had removed them first.
    pub skipped: i64,
}

/// A record about to be leased again: where it is, and its attempts and last token.
struct Again {
    partition: i32,
    offset: i64,
    attempts: i32,
    token: i64,
}

/// Claim up to `req.n` records for a cluster group, inside `conn`'s transaction.
pub(crate) async fn claim<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    req: &GroupClaimRequest<'_>,
) -> Result<GroupClaim> {
    let mut now_us = 0;
    // 1. Due retries.
    let mut again = Vec::new();
    let retries = store.take_due_retries(conn, req.group_id, req.n).await?;
    if let Some(r) = retries.first() {
        now_us = r.now_us;
        let ids: Vec<MessageId> = retries.iter().map(|r| r.id).collect();
        let held = store.held(conn, req.group_id, &ids).await?;
        again.extend(
            retries
                .iter()
                .filter(|r| !held.contains(&r.id))
                .map(|r| Again {
                    partition: r.partition,
                    offset: r.offset,
                    attempts: r.attempts,
                    token: r.token,
                }),
        );
    }
    let mut found = if again.is_empty() {
        Vec::new()
    } else {
        let positions: Vec<(i32, i64)> = again.iter().map(|a| (a.partition, a.offset)).collect();
        store.records_at(conn, req.topic_id, &positions).await?
    };

    // 2. Fresh offsets from the cursors.
    let mut skipped = 0;
    let mut moved = Vec::new();
    let mut want = req.n - again.len();
    if want > 0 {
        let cursors = cursors_with_work::<B>(store, conn, req, want).await?;
        let busy = if req.strict {
            // Partitions with a record in flight or waiting, including the retries taken just
            // above (their leases are not written yet).
            let parts: Vec<i32> = cursors.iter().map(|c| c.partition).collect();
            let mut busy = store.occupied(conn, req.group_id, &parts).await?;
            busy.extend(again.iter().map(|a| a.partition));
            busy
        } else {
            HashSet::new()
        };
        let mut seen: HashSet<MessageId> = found.iter().map(|r| r.id).collect();
        for c in cursors {
            now_us = c.now_us;
            // Below the first retained offset, records are gone: jump (and count them).
            let from = c.next.max(c.low);
            skipped += from - c.next;
            let room = match req.strict {
                true if busy.contains(&c.partition) => 0,
                true => 1,
                false => want as i64,
            };
            let to = c.end.min(from + room.min(want as i64)).max(from);
            if to > c.next {
                moved.push((c.partition, to));
            }
            if to == from {
                continue;
            }
            want -= (to - from) as usize;
            let mut rows = store
                .log_range(conn, req.topic_id, c.partition, from, to)
                .await?;
            let mut tokens = HashMap::new();
            if from < c.high {
                // Handed out before a reset back: skip what is in flight, and fence earlier
                // receipts with a larger token.
                let ids: Vec<MessageId> = rows.iter().map(|r| r.id).collect();
                let held = store.held(conn, req.group_id, &ids).await?;
                rows.retain(|r| !held.contains(&r.id));
                tokens = store
                    .past_tokens(conn, req.group_id, c.partition, from, to)
                    .await?;
            }
            for mut r in rows {
                r.token = tokens.get(&r.offset).copied().unwrap_or(0);
                // A retry taken above may be this very record (after a reset back).
                if seen.insert(r.id) {
                    found.push(r);
                }
            }
            if want == 0 {
                break;
            }
        }
    }
    if !moved.is_empty() {
        store.set_cursors(conn, req.group_id, &moved).await?;
    }
    if found.is_empty() {
        return Ok(GroupClaim {
            deliveries: Vec::new(),
            skipped,
        });
    }

    // 3. Leases.
    let lease_us = micros_of(req.lease);
    let until_us = now_us.saturating_add(lease_us);
    let deliveries = deliveries(found, &again, now_us, until_us);
    store
        .insert_group_leases(
            conn,
            &NewGroupLeases {
                group_id: req.group_id,
                deliveries: &deliveries,
                claimed_us: now_us,
                until_us,
                owner: req.owner,
            },
        )
        .await
        .map_err(|e| {
            if e.is_duplicate_key() {
                // Another claim leased one of these records and committed after this one found
                // it free, through rows this one could not lock: a locking read of a missing
                // lease row locks nothing under READ COMMITTED, and on a cluster each node sees
                // only its own locks (seen once in the Galera traffic test: 1062 on
                // `group_leases`' primary key). Nothing was written; run the claim again, which
                // finds the lease.
                Error::retry_transaction("a record was leased by another claim meanwhile")
            } else {
                e
            }
        })?;
    Ok(GroupClaim {
        deliveries,
        skipped,
    })
}

/// Lock cursors with work: the first from `req.start` on (wrapping), then a few more at a time
/// if they do not hold `want` records. Cursors other claims hold are skipped; only when every
/// partition with work is held does the claim wait for one (a queue of claims, instead of
/// members polling a lock). SQLite's claim has the database to itself: no cursor is ever held
/// there, and the wait never happens.
async fn cursors_with_work<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    req: &GroupClaimRequest<'_>,
    want: usize,
) -> Result<Vec<Cursor>> {
    // `partitions` may be stale (partitions only grow): the first range is open-ended.
    let start = req.start.rem_euclid(req.partitions.max(1) as i32);
    let mut ranges = vec![(start, i32::MAX)];
    if start > 0 {
        ranges.push((0, start));
    }
    let available =
        |locked: &[Cursor]| -> i64 { locked.iter().map(|c| c.end - c.next.max(c.low)).sum() };
    let mut locked: Vec<Cursor> = Vec::new();
    let mut limit = 1;
    'ranges: for (lo, hi) in ranges {
        let mut from = lo;
        while from < hi {
            let scan = CursorScan {
                group_id: req.group_id,
                topic_id: req.topic_id,
                from,
                to: hi,
                limit,
            };
            let got = store.lock_cursors(conn, &scan).await?;
            let n = got.len() as i64;
            for c in got {
                from = c.partition + 1;
                locked.push(c);
            }
            if available(&locked) >= want as i64 {
                break 'ranges;
            }
            if n < limit {
                break; // nothing more with work in this range
            }
            limit = MORE_CURSORS;
        }
    }
    if !locked.is_empty() {
        return Ok(locked);
    }
    // Every partition with work is being claimed by someone else: queue up for one.
    let Some(partition) = store.busy_cursor(conn, req.group_id, req.topic_id).await? else {
        return Ok(Vec::new());
    };
    let cursor = store
        .wait_cursor(conn, req.group_id, req.topic_id, partition)
        .await?;
    // The other claim may have taken what there was.
    Ok(cursor
        .filter(|c| c.next.max(c.low) < c.end || c.next < c.low)
        .into_iter()
        .collect())
}

/// The deliveries of `found` claimed at `now_us`: the next attempt, and a token one above the
/// record's last.
fn deliveries(found: Vec<LoggedRow>, again: &[Again], now_us: i64, until_us: i64) -> Vec<Delivery> {
    let previous: HashMap<(i32, i64), (i32, i64)> = again
        .iter()
        .map(|a| ((a.partition, a.offset), (a.attempts, a.token)))
        .collect();
    found
        .into_iter()
        .map(|r| {
            let (attempts, token) = previous
                .get(&(r.partition, r.offset))
                .copied()
                .unwrap_or((0, r.token));
            Delivery {
                id: r.id,
                token: (token + 1) as u64,
                attempt: (attempts + 1).max(1) as u32,
                priority: 0,
                ordering_key: r.key,
                concurrency_key: None,
                idempotency_key: None,
                headers: r.headers,
                body: r.body,
                enqueued_at: time_from_micros(r.published_us),
                lease_expires_at: time_from_micros(until_us),
                deadline: None,
                run_timeout: None,
                partition: Some(r.partition as u32),
                offset: Some(r.offset),
                tracked: false,
                claimed_at: time_from_micros(now_us),
            }
        })
        .collect()
}
