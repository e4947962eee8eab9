//! What the bench needs from each database beyond sqlmq itself: its scratch area, the raw
//! statements of the baselines and how a raw write commits, the facts printed with the
//! figures, and the counters some scenarios read. Scenarios are generic over [`Db`]; one file
//! per backend implements it.
//!
//! | file | backend | scratch area | raw writes | statement counters |
//! |---|---|---|---|---|
//! | `mysql.rs` | MySQL/MariaDB | a database of its own, or a table prefix | autocommit | per-session `Questions` |
//! | `sqlite.rs` | SQLite | a fresh file beside the configured one | `BEGIN IMMEDIATE` … `COMMIT` | not available |

mod mysql;
mod sqlite;

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Result;
use sqlx::{
    AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type,
};

use crate::machine::ServerFacts;
use crate::scratch::Scratch;
use sqlmq_cli_common::settings::Settings;

/// The raw baselines' statements in a backend's dialect; `{t}` stands for the quoted table.
pub struct RawSql {
    /// A table shaped like sqlmq's message table.
    pub create: &'static str,
    /// One row: `?` id, `?` body.
    pub insert: &'static str,
    /// The `VALUES` tuple of [`RawSql::insert`], repeated for multi-row INSERTs.
    pub row: &'static str,
    /// Delete one row by id (`?`).
    pub delete: &'static str,
    /// The plain queue's claim (`raw.queue`): the ids of the first `?` rows by id, with their
    /// bodies, locked for the transaction (skipping rows others hold, where the database can).
    pub claim: &'static str,
    /// Delete the rows whose ids fill `{list}`: [`RawSql::list_item`] once per id, joined by
    /// [`RawSql::list_separator`].
    pub delete_list: &'static str,
    /// One id of [`RawSql::delete_list`]'s list.
    pub list_item: &'static str,
    /// Between two items of [`RawSql::delete_list`]'s list.
    pub list_separator: &'static str,
    /// The lease queue's table (`raw.queue`'s lease figures): [`RawSql::create`]'s columns
    /// plus the time a row becomes visible again (the start of time for a new row) and a
    /// fencing token, in the message row itself.
    pub lease_create: &'static str,
    /// The lease queue's claim: as [`RawSql::claim`], of the rows visible now.
    pub lease_claim: &'static str,
    /// Lease the rows whose ids fill `{list}` (as [`RawSql::delete_list`]'s) for 30 s and
    /// bump their tokens.
    pub lease_update: &'static str,
    /// The priority queue's table (`raw.queue`'s keyed figures): [`RawSql::create`]'s columns
    /// kept in claim order — primary key `(queue_id, priority, id)` — with the id unique, as
    /// a queue with priorities whose messages are found (and deduplicated) by id needs.
    pub keyed_create: &'static str,
    /// The priority queue's claim: as [`RawSql::claim`], in priority order.
    pub keyed_claim: &'static str,
    /// As [`RawSql::delete_list`], through the unique id.
    pub keyed_delete_list: &'static str,
    /// The priority lease queue's table (`raw.queue`'s keyed lease figures): the priority
    /// queue's, plus the lease queue's visibility time and fencing token in the row.
    pub keyed_lease_create: &'static str,
    /// The priority lease queue's claim: as [`RawSql::keyed_claim`], of the rows visible now.
    pub keyed_lease_claim: &'static str,
    /// As [`RawSql::lease_update`], through the unique id.
    pub keyed_lease_update: &'static str,
    /// An index over the priority lease queue's leases, `(queue_id, visible_at)`: what finds
    /// expired leases and a dead process's claims without reading the backlog.
    pub inflight_index: &'static str,
    /// Put the first `{n}` visible rows of the priority lease queue (in claim order) out of
    /// sight for an hour: the in-flight and scheduled messages at the head of `raw.head`.
    pub inflight_hide: &'static str,
    /// One row per message with its state in the claim index: `(queue_id, state, priority,
    /// id)`, and a second index `(queue_id, state, due_at)` over the timed states (in flight,
    /// scheduled). The primary key is the id.
    pub stated: LayoutSql,
    /// One row per message kept in the order of every state: primary key `(queue_id, state,
    /// priority, due_at, id)` — `due_at` the start of time while ready, the end of the state
    /// while in flight or scheduled — and the id unique. A state change moves the row, body
    /// and all, to its new place in the clustered index.
    pub clustered: LayoutSql,
    /// [`RawSql::clustered`] with the id indexed but not unique: a moved row's id entry is
    /// changed without the duplicate check (and its locks) a unique index takes; ids are then
    /// unique only by how they are made.
    pub loose: LayoutSql,
    /// One row per message with one index for every state, `(queue_id, state, priority,
    /// due_at, id)` (River's): `due_at` empty while ready, so ready rows are in claim order;
    /// the end of the state while in flight or scheduled, in order within a priority. The
    /// primary key is the id.
    pub single: LayoutSql,
}

