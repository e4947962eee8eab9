//! The bench on MySQL/MariaDB: a scratch database (`sqlmq_bench_<run>`) created for the run
//! and dropped at the end, or, where `CREATE DATABASE` is not permitted, a scratch table prefix
//! (`sqlmq_bench_<run>_`) in the configured database; raw baselines as autocommit statements
//! on InnoDB; the server's durability settings; per-session `Questions` counters.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySql, MySqlConnection, MySqlPool, Row};

use super::{Db, LayoutSql, RawSql};
use crate::machine::{MySqlFacts, ServerFacts};
use crate::scratch::{Area, Scratch};
use sqlmq_cli_common::settings::{Patience, Settings};

/// Settings reported beside the durability ones (missing ones are left out: they differ
/// between MySQL and MariaDB).
const REPORTED_VARIABLES: &str = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
    ('innodb_buffer_pool_size', 'innodb_flush_method', 'innodb_log_file_size', \
    'innodb_doublewrite', 'innodb_flush_neighbors', 'max_connections', 'max_prepared_stmt_count', \
    'performance_schema', 'transaction_isolation', 'tx_isolation', 'version_comment')";

/// `RawSql::clustered`, which `RawSql::loose` is but for its id's index.
const CLUSTERED: LayoutSql = LayoutSql {
    create: &[
        "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
        priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, \
        created_at DATETIME(6) NOT NULL, state TINYINT NOT NULL DEFAULT 0, \
        due_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00', \
        token BIGINT NOT NULL DEFAULT 0, \
        PRIMARY KEY (queue_id, state, priority, due_at, id), UNIQUE KEY id (id)) \
        ENGINE=InnoDB",
    ],
    claim: "SELECT id, body FROM {t} FORCE INDEX (PRIMARY) WHERE queue_id = 1 \
        AND state = 0 ORDER BY priority, due_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
    lease: "UPDATE ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (id) ON t.id = v.id \
        SET t.state = 1, t.due_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, \
        t.token = t.token + 1",
    hide: "UPDATE {t} FORCE INDEX (PRIMARY) SET state = {state}, \
        due_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR \
        WHERE queue_id = 1 AND state = 0 ORDER BY priority, due_at, id LIMIT {n}",
};

