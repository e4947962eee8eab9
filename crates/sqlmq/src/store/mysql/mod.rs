//! The MySQL/MariaDB backend: every SQL statement sqlmq runs, and its migrations.
//!
//! `sqlx::MySql` is the [`Backend`]; [`MySqlStore`] implements each store trait of the seam
//! (`store/*.rs`) in the file of its concept. Methods take a `&mut MySqlConnection` that is
//! already inside a transaction when they need one (the engine opens it, at READ COMMITTED,
//! and owns retries); they never commit — except the claim, `ack_own` and the send script, which
//! open and commit their own transaction in fewer round trips (`script.rs`).
//!
//! | file | implements | statements |
//! |---|---|---|
//! | `mod.rs` | [`Backend`] for `sqlx::MySql` | row decoding, id lists, multi-row inserts |
//! | `statements.rs` | | table-prefix expansion, bucketed list sizes, derived-table id lists |
//! | `errors.rs` | | error numbers and their classes |
//! | `connect.rs` | | opening a pool: session settings, when to ping |
//! | `script.rs` | | several statements in one round trip, values rendered as literals |
//! | `server.rs` | `Server` | flavour/version/durability detection, `SKIP LOCKED` self-test, clock |
//! | `schema.rs` | | the migrations |
//! | `migrate.rs` | `Schema` | applying them, the schema version |
//! | `queues.rs` | `Queues` | queue rows: create, look up, pause |
//! | `send.rs` | `Enqueue` | messages, idempotency keys, routing to ready/scheduled |
//! | `send_script.rs` | | a send of plain messages in one round trip |
//! | `keys.rs` | | per-key FIFO: heads, blocked successors, release |
//! | `claim.rs` | `Claim` | the `SKIP LOCKED` claim |
//! | `settle.rs` | `Settle` | ack, fail, extend, releases (compare-and-set on the fencing token) |
//! | `maintain.rs` | `Maintain` | promote due messages, prune idempotency keys; queue releases |
//! | `member_dead.rs` | `MemberDead` | broadcast members' dead letters |
//! | `admin.rs` | `Admin` | counts, cancel, purge, key repair |
//! | `dead.rs` | `DeadLetters` | dead letters: list, redrive |
//! | `processes.rs` | `Processes` | worker process registry: register, heartbeat, find the dead |
//! | `probe.rs` | `Probe` | the idle worker's one-query wakeup probes |
//! | `topics.rs` | `Topics` | topic rows, partition counters, deleting a topic |
//! | `sequence.rs` | `Publish` | publishing to `topic_pending`, sequencing into `topic_log` |
//! | `stream.rs` | `Stream` | plain log reads: broadcast, queries, offsets by time, checkpoints |
//! | `retention.rs` | `Retention` | removing old records in primary-key-range chunks |
//! | `groups.rs` | `Groups` | consumer group rows, cursors, deleting a group |
//! | `group_claim.rs` | `GroupClaim` | the cluster claim's statements (`SKIP LOCKED` retries and cursors) |
//! | `group_settle.rs` | `GroupSettle` | group ack, failure, extend, lease releases; history events trimmed in SQL |
//! | `group_dead.rs` | `GroupDead` | group dead letters, waiting retries, replay |
//! | `group_state.rs` | `GroupState` | per-partition counts (lag), one record's rows (trace), timeouts |
//! | `plans.rs`, `plans_topics.rs` | | the EXPLAIN test of every hot statement |

pub(crate) mod admin;
pub(crate) mod claim;
pub(crate) mod connect;
pub(crate) mod dead;
pub(crate) mod errors;
pub(crate) mod grants;
pub(crate) mod group_claim;
pub(crate) mod group_dead;
pub(crate) mod group_settle;
pub(crate) mod group_state;
pub(crate) mod groups;
pub(crate) mod keys;
pub(crate) mod maintain;
mod member_dead;
pub(crate) mod migrate;
#[cfg(test)]
mod plans;
#[cfg(test)]
mod plans_topics;
pub(crate) mod probe;
pub(crate) mod processes;
pub(crate) mod queues;
pub(crate) mod retention;
pub(crate) mod schema;
mod script;
pub(crate) mod send;
mod send_script;
pub(crate) mod sequence;
pub(crate) mod server;
pub(crate) mod settle;

pub(crate) mod stream;
pub(crate) mod topics;

use sqlx::mysql::MySqlRow;
use sqlx::{MySql, MySqlConnection, Row};

use crate::domain::MessageId;
use crate::domain::{Error, Result};
use crate::store::Backend;
use crate::store::statements::{MAX_LIST, Statements, bucket};

/// Statement that opens a transaction of sqlmq's on a connection it does not own (a caller's,
/// or one opened for a check): READ COMMITTED set explicitly for this transaction (never the
/// server default, REPEATABLE READ, whose gap locks make claims deadlock with producers), sent
/// with `START TRANSACTION` in one round trip. The pool's own sessions are READ COMMITTED from
/// the moment they connect (`connect.rs`) and begin with a bare `START TRANSACTION`.
pub(crate) const BEGIN_READ_COMMITTED: &str =
    "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION";

