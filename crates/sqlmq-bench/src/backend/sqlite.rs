//! The bench on SQLite: a fresh file beside the configured one (`sqlmq_bench_<run>.db` in the
//! same directory), removed at the end with its `-wal` and `-shm` files; the configured file
//! itself is never opened. Every connection to the scratch file is one sqlmq opens (a
//! `sqlmq::Client`'s), so the raw baselines run with the settings sqlmq's statements get: WAL,
//! `synchronous = FULL`, the busy timeout, one writer connection per client.
//!
//! Raw writes run as sqlmq's writes run here: each in its own `BEGIN IMMEDIATE` … `COMMIT` on
//! the writer connection. There is no server, so there is nothing that counts the statements a
//! connection executes, and no sequencer (records get their offsets in the publishing
//! transaction): the scenarios that measure those report them as not available.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use sqlx::{AssertSqlSafe, Row, Sqlite, SqliteConnection, SqlitePool};

use super::{Db, LayoutSql, RawSql};
use crate::machine::{ServerFacts, SqliteFacts};
use crate::scratch::{Area, Scratch};
use sqlmq_cli_common::settings::Settings;

/// The library's version and the settings of the writer connection sqlmq opened.
const SETTINGS: &str = "SELECT sqlite_version(), \
    (SELECT journal_mode FROM pragma_journal_mode), \
    (SELECT synchronous FROM pragma_synchronous), \
    (SELECT timeout FROM pragma_busy_timeout)";

/// Pages written (and dropped) before any scenario, so that the write-ahead log and the file
/// have grown to their working size: the log grows to SQLite's automatic checkpoint threshold
/// (1 000 pages) and is then reused from its start, without growing again. Writes that grow a
/// file cost more (the file's size must be synced too) — about 20 % more per small commit on
/// this machine — and only the first scenario of a run (`raw.insert`) would pay for it.
const WARM_PAGES: u32 = 1100;

/// Fill [`WARM_PAGES`] pages of 4 000 bytes in one transaction, then drop them.
const WARM_UP: [&str; 3] = [
    "CREATE TABLE sqlmq_bench_warm (b BLOB NOT NULL)",
    "INSERT INTO sqlmq_bench_warm (b) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL \
     SELECT i + 1 FROM n WHERE i < {pages}) SELECT zeroblob(4000) FROM n",
    "DROP TABLE sqlmq_bench_warm",
];

/// Files SQLite keeps beside a database file (`-journal` only outside WAL mode).
const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `RawSql::clustered`, which `RawSql::loose` is but for its id's index.
const CLUSTERED: LayoutSql = LayoutSql {
    create: &[
        "CREATE TABLE {t} (id BLOB NOT NULL UNIQUE, queue_id INTEGER NOT NULL, \
        priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
        state INTEGER NOT NULL DEFAULT 0, due_at INTEGER NOT NULL DEFAULT 0, \
        token INTEGER NOT NULL DEFAULT 0, \
        PRIMARY KEY (queue_id, state, priority, due_at, id)) WITHOUT ROWID",
    ],
    claim: "SELECT id, body FROM {t} WHERE queue_id = 1 AND state = 0 \
        ORDER BY priority, due_at, id LIMIT ?",
    lease: "UPDATE {t} SET state = 1, due_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 30000000, token = token + 1 \
        WHERE id IN ({list})",
    hide: "UPDATE {t} SET state = {state}, due_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 3600000000 WHERE id IN \
        (SELECT id FROM {t} WHERE queue_id = 1 AND state = 0 \
        ORDER BY priority, due_at, id LIMIT {n})",
};

