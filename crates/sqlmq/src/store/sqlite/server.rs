//! The SQLite library we run on, its settings, and the clock.

use sqlx::{Row, Sqlite, SqliteConnection, SqlitePool};

use super::{BEGIN_IMMEDIATE, SqliteStore, now_us};
use crate::domain::{Error, Flavor, Result, ServerInfo};
use crate::store::Server;
use crate::store::rows::{ConnectOptions, Pools};

const SETTINGS: &str = "SELECT sqlite_version(), \
    (SELECT journal_mode FROM pragma_journal_mode), (SELECT synchronous FROM pragma_synchronous)";

/// SQLite 3.35 brought `RETURNING`, which the claim and the settlements use.
const MINIMUM: (u32, u32, u32) = (3, 35, 0);

/// `PRAGMA synchronous` value of FULL.
const SYNCHRONOUS_FULL: i64 = 2;

/// Largest statement sqlmq builds: SQLite's own limit (`SQLITE_MAX_SQL_LENGTH`, 1 GB by
/// default) is far away; this keeps single statements reasonable.
const STATEMENT_BUDGET: usize = 64 * 1024 * 1024;

fn parse_version(version: &str) -> (u32, u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

impl Server for sqlx::Sqlite {
    /// Take the write lock at once (see the module documentation).
    const BEGIN: &'static str = BEGIN_IMMEDIATE;

    const BEGIN_POOLED: &'static str = BEGIN_IMMEDIATE;

    /// A deferred transaction that only reads: in WAL mode its reads all see the database as
    /// of its first read, and it never takes the write lock.
    const BEGIN_SNAPSHOT: &'static str = "BEGIN";

    const ONE_WRITER: bool = true;

    async fn connect(url: &str, options: &ConnectOptions) -> Result<Pools<Sqlite>> {
        super::connect::pools(url, options).await
    }

    fn adopt(_pool: &SqlitePool) {}

    async fn detect(conn: &mut SqliteConnection) -> Result<ServerInfo> {
        let row = sqlx::query(SETTINGS).fetch_one(&mut *conn).await?;
        let version: String = row.try_get(0)?;
        let version_number = parse_version(&version);
        if version_number < MINIMUM {
            return Err(Error::UnsupportedServer(format!(
                "SQLite {version}: sqlmq needs SQLite 3.35 or later"
            )));
        }
        let journal: String = row.try_get(1)?;
        let synchronous: i64 = row.try_get(2)?;
        let memory = journal.eq_ignore_ascii_case("memory");
        let mut warnings = Vec::new();
        if memory {
            warnings.push("in-memory database: nothing survives the process".to_owned());
        } else if synchronous < SYNCHRONOUS_FULL {
            warnings.push(format!(
                "synchronous = {synchronous}: committed messages can be lost in an OS crash \
                 (sqlmq sets FULL on its own connections)"
            ));
        }
        for w in &warnings {
            tracing::warn!(sqlite = %version, "{w}");
        }
        Ok(ServerInfo {
            flavor: Flavor::Sqlite,
            version,
            version_number,
            innodb_flush_log_at_trx_commit: 0,
            sync_binlog: 0,
            log_bin: false,
            binlog_format: String::new(),
            max_allowed_packet: STATEMENT_BUDGET as u64,
            galera: false,
            warnings,
        })
    }

    /// Nothing to verify: SQLite has no row locks, and a write transaction (`BEGIN
    /// IMMEDIATE`) has the database to itself.
    async fn verify_locking(_store: &SqliteStore, _pool: &SqlitePool) -> Result<()> {
        Ok(())
    }

    fn statement_budget(_server: &ServerInfo) -> usize {
        STATEMENT_BUDGET
    }

    async fn now_us(_store: &SqliteStore, conn: &mut SqliteConnection) -> Result<i64> {
        let row = sqlx::query(concat!("SELECT ", now_us!()))
            .fetch_one(&mut *conn)
            .await?;
        Ok(row.try_get(0)?)
    }

    /// Never called: SQLite keeps no undo history ([`Server::UNDO_HISTORY`] is false).
    async fn history_list_length(
        _store: &SqliteStore,
        _conn: &mut SqliteConnection,
        _server: &ServerInfo,
    ) -> Result<Option<u64>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn versions() {
        assert_eq!(parse_version("3.51.3"), (3, 51, 3));
        assert_eq!(parse_version("3.35"), (3, 35, 0));
    }
}