/// A one-row layout of `raw.queue` and `raw.head` (`{t}` the table): rows inserted with
/// [`RawSql::insert`] are ready; acks delete by id with [`RawSql::delete_list`].
pub struct LayoutSql {
    /// The table and its indexes, statement by statement.
    pub create: &'static [&'static str],
    /// The ids (and bodies) of the first `?` ready rows in claim order, locked (skipping rows
    /// others hold, where the database can).
    pub claim: &'static str,
    /// Lease the rows whose ids fill `{list}` (as [`RawSql::delete_list`]'s) for 30 s: in
    /// flight, their tokens bumped.
    pub lease: &'static str,
    /// Put the first `{n}` ready rows (in claim order) in state `{state}` (1 in flight, 2
    /// scheduled) for an hour.
    pub hide: &'static str,
}

/// A database the bench runs on: a sqlmq backend plus what the bench measures it with.
pub trait Db: sqlmq::Backend {
    /// Statements of the raw baselines.
    const RAW: RawSql;
    /// How a raw write transaction starts: the statement sqlmq's own transactions start with
    /// on this backend, so that the baselines take the same locks.
    const BEGIN: &'static str;
    /// Whether a single raw statement commits on its own (autocommit). Where it does not, each
    /// raw write runs in its own [`Db::BEGIN`] … `COMMIT`, as sqlmq's writes do there.
    const AUTOCOMMIT: bool;
    /// What "16 writers" are on this backend, for labels: connections of their own, or tasks
    /// taking turns on one writer connection.
    const WRITERS: &'static str;
    /// Why statements executed per connection cannot be counted here (`None`: they can, with
    /// [`Db::statements`]).
    const NO_STATEMENT_COUNTER: Option<&'static str>;
    /// Why there is no topic sequencer to time alone here (`None`: there is one).
    const NO_SEQUENCER: Option<&'static str>;
    /// Why twelve clients of their own (as twelve processes would be) do not make a mixed run
    /// here (`None`: they do).
    const NO_SEPARATE_CLIENTS: Option<&'static str>;

    /// `name` quoted as an identifier.
    fn quote(name: &str) -> String;

    /// Create the scratch area of run `run_id` for the database `settings` name.
    fn create_scratch(
        settings: &Settings,
        run_id: &str,
    ) -> impl Future<Output = Result<Scratch<Self>>> + Send;

    /// The facts of the database and of the connections sqlmq opens to it.
    fn facts(scratch: &Scratch<Self>) -> impl Future<Output = Result<ServerFacts>> + Send;

    /// Names of every table in the scratch area.
    fn tables(scratch: &Scratch<Self>) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Drop the tables `names` of the scratch area.
    fn drop_tables(
        scratch: &Scratch<Self>,
        names: &[String],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Remove the whole scratch area (its database or its file; a table prefix is dropped by
    /// the caller with [`Db::drop_tables`]).
    fn remove(scratch: &Scratch<Self>) -> impl Future<Output = Result<()>> + Send;

    /// Run `sql` with `binds` bound in order, as it is (no transaction of its own).
    fn execute<'a>(
        conn: &'a mut Self::Connection,
        sql: Arc<str>,
        binds: &'a [&'a [u8]],
    ) -> impl Future<Output = Result<()>> + Send + 'a;

    /// The first column (a 16-byte id) of each row `sql` returns with the integer `limit`
    /// bound.
    fn fetch_ids<'a>(
        conn: &'a mut Self::Connection,
        sql: Arc<str>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<[u8; 16]>>> + Send + 'a;

    /// The server's undo history not yet purged (InnoDB's history list length): what long
    /// transactions or a lagging purge leave behind. `None` where there is none (SQLite) or the
    /// bench's user may not read it (MySQL's PROCESS privilege).
    fn history_length(scratch: &Scratch<Self>) -> impl Future<Output = Option<u64>> + Send;

    /// Statements executed so far by each open connection of `pool`, by connection id. Only
    /// call it while no connection of the pool is in use: it takes each one once.
    fn statements(pool: &Pool<Self>) -> impl Future<Output = Result<HashMap<u64, u64>>> + Send;