impl Db for Sqlite {
    /// A table shaped like sqlmq's message table on SQLite (`schema.rs` of the library's
    /// SQLite store): 16-byte `BLOB` id primary key, `INTEGER` queue id and priority, `BLOB`
    /// body, `INTEGER` microseconds from the database clock; `WITHOUT ROWID`, so the primary
    /// key is the table's order, as in sqlmq's table and in InnoDB.
    const RAW: RawSql = RawSql {
        create: "CREATE TABLE {t} (id BLOB NOT NULL PRIMARY KEY, queue_id INTEGER NOT NULL, \
            priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL) \
            WITHOUT ROWID",
        insert: "INSERT INTO {t} (id, queue_id, priority, body, created_at) \
            VALUES (?, 1, 0, ?, CAST(unixepoch('subsec') * 1000000 AS INTEGER))",
        row: "(?, 1, 0, ?, CAST(unixepoch('subsec') * 1000000 AS INTEGER))",
        delete: "DELETE FROM {t} WHERE id = ?",
        claim: "SELECT id, body FROM {t} ORDER BY id LIMIT ?",
        delete_list: "DELETE FROM {t} WHERE id IN ({list})",
        list_item: "?",
        list_separator: ",",
        lease_create: "CREATE TABLE {t} (id BLOB NOT NULL PRIMARY KEY, queue_id INTEGER NOT NULL, \
            priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
            visible_at INTEGER NOT NULL DEFAULT 0, token INTEGER NOT NULL DEFAULT 0) \
            WITHOUT ROWID",
        lease_claim: "SELECT id, body FROM {t} \
            WHERE visible_at <= CAST(unixepoch('subsec') * 1000000 AS INTEGER) \
            ORDER BY id LIMIT ?",
        lease_update: "UPDATE {t} \
            SET visible_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 30000000, \
            token = token + 1 WHERE id IN ({list})",
        keyed_create: "CREATE TABLE {t} (id BLOB NOT NULL UNIQUE, queue_id INTEGER NOT NULL, \
            priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
            PRIMARY KEY (queue_id, priority, id)) WITHOUT ROWID",
        keyed_claim: "SELECT id, body FROM {t} WHERE queue_id = 1 ORDER BY priority, id LIMIT ?",
        keyed_delete_list: "DELETE FROM {t} WHERE id IN ({list})",
        keyed_lease_create: "CREATE TABLE {t} (id BLOB NOT NULL UNIQUE, queue_id INTEGER NOT NULL, \
            priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
            visible_at INTEGER NOT NULL DEFAULT 0, token INTEGER NOT NULL DEFAULT 0, \
            PRIMARY KEY (queue_id, priority, id)) WITHOUT ROWID",
        keyed_lease_claim: "SELECT id, body FROM {t} WHERE queue_id = 1 \
            AND visible_at <= CAST(unixepoch('subsec') * 1000000 AS INTEGER) \
            ORDER BY priority, id LIMIT ?",
        keyed_lease_update: "UPDATE {t} \
            SET visible_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 30000000, \
            token = token + 1 WHERE id IN ({list})",
        // Index names are per schema here; the table is dropped (and its index with it) before
        // each phase.
        inflight_index: "CREATE INDEX raw_inflight ON {t} (queue_id, visible_at)",
        inflight_hide: "UPDATE {t} SET visible_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 3600000000 WHERE id IN \
            (SELECT id FROM {t} WHERE queue_id = 1 AND visible_at <= CAST(unixepoch('subsec') * 1000000 AS INTEGER) \
            ORDER BY priority, id LIMIT {n})",
        // SQLite indexes part of a table: the claim index holds the ready rows only, the timed
        // index the others, so a state change moves one entry from one to the other.
        stated: LayoutSql {
            create: &[
                "CREATE TABLE {t} (id BLOB NOT NULL PRIMARY KEY, queue_id INTEGER NOT NULL, \
                    priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
                    state INTEGER NOT NULL DEFAULT 0, due_at INTEGER, \
                    token INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
                "CREATE INDEX raw_claim ON {t} (queue_id, priority, id) WHERE state = 0",
                "CREATE INDEX raw_timed ON {t} (queue_id, state, due_at) WHERE state <> 0",
            ],
            claim: "SELECT id, body FROM {t} INDEXED BY raw_claim WHERE queue_id = 1 \
                AND state = 0 ORDER BY priority, id LIMIT ?",
            lease: "UPDATE {t} SET state = 1, due_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 30000000, token = token + 1 \
                WHERE id IN ({list})",
            hide: "UPDATE {t} SET state = {state}, due_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 3600000000 WHERE id IN \
                (SELECT id FROM {t} INDEXED BY raw_claim WHERE queue_id = 1 AND state = 0 \
                ORDER BY priority, id LIMIT {n})",
        },
        clustered: CLUSTERED,
        loose: LayoutSql {
            create: &[
                "CREATE TABLE {t} (id BLOB NOT NULL UNIQUE, queue_id INTEGER NOT NULL, \
                priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
                state INTEGER NOT NULL DEFAULT 0, due_at INTEGER NOT NULL DEFAULT 0, \
                token INTEGER NOT NULL DEFAULT 0, \
                PRIMARY KEY (queue_id, state, priority, due_at, id)) WITHOUT ROWID",
            ],
            ..CLUSTERED
        },
        single: LayoutSql {
            create: &[
                "CREATE TABLE {t} (id BLOB NOT NULL PRIMARY KEY, queue_id INTEGER NOT NULL, \
                    priority INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL, \
                    state INTEGER NOT NULL DEFAULT 0, due_at INTEGER, \
                    token INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
                "CREATE INDEX raw_lane ON {t} (queue_id, state, priority, due_at, id)",
            ],
            claim: "SELECT id, body FROM {t} INDEXED BY raw_lane WHERE queue_id = 1 \
                AND state = 0 ORDER BY priority, due_at, id LIMIT ?",
            lease: "UPDATE {t} SET state = 1, due_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 30000000, token = token + 1 \
                WHERE id IN ({list})",
            hide: "UPDATE {t} SET state = {state}, due_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) + 3600000000 WHERE id IN \
                (SELECT id FROM {t} INDEXED BY raw_lane WHERE queue_id = 1 AND state = 0 \
                ORDER BY priority, due_at, id LIMIT {n})",
        },
    };

    /// sqlmq takes the write lock at the start of each of its transactions here.
    const BEGIN: &'static str = "BEGIN IMMEDIATE";

    const AUTOCOMMIT: bool = false;

    const WRITERS: &'static str = "tasks, 1 writer";

    const NO_STATEMENT_COUNTER: Option<&'static str> = Some(
        "no server counts the statements of a connection (the database is a library in this \
         process)",
    );

    const NO_SEQUENCER: Option<&'static str> =
        Some("no sequencer: records get their offsets in the publishing transaction");

    const NO_SEPARATE_CLIENTS: Option<&'static str> = Some(
        "one writer at a time: clients of their own would take turns on the database's write \
         lock, which measures SQLite's lock, not sqlmq",
    );

    fn quote(name: &str) -> String {
        format!("\"{name}\"")
    }

    async fn create_scratch(settings: &Settings, run_id: &str) -> Result<Scratch<Sqlite>> {
        let (path, url) = scratch_file(&settings.database_url, run_id)?;
        if path.exists() {
            bail!(
                "{} exists already: not a fresh scratch file",
                path.display()
            );
        }
        // sqlmq's own connections: they create the file and put it in WAL mode. No table is
        // created here (no migration): scenarios get tables of their own.
        let admin = sqlmq::Client::builder()
            .max_connections(1)
            .open::<Sqlite>(&url)
            .await
            .with_context(|| format!("cannot create the scratch file {}", path.display()));
        let admin = match admin {
            Ok(admin) => warm_up(&admin).await.map(|()| admin),
            Err(e) => Err(e),
        };
        let admin = match admin {
            Ok(admin) => admin,
            Err(e) => {
                remove_files(&path)?;
                return Err(e);
            }
        };
        Ok(Scratch {
            area: Area::File { path },
            url,
            base_prefix: String::new(),
            admin,
        })
    }

    async fn facts(scratch: &Scratch<Sqlite>) -> Result<ServerFacts> {
        let row = sqlx::query(SETTINGS)
            .fetch_one(scratch.admin.pool())
            .await?;
        let synchronous: i64 = row.try_get(2)?;
        Ok(ServerFacts::Sqlite(SqliteFacts {
            flavor: "SQLite",
            version: row.try_get(0)?,
            journal_mode: row.try_get(1)?,
            synchronous: synchronous_name(synchronous),
            busy_timeout_ms: row.try_get(3)?,
            writers: "one writer connection per client, readers beside it",
            durable: scratch.admin.server().durable(),
            variables: super::not_available::<Sqlite>(
                "the database is a library in this process, not a server",
            ),
        }))
    }

    async fn tables(scratch: &Scratch<Sqlite>) -> Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT name FROM sqlite_schema WHERE type = 'table'")
                .fetch_all(scratch.admin.pool())
                .await?,
        )
    }

    async fn drop_tables(scratch: &Scratch<Sqlite>, names: &[String]) -> Result<()> {
        let mut tx = scratch.admin.begin().await?;
        for t in names {
            let sql = format!("DROP TABLE IF EXISTS {}", Sqlite::quote(t));
            sqlx::query(AssertSqlSafe(sql)).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Close the admin's writer, then remove the file and its companions. Connections still
    /// open elsewhere (reader pools being dropped) hold the unlinked files, not the names:
    /// closing them later recreates nothing.
    /// None: SQLite keeps no undo history beside the WAL.
    async fn history_length(_: &Scratch<Sqlite>) -> Option<u64> {
        None
    }

    async fn remove(scratch: &Scratch<Sqlite>) -> Result<()> {
        scratch.admin.pool().close().await;
        let Area::File { path } = &scratch.area else {
            unreachable!("a SQLite scratch area is a file");
        };
        remove_files(path)
    }

    async fn execute<'a>(
        conn: &'a mut SqliteConnection,
        sql: Arc<str>,
        binds: &'a [&'a [u8]],
    ) -> Result<()> {
        super::execute_on::<Sqlite>(conn, sql, binds).await
    }

    async fn fetch_ids(
        conn: &mut SqliteConnection,
        sql: Arc<str>,
        limit: i64,
    ) -> Result<Vec<[u8; 16]>> {
        super::fetch_ids_on::<Sqlite>(conn, sql, limit).await
    }

    async fn statements(_pool: &SqlitePool) -> Result<HashMap<u64, u64>> {
        bail!(super::not_available::<Sqlite>(
            Sqlite::NO_STATEMENT_COUNTER.unwrap_or_default()
        ))
    }

    async fn counters(
        _pool: &SqlitePool,
        _names: &'static [&'static str],
    ) -> Result<HashMap<u64, Vec<u64>>> {
        bail!(super::not_available::<Sqlite>(
            Sqlite::NO_STATEMENT_COUNTER.unwrap_or_default()
        ))
    }
}