/// SQL expression: microseconds since the Unix epoch of a `DATETIME(6)` column holding UTC.
/// `TIMESTAMPDIFF` is pure calendar arithmetic, unlike `UNIX_TIMESTAMP`, which depends on the
/// session time zone.
macro_rules! micros {
    ($col:literal) => {
        concat!(
            "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ",
            $col,
            ")"
        )
    };
}
pub(crate) use micros;

/// Most placeholders MySQL accepts in one statement.
const MAX_PARAMS: usize = u16::MAX as usize;

/// The MySQL/MariaDB store: the body (`store/body/`) over this backend's statements.
pub type MySqlStore = crate::store::body::SqlStore<MySql>;

impl crate::store::body::Dialect for MySql {
    const MAX_PARAMS: usize = MAX_PARAMS;
    const PROCESSES: crate::store::body::ProcessSql = processes::SQL;
    const GROUP_CLAIM: crate::store::body::GroupClaimSql = group_claim::SQL;
    const GROUP_SETTLE: crate::store::body::GroupSettleSql = group_settle::SQL;
    const GROUP_DEAD: crate::store::body::GroupDeadSql = group_dead::SQL;
    const GROUP_STATE: crate::store::body::GroupStateSql = group_state::SQL;
}

impl Backend for MySql {
    type Store = MySqlStore;
    const SCHEME: &'static str = "mysql";
}

impl crate::store::sealed::Sealed for MySql {}

/// Read a `BINARY(16)` message id from column `idx`.
pub(crate) fn id_at(row: &MySqlRow, idx: usize) -> Result<MessageId> {
    MessageId::from_slice(row.try_get::<&[u8], _>(idx)?)
}

/// Read an optional `VARBINARY` text column.
pub(crate) fn opt_text_at(row: &MySqlRow, idx: usize) -> Result<Option<String>> {
    match row.try_get::<Option<Vec<u8>>, _>(idx)? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| Error::Corrupt(format!("column {idx} is not UTF-8: {e}"))),
    }
}

/// Headers are stored as a JSON object, NULL when empty.
pub(crate) fn headers_at(
    row: &MySqlRow,
    idx: usize,
) -> Result<std::collections::BTreeMap<String, String>> {
    match row.try_get::<Option<&[u8]>, _>(idx)? {
        None => Ok(Default::default()),
        Some(bytes) => serde_json::from_slice(bytes)
            .map_err(|e| Error::Corrupt(format!("headers are not a JSON object: {e}"))),
    }
}

/// The statement `template` (one `{list}` of `?`) bound to `chunk` (at most `MAX_LIST` ids),
/// padded to its bucket by repeating the last id, which changes nothing in an `IN` list.
fn id_list_query<'q>(
    st: &Statements,
    template: &'static str,
    chunk: &'q [MessageId],
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    let n = bucket(chunk.len());
    let mut q = sqlx::query(st.list(template, "?", n));
    for i in 0..n {
        q = q.bind(chunk[i.min(chunk.len() - 1)].bytes());
    }
    q
}

/// Run `template` over `ids` in bucketed chunks; returns the total rows affected.
pub(crate) async fn exec_id_list(
    st: &Statements,
    conn: &mut MySqlConnection,
    template: &'static str,
    ids: &[MessageId],
) -> Result<u64> {
    let mut affected = 0;
    for chunk in ids.chunks(MAX_LIST) {
        affected += id_list_query(st, template, chunk)
            .execute(&mut *conn)
            .await?
            .rows_affected();
    }
    Ok(affected)
}

/// Fetch the rows of `template` for `ids` in bucketed chunks (`IN` matches a row once, so the
/// padding never duplicates rows).
pub(crate) async fn fetch_id_list(
    st: &Statements,
    conn: &mut MySqlConnection,
    template: &'static str,
    ids: &[MessageId],
) -> Result<Vec<MySqlRow>> {
    let mut rows = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_LIST) {
        rows.extend(
            id_list_query(st, template, chunk)
                .fetch_all(&mut *conn)
                .await?,
        );
    }
    Ok(rows)
}

/// A query being built for MySQL.
pub(crate) type Q<'q> = sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>;

/// Insert `rows` with a multi-row `VALUES` statement (`{list}` of `item`), split into bucket-sized
/// statements of at most `max_rows` rows each.
pub(crate) async fn insert_values<T>(
    st: &Statements,
    conn: &mut MySqlConnection,
    template: &'static str,
    item: &'static str,
    rows: &[T],
    max_rows: usize,
    bind: impl for<'q> Fn(Q<'q>, &'q T) -> Q<'q>,
) -> Result<()> {
    let mut rest = rows;
    for size in crate::store::statements::split_into_buckets(rows.len(), max_rows) {
        let (chunk, tail) = rest.split_at(size);
        let mut q = sqlx::query(st.list(template, item, size));
        for row in chunk {
            q = bind(q, row);
        }
        q.execute(&mut *conn).await?;
        rest = tail;
    }
    Ok(())
}