    /// The session counters `names` (status variables such as `Com_commit`) of each open
    /// connection of `pool`, by connection id, in the order of `names`. Same rule as
    /// [`Db::statements`].
    fn counters(
        pool: &Pool<Self>,
        names: &'static [&'static str],
    ) -> impl Future<Output = Result<HashMap<u64, Vec<u64>>>> + Send;
}

/// [`Db::execute`] for any sqlx database that binds byte slices.
async fn execute_on<'a, DB>(
    conn: &'a mut DB::Connection,
    sql: Arc<str>,
    binds: &'a [&'a [u8]],
) -> Result<()>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    &'a mut DB::Connection: Executor<'a, Database = DB>,
    for<'q> &'q [u8]: Encode<'q, DB> + Type<DB>,
{
    let mut q = sqlx::query(AssertSqlSafe(sql));
    for b in binds {
        q = q.bind(*b);
    }
    q.execute(conn).await?;
    Ok(())
}

/// [`Db::fetch_ids`] for any sqlx database that binds integers and decodes byte vectors.
async fn fetch_ids_on<'a, DB>(
    conn: &'a mut DB::Connection,
    sql: Arc<str>,
    limit: i64,
) -> Result<Vec<[u8; 16]>>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    &'a mut DB::Connection: Executor<'a, Database = DB>,
    i64: for<'q> Encode<'q, DB> + Type<DB>,
    Vec<u8>: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(limit)
        .fetch_all(conn)
        .await?;
    rows.iter()
        .map(|row| {
            let id: Vec<u8> = row.try_get(0)?;
            id.try_into()
                .map_err(|id: Vec<u8>| anyhow::anyhow!("an id of {} bytes", id.len()))
        })
        .collect()
}

/// Statements executed between two readings of [`Db::statements`] (connections opened
/// meanwhile count from zero).
pub fn delta(before: &HashMap<u64, u64>, after: &HashMap<u64, u64>) -> u64 {
    after
        .iter()
        .map(|(id, v)| v.saturating_sub(before.get(id).copied().unwrap_or(0)))
        .sum()
}

/// The statements one reading of [`Db::statements`] itself adds, to subtract from a [`delta`]:
/// the least of three back-to-back pairs, since a statement of a task running beside (a
/// worker's poll) may fall between any one pair and would be subtracted with it.
pub async fn reading_overhead<B: Db>(pool: &Pool<B>) -> Result<u64> {
    let mut overhead = u64::MAX;
    for _ in 0..3 {
        let first = B::statements(pool).await?;
        overhead = overhead.min(delta(&first, &B::statements(pool).await?));
    }
    Ok(overhead)
}

/// Statements the connections of `pools` execute over `window` (minus those of the counting
/// itself: [`reading_overhead`]), and the window as measured. Call it while nothing else uses
/// the pools' connections but between their uses.
pub async fn count_statements<B: Db>(
    pools: &[&Pool<B>],
    window: std::time::Duration,
) -> Result<(u64, std::time::Duration)> {
    let mut overhead = 0;
    for pool in pools {
        overhead += reading_overhead(pool).await?;
    }
    let mut before = Vec::with_capacity(pools.len());
    for pool in pools {
        before.push(B::statements(pool).await?);
    }
    let started = std::time::Instant::now();
    tokio::time::sleep(window).await;
    let mut counted = 0;
    for (pool, before) in pools.iter().zip(&before) {
        counted += delta(before, &B::statements(pool).await?);
    }
    Ok((counted.saturating_sub(overhead), started.elapsed()))
}

/// [`delta`] of the counter at `index` of two readings of [`Db::counters`].
pub fn delta_at(
    before: &HashMap<u64, Vec<u64>>,
    after: &HashMap<u64, Vec<u64>>,
    index: usize,
) -> u64 {
    let pick = |m: &HashMap<u64, Vec<u64>>| -> HashMap<u64, u64> {
        m.iter().map(|(id, v)| (*id, v[index])).collect()
    };
    delta(&pick(before), &pick(after))
}

/// `reason` as a report states it: "not available on SQLite: …" (sqlx's name of the database).
pub fn not_available<B: Db>(reason: &str) -> String {
    format!("not available on {}: {reason}", <B as sqlx::Database>::NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_counts_new_connections_from_zero() {
        let before = HashMap::from([(1, 10), (2, 5)]);
        let after = HashMap::from([(1, 14), (2, 5), (3, 2)]);
        assert_eq!(delta(&before, &after), 6);
    }
}
