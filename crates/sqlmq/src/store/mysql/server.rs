//! What server we are talking to, and whether it can run sqlmq safely.

use std::time::Duration;

use sqlx::{Connection, MySql, MySqlConnection, MySqlPool, Row};

use super::{BEGIN_READ_COMMITTED, MySqlStore, micros};
use crate::domain::{Error, Flavor, Result, ServerInfo};
use crate::store::Server;
use crate::store::rows::{ConnectOptions, Pools};

const SERVER_QUERY: &str = "SELECT CAST(VERSION() AS CHAR), \
    CAST(@@innodb_flush_log_at_trx_commit AS SIGNED), CAST(@@sync_binlog AS SIGNED), \
    CAST(@@log_bin AS SIGNED), CAST(@@binlog_format AS CHAR), CAST(@@max_allowed_packet AS SIGNED)";

/// Parse "8.0.36-0ubuntu0.22.04.1" or "10.11.19-MariaDB-0+deb12u1".
fn parse_version(version: &str) -> (u32, u32, u32) {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// Read the server's identity and settings, and refuse servers without `SKIP LOCKED`.
async fn detect(conn: &mut MySqlConnection) -> Result<ServerInfo> {
    let row = sqlx::query(SERVER_QUERY).fetch_one(&mut *conn).await?;
    let version: String = row.try_get(0)?;
    let lower = version.to_ascii_lowercase();
    if lower.contains("tidb") {
        // TiDB parses SKIP LOCKED and silently takes no lock (pingcap/tidb#69720).
        return Err(Error::UnsupportedServer(format!(
            "{version}: TiDB ignores SKIP LOCKED"
        )));
    }
    let flavor = if lower.contains("mariadb") {
        Flavor::MariaDb
    } else {
        Flavor::MySql
    };
    let version_number = parse_version(&version);
    let minimum = if flavor == Flavor::MariaDb {
        (10, 6, 0)
    } else {
        (8, 0, 1)
    };
    if version_number < minimum {
        return Err(Error::UnsupportedServer(format!(
            "{version}: sqlmq needs FOR UPDATE SKIP LOCKED (MySQL 8.0.1+ or MariaDB 10.6+)"
        )));
    }
    let flush: i64 = row.try_get(1)?;
    let sync_binlog: i64 = row.try_get(2)?;
    let log_bin = row.try_get::<i64, _>(3)? != 0;
    let mut warnings = Vec::new();
    if flush != 1 {
        warnings.push(format!(
            "innodb_flush_log_at_trx_commit = {flush}: committed messages can be lost in a crash \
             (set it to 1)"
        ));
    }
    if log_bin && sync_binlog != 1 {
        warnings.push(format!(
            "binary log on with sync_binlog = {sync_binlog}: committed messages can be lost in an \
             OS crash (set sync_binlog = 1)"
        ));
    }
    for w in &warnings {
        tracing::warn!(server = %version, "{w}");
    }
    Ok(ServerInfo {
        flavor,
        version,
        version_number,
        innodb_flush_log_at_trx_commit: flush,
        sync_binlog,
        log_bin,
        binlog_format: row.try_get(4)?,
        max_allowed_packet: row.try_get::<i64, _>(5)?.max(0) as u64,
        galera: super::connect::wsrep_on(conn).await?,
        warnings,
    })
}

/// MariaDB's history list length: a status variable, which every user may read (no `PROCESS`
/// privilege, unlike `information_schema.INNODB_METRICS`), and the same figure as that table's
/// `trx_rseg_history_len`.
const HISTORY_MARIADB: &str = "SELECT CAST(VARIABLE_VALUE AS SIGNED) \
    FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_HISTORY_LIST_LENGTH'";

/// MySQL's: it has no such status variable, so the InnoDB monitor counter, which needs the
/// `PROCESS` privilege (`sqlmq grants --monitoring`). A counter someone disabled
/// (`innodb_monitor_disable`) keeps a stale value: no row then.
const HISTORY_MYSQL: &str = "SELECT CAST(count AS SIGNED) FROM information_schema.INNODB_METRICS \
    WHERE name = 'trx_rseg_history_len' AND status = 'enabled'";

const LOCK_PROBE: &str = "SELECT id FROM {p}probe WHERE id = 1 FOR UPDATE";
const SKIP_PROBE: &str = "SELECT id FROM {p}probe WHERE id = 1 FOR UPDATE SKIP LOCKED";

impl Server for sqlx::MySql {
    /// InnoDB keeps the undo history until purge removes it.
    const UNDO_HISTORY: bool = true;

    /// READ COMMITTED set explicitly for this transaction (never the server default,
    /// REPEATABLE READ, whose gap locks make claims deadlock with producers).
    const BEGIN: &'static str = BEGIN_READ_COMMITTED;

    /// The pool's sessions are READ COMMITTED already (see `connect.rs`).
    const BEGIN_POOLED: &'static str = "START TRANSACTION";

    /// REPEATABLE READ for this one transaction, so that every read sees the snapshot taken
    /// at its start; read only, so it takes no locks and no gap locks can arise.
    const BEGIN_SNAPSHOT: &'static str = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
        START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";

    async fn connect(url: &str, options: &ConnectOptions) -> Result<Pools<MySql>> {
        let pool = super::connect::pool(url, options).await?;
        Ok(Pools {
            write: pool.clone(),
            read: pool,
        })
    }

    fn adopt(pool: &MySqlPool) {
        crate::nodelay::apply(pool.connect_options().get_port());
    }

    /// On a Galera node, text scripts run as one compound statement each (see `script.rs`).
    fn fit(store: &MySqlStore, server: &ServerInfo) {
        store
            .state
            .compound_scripts
            .store(server.galera, std::sync::atomic::Ordering::Relaxed);
    }

    async fn detect(conn: &mut MySqlConnection) -> Result<ServerInfo> {
        detect(conn).await
    }

    /// Two-connection store-test: while `a` holds the probe row's lock, a `SKIP LOCKED` read on
    /// `b` must return nothing at once. Servers that accept the syntax but ignore it (TiDB, Dolt)
    /// or wait would hand one message to two consumers.
    async fn verify_locking(store: &MySqlStore, pool: &MySqlPool) -> Result<()> {
        let mut a = pool.acquire().await?;
        let mut b = pool.acquire().await?;
        // Behind a load balancer in front of a cluster (Galera, Group Replication) the two
        // connections may reach different nodes, where row locks are not shared: the probe
        // would wrongly fail. Such a pair proves nothing either way; the server kinds known to
        // ignore SKIP LOCKED are refused by their version at connect.
        let (node_a, node_b) = (node_of(&mut a).await?, node_of(&mut b).await?);
        if node_a != node_b {
            tracing::info!(
                a = %node_a,
                b = %node_b,
                "the SKIP LOCKED store-test's connections reached different servers of a cluster: \
                 row locks are per server, the test was skipped"
            );
            return Ok(());
        }
        let mut tx = a.begin_with(BEGIN_READ_COMMITTED).await?;
        sqlx::query(store.st.get(LOCK_PROBE))
            .fetch_optional(&mut *tx)
            .await?;
        let probe = tokio::time::timeout(
            Duration::from_secs(5),
            sqlx::query(store.st.get(SKIP_PROBE)).fetch_optional(&mut *b),
        )
        .await;
        tx.rollback().await?;
        match probe {
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(_))) => Err(Error::UnsupportedServer(
                "SKIP LOCKED returned a row locked by another transaction".into(),
            )),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(Error::UnsupportedServer(
                "SKIP LOCKED waited for a lock".into(),
            )),
        }
    }

    /// Stay well under `max_allowed_packet`, and keep single statements small enough not to
    /// monopolise the server.
    fn statement_budget(server: &ServerInfo) -> usize {
        (server.max_allowed_packet.saturating_sub(64 * 1024) as usize)
            .clamp(64 * 1024, 4 * 1024 * 1024)
    }

    async fn now_us(_store: &MySqlStore, conn: &mut MySqlConnection) -> Result<i64> {
        let row = sqlx::query(concat!("SELECT ", micros!("UTC_TIMESTAMP(6)")))
            .fetch_one(&mut *conn)
            .await?;
        Ok(row.try_get(0)?)
    }

    async fn history_list_length(
        _store: &MySqlStore,
        conn: &mut MySqlConnection,
        server: &ServerInfo,
    ) -> Result<Option<u64>> {
        let sql = if server.flavor == Flavor::MariaDb {
            HISTORY_MARIADB
        } else {
            HISTORY_MYSQL
        };
        let length: Option<Option<i64>> =
            sqlx::query_scalar(sql).fetch_optional(&mut *conn).await?;
        Ok(length.flatten().map(|n| n.max(0) as u64))
    }
}

/// Which server a connection reached: its host name and port as the server sees them.
async fn node_of(conn: &mut MySqlConnection) -> Result<String> {
    let row = sqlx::query("SELECT CAST(@@hostname AS CHAR), CAST(@@port AS SIGNED)")
        .fetch_one(&mut *conn)
        .await?;
    let host: Option<String> = row.try_get(0)?;
    let port: i64 = row.try_get(1)?;
    Ok(format!("{}:{port}", host.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions() {
        assert_eq!(parse_version("10.11.19-MariaDB-0+deb12u1"), (10, 11, 19));
        assert_eq!(parse_version("8.0.36-0ubuntu0.22.04.1"), (8, 0, 36));
        assert_eq!(parse_version("8.4.2"), (8, 4, 2));
        assert_eq!(parse_version("garbage"), (0, 0, 0));
    }
}