impl Db for MySql {
    /// A table shaped like sqlmq's message table: `BINARY(16)` id primary key, `INT` queue id,
    /// `SMALLINT` priority, `MEDIUMBLOB` body, `DATETIME(6)` creation time.
    const RAW: RawSql = RawSql {
        create: "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
            priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, created_at DATETIME(6) NOT NULL, \
            PRIMARY KEY (id)) ENGINE=InnoDB",
        insert: "INSERT INTO {t} (id, queue_id, priority, body, created_at) VALUES (?, 1, 0, ?, UTC_TIMESTAMP(6))",
        row: "(?, 1, 0, ?, UTC_TIMESTAMP(6))",
        delete: "DELETE FROM {t} WHERE id = ?",
        claim: "SELECT id, body FROM {t} ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
        // Not `DELETE … WHERE id IN (…)`: on a small table InnoDB's optimizer scans it whole
        // for that, locking (and waiting for) every row it passes, and consumers deadlock.
        delete_list: "DELETE t FROM ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (PRIMARY) \
            ON t.id = v.id",
        list_item: "SELECT CAST(? AS BINARY) AS id",
        list_separator: " UNION ALL ",
        lease_create: "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
            priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, created_at DATETIME(6) NOT NULL, \
            visible_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00', \
            token BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (id)) ENGINE=InnoDB",
        lease_claim: "SELECT id, body FROM {t} WHERE visible_at <= UTC_TIMESTAMP(6) \
            ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED",
        lease_update: "UPDATE ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (PRIMARY) \
            ON t.id = v.id SET t.visible_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, \
            t.token = t.token + 1",
        keyed_create: "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
            priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, created_at DATETIME(6) NOT NULL, \
            PRIMARY KEY (queue_id, priority, id), UNIQUE KEY id (id)) ENGINE=InnoDB",
        keyed_claim: "SELECT id, body FROM {t} FORCE INDEX (PRIMARY) WHERE queue_id = 1 \
            ORDER BY priority, id LIMIT ? FOR UPDATE SKIP LOCKED",
        keyed_delete_list: "DELETE t FROM ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (id) \
            ON t.id = v.id",
        keyed_lease_create: "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
            priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, created_at DATETIME(6) NOT NULL, \
            visible_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00', \
            token BIGINT NOT NULL DEFAULT 0, \
            PRIMARY KEY (queue_id, priority, id), UNIQUE KEY id (id)) ENGINE=InnoDB",
        keyed_lease_claim: "SELECT id, body FROM {t} FORCE INDEX (PRIMARY) WHERE queue_id = 1 \
            AND visible_at <= UTC_TIMESTAMP(6) ORDER BY priority, id LIMIT ? FOR UPDATE SKIP LOCKED",
        keyed_lease_update: "UPDATE ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (id) \
            ON t.id = v.id SET t.visible_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, \
            t.token = t.token + 1",
        inflight_index: "CREATE INDEX inflight ON {t} (queue_id, visible_at)",
        inflight_hide: "UPDATE {t} FORCE INDEX (PRIMARY) \
            SET visible_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR \
            WHERE queue_id = 1 AND visible_at <= UTC_TIMESTAMP(6) ORDER BY priority, id LIMIT {n}",
        stated: LayoutSql {
            create: &[
                "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
                priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, \
                created_at DATETIME(6) NOT NULL, state TINYINT NOT NULL DEFAULT 0, \
                due_at DATETIME(6) NULL, token BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (id), \
                KEY claim (queue_id, state, priority, id), KEY timed (queue_id, state, due_at)) \
                ENGINE=InnoDB",
            ],
            claim: "SELECT id, body FROM {t} FORCE INDEX (claim) WHERE queue_id = 1 \
                AND state = 0 ORDER BY priority, id LIMIT ? FOR UPDATE SKIP LOCKED",
            lease: "UPDATE ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (PRIMARY) ON t.id = v.id \
                SET t.state = 1, t.due_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, \
                t.token = t.token + 1",
            hide: "UPDATE {t} FORCE INDEX (claim) SET state = {state}, \
                due_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR \
                WHERE queue_id = 1 AND state = 0 ORDER BY priority, id LIMIT {n}",
        },
        clustered: CLUSTERED,
        loose: LayoutSql {
            create: &[
                "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
                priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, \
                created_at DATETIME(6) NOT NULL, state TINYINT NOT NULL DEFAULT 0, \
                due_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00', \
                token BIGINT NOT NULL DEFAULT 0, \
                PRIMARY KEY (queue_id, state, priority, due_at, id), KEY id (id)) \
                ENGINE=InnoDB",
            ],
            ..CLUSTERED
        },
        single: LayoutSql {
            create: &[
                "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
                priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, \
                created_at DATETIME(6) NOT NULL, state TINYINT NOT NULL DEFAULT 0, \
                due_at DATETIME(6) NULL, token BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (id), \
                KEY lane (queue_id, state, priority, due_at, id)) ENGINE=InnoDB",
            ],
            claim: "SELECT id, body FROM {t} FORCE INDEX (lane) WHERE queue_id = 1 \
                AND state = 0 ORDER BY priority, due_at, id LIMIT ? FOR UPDATE SKIP LOCKED",
            lease: "UPDATE ({list}) v STRAIGHT_JOIN {t} t FORCE INDEX (PRIMARY) ON t.id = v.id \
                SET t.state = 1, t.due_at = UTC_TIMESTAMP(6) + INTERVAL 30 SECOND, \
                t.token = t.token + 1",
            hide: "UPDATE {t} FORCE INDEX (lane) SET state = {state}, \
                due_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR \
                WHERE queue_id = 1 AND state = 0 ORDER BY priority, due_at, id LIMIT {n}",
        },
    };

    const BEGIN: &'static str = "BEGIN";

    /// InnoDB commits (and flushes) each autocommit statement: the cheapest durable write.
    const AUTOCOMMIT: bool = true;

    const WRITERS: &'static str = "conns";

    const NO_STATEMENT_COUNTER: Option<&'static str> = None;

    const NO_SEQUENCER: Option<&'static str> = None;

    const NO_SEPARATE_CLIENTS: Option<&'static str> = None;

    fn quote(name: &str) -> String {
        format!("`{name}`")
    }

    async fn create_scratch(settings: &Settings, run_id: &str) -> Result<Scratch<MySql>> {
        let name = format!("sqlmq_bench_{run_id}");
        // A client on the configured database: its pool administers the scratch area, and it
        // reads the server's facts. Its table prefix is the run's, so it reads no user table.
        let admin = settings
            .connect_with::<MySql>(
                sqlmq::Client::builder()
                    .table_prefix(format!("{name}_"))
                    .max_connections(2),
                Patience::Bounded,
            )
            .await?;
        let create = sqlx::query(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(admin.pool())
            .await;
        match create {
            Ok(_) => Ok(Scratch {
                url: with_database(&settings.database_url, &name)?,
                area: Area::Database { name },
                base_prefix: String::new(),
                admin,
            }),
            Err(e) => {
                let database: Option<String> =
                    sqlx::query_scalar("SELECT CAST(DATABASE() AS CHAR)")
                        .fetch_one(admin.pool())
                        .await?;
                let Some(database) = database else {
                    bail!("cannot create a scratch database ({e}) and the URL names no database");
                };
                let prefix = format!("{name}_");
                eprintln!(
                    "bench: cannot create a scratch database ({e}); using tables prefixed \
                     {prefix} in database {database} instead"
                );
                Ok(Scratch {
                    url: settings.database_url.clone(),
                    area: Area::TablePrefix {
                        prefix: prefix.clone(),
                        database,
                    },
                    base_prefix: prefix,
                    admin,
                })
            }
        }
    }

    /// The library's reading (`Client::history_list_length`), as the bench's admin: MariaDB
    /// tells every user, MySQL only one with PROCESS.
    async fn history_length(scratch: &Scratch<MySql>) -> Option<u64> {
        scratch.admin.history_list_length().await.ok()??.length()
    }

    /// The facts the sqlmq client read at connect time, plus a few settings.
    async fn facts(scratch: &Scratch<MySql>) -> Result<ServerFacts> {
        let s = scratch.admin.server();
        let variables = sqlx::query(REPORTED_VARIABLES)
            .fetch_all(scratch.admin.pool())
            .await?
            .iter()
            .filter_map(|r| Some((text(r, 0)?, text(r, 1)?)))
            .collect();
        Ok(ServerFacts::MySql(MySqlFacts {
            flavor: format!("{:?}", s.flavor)
                .replace("MariaDb", "MariaDB")
                .replace("MySql", "MySQL"),
            version: s.version.clone(),
            innodb_flush_log_at_trx_commit: s.innodb_flush_log_at_trx_commit,
            sync_binlog: s.sync_binlog,
            log_bin: s.log_bin,
            binlog_format: s.binlog_format.clone(),
            durable: s.durable(),
            variables,
        }))
    }

    async fn tables(scratch: &Scratch<MySql>) -> Result<Vec<String>> {
        Ok(sqlx::query(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = ?",
        )
        .bind(schema(&scratch.area))
        .fetch_all(scratch.admin.pool())
        .await?
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect())
    }

    async fn drop_tables(scratch: &Scratch<MySql>, names: &[String]) -> Result<()> {
        let schema = schema(&scratch.area);
        let list: Vec<String> = names.iter().map(|t| format!("`{schema}`.`{t}`")).collect();
        let sql = format!("DROP TABLE IF EXISTS {}", list.join(", "));
        sqlx::query(AssertSqlSafe(sql))
            .execute(scratch.admin.pool())
            .await?;
        Ok(())
    }

    async fn remove(scratch: &Scratch<MySql>) -> Result<()> {
        if let Area::Database { name } = &scratch.area {
            sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                .execute(scratch.admin.pool())
                .await?;
        }
        Ok(())
    }

    async fn execute<'a>(
        conn: &'a mut MySqlConnection,
        sql: Arc<str>,
        binds: &'a [&'a [u8]],
    ) -> Result<()> {
        super::execute_on::<MySql>(conn, sql, binds).await
    }

    async fn fetch_ids(
        conn: &mut MySqlConnection,
        sql: Arc<str>,
        limit: i64,
    ) -> Result<Vec<[u8; 16]>> {
        super::fetch_ids_on::<MySql>(conn, sql, limit).await
    }

    /// `Questions` of every open connection, read with `SHOW SESSION STATUS` (exact even when
    /// other clients use the server, unlike the global counter), keyed by `CONNECTION_ID()`.
    /// `Questions` counts statements sent by clients, prepared-statement executions included;
    /// not pings (sqlx pings a connection before reusing it) nor prepares.
    async fn statements(pool: &MySqlPool) -> Result<HashMap<u64, u64>> {
        let counters = Self::counters(pool, &["Questions"]).await?;
        Ok(counters.into_iter().map(|(id, v)| (id, v[0])).collect())
    }

    async fn counters(
        pool: &MySqlPool,
        names: &'static [&'static str],
    ) -> Result<HashMap<u64, Vec<u64>>> {
        let mut held = Vec::new();
        for _ in 0..pool.size() {
            held.push(tokio::time::timeout(Duration::from_secs(10), pool.acquire()).await??);
        }
        let list: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        let show = format!(
            "SHOW SESSION STATUS WHERE Variable_name IN ({})",
            list.join(",")
        );
        let mut out = HashMap::new();
        for conn in &mut held {
            let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
                .fetch_one(&mut **conn)
                .await?;
            let rows = sqlx::query(AssertSqlSafe(show.clone()))
                .fetch_all(&mut **conn)
                .await?;
            let mut values = vec![0; names.len()];
            for row in &rows {
                let name = text(row, 0).unwrap_or_default();
                if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(&name)) {
                    values[i] = text(row, 1)
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                }
            }
            out.insert(id, values);
        }
        Ok(out)
    }
}

