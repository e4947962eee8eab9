//! The cluster-group claim's statements (the body is `store/body/group_claim.rs`; the claim's
//! decisions are the engine's, `topic/claim.rs`). They run in one `BEGIN IMMEDIATE`
//! transaction, which has the database to itself: where MySQL locks and skips (`FOR UPDATE
//! SKIP LOCKED`), the same statements here simply read. No other claim can hold a cursor or be
//! writing a lease meanwhile, so `lock_cursors` never skips one, `busy_cursor` finds none
//! after it (the engine's wait never happens), and `held` sees every lease there is.
//!
//! The statements take the same parameters in the same order as MySQL's: the partition's end
//! and first offset come from subqueries (as MySQL's, which must not lock them), and lists bind
//! the group or topic id after them where MySQL's derived tables do.
//!
//! Offsets are handed out only below the partition's end (`topic_partitions.next_offset`),
//! which only committed publishes advance, each over a dense range (`publish.rs`): a cursor
//! never passes an offset that is not logged.

use super::now_us;
use crate::store::body::{GroupClaimSql, cursor_select, partition_end};

/// Columns of a cursor with its partition's end and first retained offset: topic id, topic
/// id, group id.
macro_rules! cursor_columns {
    () => {
        concat!(
            cursor_select!(),
            now_us!(),
            " FROM {p}group_cursors c WHERE c.group_id = ? "
        )
    };
}

pub(super) const SQL: GroupClaimSql = GroupClaimSql {
    claim_retries: concat!(
        "SELECT id, partition_no, msg_offset, attempts, token, ",
        now_us!(),
        " FROM {p}group_retries WHERE group_id = ? AND run_at <= ",
        now_us!(),
        " ORDER BY run_at, id LIMIT ?"
    ),
    delete_retries: "DELETE FROM {p}group_retries WHERE id IN ({list}) AND group_id = ?",
    held: "SELECT id FROM {p}group_leases WHERE group_id = ? AND id IN ({list})",
    // An `IN` list of row values through a subquery: older SQLite versions (3.40) look up a
    // bare `IN (VALUES …)` of row values by the first key column only, reading the whole
    // topic; this form gets the whole primary key on every version.
    log_at: "SELECT partition_no, msg_offset, id, msg_key, headers, body, published_at \
        FROM {p}topic_log WHERE (partition_no, msg_offset) IN \
        (SELECT column1, column2 FROM (VALUES {list})) AND topic_id = ?",
    position_row: "(?,?)",
    lock_cursors: concat!(
        cursor_columns!(),
        "AND c.partition_no >= ? AND c.partition_no < ? AND c.next_offset < ",
        partition_end!(),
        " ORDER BY c.partition_no LIMIT ?"
    ),
    busy_cursor: concat!(
        "SELECT c.partition_no FROM {p}group_cursors c ",
        "WHERE c.group_id = ? AND c.next_offset < ",
        partition_end!(),
        " LIMIT 1"
    ),
    wait_cursor: concat!(cursor_columns!(), "AND c.partition_no = ?"),
    occupied: "SELECT partition_no FROM {p}group_leases \
        WHERE group_id = ? AND partition_no IN ({list}) UNION SELECT partition_no \
        FROM {p}group_retries WHERE group_id = ? AND partition_no IN ({list})",
    log_range: "SELECT partition_no, msg_offset, id, msg_key, headers, body, published_at \
        FROM {p}topic_log WHERE topic_id = ? AND partition_no = ? \
        AND msg_offset >= ? AND msg_offset < ? ORDER BY msg_offset",
    past_tokens: "SELECT msg_offset, token FROM {p}group_history \
        WHERE group_id = ? AND partition_no = ? AND msg_offset >= ? AND msg_offset < ?",
    lease_row: "(?,?,?,?,?,?,?,?,?)",
};

