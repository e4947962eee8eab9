//! Settling a cluster group's claims: the statements (the body is
//! `store/body/group_settle.rs`), and the history's events appended in Rust.
//!
//! The lease reads take no lock (MySQL's `FOR UPDATE`): the settling transaction
//! (`BEGIN IMMEDIATE`) has the database to itself until it commits. SQLite has no
//! `SUBSTRING_INDEX` to trim the events in the upsert, as MySQL does: [`history_events`] (the
//! `Dialect` hook) reads the stored events of the records first, appends each new event and
//! keeps the last [`GROUP_EVENTS_KEPT`], in the same transaction; the upsert writes them.

use std::collections::HashMap;

use sqlx::{Sqlite, SqliteConnection};

use super::{SqliteStore, now_us};
use crate::domain::{GROUP_EVENTS_KEPT, Result};
use crate::store::body::{Columns, GroupSettleSql, HistoryRow, Query, Statement};
use crate::store::statements::{MAX_LIST, bucket, padded};

macro_rules! lease_columns {
    () => {
        concat!(
            "SELECT id, partition_no, msg_offset, token, attempts, owner, claimed_at, ",
            "lease_until > ",
            now_us!(),
            ", ",
            now_us!(),
            " FROM {p}group_leases "
        )
    };
}

pub(super) const SQL: GroupSettleSql = GroupSettleSql {
    lock_leases: concat!(lease_columns!(), "WHERE group_id = ? AND id IN ({list})"),
    claim_expired: concat!(
        lease_columns!(),
        "WHERE group_id = ? AND lease_until <= ",
        now_us!(),
        " ORDER BY lease_until LIMIT ?"
    ),
    // The group's in-flight rows, filtered (rare: a member died or left).
    claim_owned: concat!(lease_columns!(), "WHERE group_id = ? AND owner = ? LIMIT ?"),
    delete_leases: "DELETE FROM {p}group_leases WHERE id IN ({list}) AND group_id = ?",
    upsert_history: "INSERT INTO {p}group_history \
        (group_id, partition_no, msg_offset, id, state, attempts, token, settled_at, events) \
        VALUES {list} ON CONFLICT (group_id, partition_no, msg_offset) DO UPDATE SET \
        state = excluded.state, attempts = excluded.attempts, \
        token = excluded.token, settled_at = excluded.settled_at, events = excluded.events",
    history_row: "(?,?,?,?,?,?,?,?,?)",
    upsert_retries: "INSERT INTO {p}group_retries \
        (group_id, id, partition_no, msg_offset, run_at, attempts, token) VALUES {list} \
        ON CONFLICT (group_id, id) DO UPDATE SET run_at = excluded.run_at, \
        attempts = excluded.attempts, token = max(token, excluded.token)",
    retry_row: "(?,?,?,?,?,?,?)",
    upsert_dead: "INSERT INTO {p}group_dead \
        (group_id, id, partition_no, msg_offset, attempts, token, died_at) VALUES {list} \
        ON CONFLICT (group_id, id) DO UPDATE SET attempts = excluded.attempts, \
        token = max(token, excluded.token), died_at = excluded.died_at",
    dead_row: "(?,?,?,?,?,?,?)",
    extend: concat!(
        "UPDATE {p}group_leases SET lease_until = ",
        now_us!(),
        " + ? WHERE group_id = ? AND id = ? AND token = ? AND lease_until > ",
        now_us!()
    ),
};

/// The events of history rows about to get one more: group id, then `{list}` of
/// `POSITION_ROW` → partition, offset, events. Row values through a subquery, for the full
/// primary key lookup (as the claim's `log_at`).
pub(super) const HISTORY_EVENTS: &str = "SELECT partition_no, msg_offset, events \
    FROM {p}group_history WHERE group_id = ? AND (partition_no, msg_offset) IN \
    (SELECT column1, column2 FROM (VALUES {list}))";
/// A position of `HISTORY_EVENTS`: partition, offset.
pub(super) const POSITION_ROW: &str = "(?,?)";

/// The `Dialect::group_history_events` hook: each row's events become the record's stored
/// events followed by its new line, the last [`GROUP_EVENTS_KEPT`] kept.
pub(super) async fn history_events(
    store: &SqliteStore,
    conn: &mut SqliteConnection,
    group_id: i32,
    rows: &mut [HistoryRow<'_>],
) -> Result<()> {
    let mut before: HashMap<(i32, i64), Vec<u8>> = HashMap::new();
    for chunk in rows.chunks(MAX_LIST) {
        let mut q: Query<'static, Sqlite> = sqlx::query(store.st.list(
            HISTORY_EVENTS,
            POSITION_ROW,
            bucket(chunk.len()),
        ));
        q = q.arg(group_id);
        for r in padded(chunk) {
            q = q.arg(r.lease.partition).arg(r.lease.offset);
        }
        for row in q.rows(conn).await? {
            before.insert((row.col(0)?, row.col(1)?), row.col(2)?);
        }
    }
    for r in rows {
        let old = before
            .get(&(r.lease.partition, r.lease.offset))
            .map_or(&[][..], Vec::as_slice);
        r.events = append_event(old, &r.events);
    }
    Ok(())
}

/// `events` with `line` appended, keeping the last [`GROUP_EVENTS_KEPT`] lines.
fn append_event(events: &[u8], line: &[u8]) -> Vec<u8> {
    let mut all = Vec::with_capacity(events.len() + line.len());
    all.extend_from_slice(events);
    all.extend_from_slice(line);
    let lines = all.split_inclusive(|b| *b == b'\n').count();
    if lines <= GROUP_EVENTS_KEPT {
        return all;
    }
    all.split_inclusive(|b| *b == b'\n')
        .skip(lines - GROUP_EVENTS_KEPT)
        .flatten()
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keeps_the_last_events() {
        let mut events = Vec::new();
        for i in 0..GROUP_EVENTS_KEPT + 5 {
            events = append_event(&events, format!("{{\"n\":{i}}}\n").as_bytes());
        }
        let text = String::from_utf8(events).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), GROUP_EVENTS_KEPT);
        assert_eq!(lines[0], "{\"n\":5}");
        assert_eq!(
            lines[GROUP_EVENTS_KEPT - 1],
            format!("{{\"n\":{}}}", GROUP_EVENTS_KEPT + 4)
        );
        assert!(text.ends_with('\n'));
        assert_eq!(append_event(b"", b"a\n"), b"a\n");
    }
}