/// The schema holding the bench's tables.
fn schema(area: &Area) -> &str {
    match area {
        Area::Database { name } => name,
        Area::TablePrefix { database, .. } => database,
        Area::File { .. } => unreachable!("a MySQL scratch area is a database or a table prefix"),
    }
}

/// A text column that may come back as bytes (SHOW results are binary on some servers).
fn text(row: &MySqlRow, idx: usize) -> Option<String> {
    row.try_get::<String, _>(idx).ok().or_else(|| {
        Some(String::from_utf8_lossy(&row.try_get::<Vec<u8>, _>(idx).ok()?).into_owned())
    })
}

/// `url` with its database replaced by `database`
/// (`mysql://u:p@h:3306/app?ssl-mode=disabled` → `mysql://u:p@h:3306/DATABASE?ssl-mode=disabled`).
fn with_database(url: &str, database: &str) -> Result<String> {
    let Some(scheme_end) = url.find("://") else {
        bail!("the database URL has no scheme");
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    let query_at = rest.find('?').unwrap_or(rest.len());
    let path_at = rest[..query_at].find('/').unwrap_or(query_at);
    Ok(format!(
        "{}{}/{database}{}",
        &url[..rest_start],
        &rest[..path_at],
        &rest[query_at..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_database() {
        let cases = [
            (
                "mysql://root@127.0.0.1:3306/test",
                "mysql://root@127.0.0.1:3306/x",
            ),
            (
                "mysql://u:p@h/app?ssl-mode=disabled",
                "mysql://u:p@h/x?ssl-mode=disabled",
            ),
            ("mysql://h:3306", "mysql://h:3306/x"),
            ("mysql://h?a=b", "mysql://h/x?a=b"),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x").unwrap(), want, "{url}");
        }
        assert!(with_database("nonsense", "x").is_err());
    }
}