/// The query plans of the hot statements of topics and groups on the bundled SQLite: each reads
/// its table by a key (never a `SCAN` of a table), and lookups by position use the whole
/// primary key.
#[cfg(test)]
mod plans {
    use sqlx::{AssertSqlSafe, Connection, Row, SqlStr, SqliteConnection};

    use super::super::{SqliteStore, group_settle, publish, stream};
    use super::SQL;

    /// The plan's lines (`EXPLAIN QUERY PLAN`; parameters left unbound are NULL).
    async fn plan(conn: &mut SqliteConnection, sql: SqlStr) -> Vec<String> {
        let explain = format!("EXPLAIN QUERY PLAN {}", sql.as_str());
        sqlx::query(AssertSqlSafe(explain))
            .fetch_all(&mut *conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(3))
            .collect()
    }

    #[tokio::test]
    async fn hot_statements_read_by_key() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let store = SqliteStore::with_prefix("sqlmq_");
        crate::client::migrate::migrate_to::<sqlx::Sqlite>(
            &store,
            &mut conn,
            SqliteStore::latest_version(),
        )
        .await
        .unwrap();
        let st = &store.st;
        let cases: Vec<(&str, SqlStr, &str)> = vec![
            (
                "publish: take offsets",
                st.get(publish::TAKE_OFFSETS),
                "PRIMARY KEY (topic_id=? AND partition_no=?)",
            ),
            (
                "publish: known ids",
                st.list(publish::KNOWN_IDS, "?", 4),
                "sqlite_autoindex_sqlmq_topic_log_1 (id=?)",
            ),
            (
                "broadcast read",
                st.get(stream::SQL.read_from),
                "PRIMARY KEY (topic_id=? AND partition_no=? AND msg_offset>?)",
            ),
            (
                "claim: due retries",
                st.get(SQL.claim_retries),
                "sqlmq_group_retries_due (group_id=? AND run_at<?)",
            ),
            (
                "claim: cursors with work",
                st.get(SQL.lock_cursors),
                "PRIMARY KEY (topic_id=? AND partition_no=?)",
            ),
            (
                "claim: delete retries",
                st.list(SQL.delete_retries, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "claim: records at positions",
                st.list(SQL.log_at, SQL.position_row, 4),
                "PRIMARY KEY (topic_id=? AND partition_no=? AND msg_offset=?)",
            ),
            (
                "claim: log range",
                st.get(SQL.log_range),
                "PRIMARY KEY (topic_id=? AND partition_no=? AND msg_offset>? AND msg_offset<?)",
            ),
            (
                "claim: held",
                st.list(SQL.held, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "claim: occupied",
                st.list(SQL.occupied, "?", 4),
                "sqlmq_group_retries_part (group_id=? AND partition_no=?)",
            ),
            (
                "settle: leases",
                st.list(group_settle::SQL.lock_leases, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "settle: delete leases",
                st.list(group_settle::SQL.delete_leases, "?", 4),
                "PRIMARY KEY (group_id=? AND id=?)",
            ),
            (
                "settle: history events",
                st.list(group_settle::HISTORY_EVENTS, group_settle::POSITION_ROW, 4),
                "PRIMARY KEY (group_id=? AND partition_no=? AND msg_offset=?)",
            ),
            (
                "expiry: expired leases",
                st.get(group_settle::SQL.claim_expired),
                "sqlmq_group_leases_expiry (group_id=? AND lease_until<?)",
            ),
        ];
        for (name, sql, expect) in cases {
            let lines = plan(&mut conn, sql).await;
            assert!(
                lines.iter().any(|l| l.contains(expect)),
                "{name}: expected {expect:?} in {lines:#?}"
            );
            // Scans of the statement's own lists of values are fine.
            let own = |l: &str| {
                l.contains("CONSTANT ROWS")
                    || l.contains("VALUES CLAUSE")
                    || l.starts_with("SCAN (subquery")
            };
            assert!(
                !lines.iter().any(|l| l.starts_with("SCAN ") && !own(l)),
                "{name}: a table scan in {lines:#?}"
            );
        }
    }
}