/// The scratch file of run `run_id` beside the database of `url` (`sqlite://dir/app.db` →
/// `dir/sqlmq_bench_<run>.db`), and its URL (the options of `url` kept).
fn scratch_file(url: &str, run_id: &str) -> Result<(PathBuf, String)> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .context("a SQLite database URL starts with sqlite:")?;
    let (file, options) = rest.split_at(rest.find('?').unwrap_or(rest.len()));
    if file.is_empty() || file.contains(":memory:") || options.contains("mode=memory") {
        bail!(
            "the bench needs a SQLite file (sqlite://path/to/file.db), not an in-memory database: \
             its scenarios open several clients on one database"
        );
    }
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    if !dir.as_os_str().is_empty() && !dir.is_dir() {
        bail!(
            "directory {} does not exist: the scratch file goes beside the database file",
            dir.display()
        );
    }
    let path = dir.join(format!("sqlmq_bench_{run_id}.db"));
    let url = format!("sqlite://{}{options}", path.display());
    Ok((path, url))
}

/// Grow the fresh file and its write-ahead log to their working size ([`WARM_PAGES`]).
async fn warm_up(admin: &sqlmq::Client<Sqlite>) -> Result<()> {
    for sql in WARM_UP {
        let sql = sql.replace("{pages}", &WARM_PAGES.to_string());
        let mut tx = admin.begin().await?;
        sqlx::query(AssertSqlSafe(sql)).execute(&mut *tx).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// Remove a database file and its companions; files already gone are fine.
fn remove_files(path: &Path) -> Result<()> {
    let mut paths = vec![path.to_owned()];
    for suffix in COMPANIONS {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        paths.push(p.into());
    }
    for p in paths {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", p.display())),
        }
    }
    Ok(())
}

/// `PRAGMA synchronous` as its name.
fn synchronous_name(value: i64) -> String {
    match value {
        0 => "OFF".to_owned(),
        1 => "NORMAL".to_owned(),
        2 => "FULL".to_owned(),
        3 => "EXTRA".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_file_goes_beside_the_database() {
        let tmp = std::env::temp_dir();
        let url = format!("sqlite://{}/app.db", tmp.display());
        let (path, scratch) = scratch_file(&url, "ab12").unwrap();
        assert_eq!(path, tmp.join("sqlmq_bench_ab12.db"));
        assert_eq!(scratch, format!("sqlite://{}", path.display()));
        let (path, scratch) = scratch_file("sqlite:app.db?mode=rwc", "x").unwrap();
        assert_eq!(path, Path::new("sqlmq_bench_x.db"));
        assert_eq!(scratch, "sqlite://sqlmq_bench_x.db?mode=rwc");
        assert!(scratch_file("sqlite::memory:", "x").is_err());
        assert!(scratch_file("sqlite://no/such/dir/a.db", "x").is_err());
        assert_eq!(synchronous_name(2), "FULL");
    }
}
