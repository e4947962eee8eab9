//! Opening a SQLite database: one writer connection and its readers.
//!
//! - `sqlite://path/to/file.db` (relative to the working directory; `sqlite:///abs/file.db`
//!   for an absolute path): the file is created when missing, put in WAL mode (readers never
//!   block the writer nor each other; the setting is stored in the file), with
//!   `synchronous = FULL` (a commit is on disk when it returns, as MySQL with
//!   `innodb_flush_log_at_trx_commit = 1`) and a busy timeout.
//! - `sqlite::memory:`: a private in-memory database for tests of the application's own
//!   handlers. It lives as long as its one connection, which serves writes and reads alike
//!   (several connections to one in-memory database would share its cache, where a reader
//!   meets a writer's table lock with an immediate error instead of a wait).
//!
//! Several processes may open the same file: each has one writer connection, and SQLite's
//! file lock, waited on up to the busy timeout, orders the writers of different processes. A
//! lock wait that outlasts the busy timeout surfaces as `SQLITE_BUSY`, which the engine
//! retries like a deadlock (`errors.rs`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Connection, Sqlite};

use crate::domain::{Error, Result};
use crate::store::rows::{ConnectOptions, Pools};

/// Prepared statements cached per connection.
const STATEMENT_CACHE_CAPACITY: usize = 512;

/// The shortest busy timeout: a writer of another process may hold the lock for a whole
/// transaction, and a batch of thousands of messages takes a while on a slow disk.
const MIN_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Parse a `sqlite:` URL into connection options with sqlmq's settings.
fn options(url: &str, options: &ConnectOptions) -> Result<SqliteConnectOptions> {
    if !url.starts_with("sqlite:") {
        return Err(Error::InvalidArgument(
            "the database URL must start with sqlite: (sqlite://path/to/file.db or \
             sqlite::memory:)"
                .into(),
        ));
    }
    let parsed = SqliteConnectOptions::from_str(url)
        .map_err(|e| Error::InvalidArgument(format!("invalid database URL: {e}")))?;
    Ok(parsed
        .create_if_missing(true)
        .busy_timeout(busy_timeout(options))
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(false)
        .statement_cache_capacity(STATEMENT_CACHE_CAPACITY))
}

/// How long a statement waits for another connection's write lock.
fn busy_timeout(options: &ConnectOptions) -> Duration {
    options.lock_wait_timeout.max(MIN_BUSY_TIMEOUT)
}

/// Whether `url` names an in-memory database.
pub(super) fn in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

/// Open the writer and the readers of `url`.
pub(super) async fn pools(url: &str, settings: &ConnectOptions) -> Result<Pools<Sqlite>> {
    let connect = options(url, settings)?;
    if in_memory(url) {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(settings.connect_timeout)
            .connect_with(connect)
            .await?;
        return Ok(Pools {
            write: pool.clone(),
            read: pool,
        });
    }
    // WAL is switched on once, by a direct connection: the switch needs the file to itself,
    // which SQLite does not wait for with the busy timeout, so it is retried here for a while
    // when other processes are opening the file at the same moment.
    set_wal(&connect, settings.connect_timeout).await?;
    let connect = connect.journal_mode(SqliteJournalMode::Wal);
    let write = SqlitePoolOptions::new()
        .max_connections(1)
        // Waiting for the writer is waiting for the database's write lock: allow as long as
        // the busy timeout would.
        .acquire_timeout(settings.connect_timeout.max(busy_timeout(settings)))
        .connect_with(connect.clone())
        .await?;
    let read = SqlitePoolOptions::new()
        .max_connections(settings.max_connections.max(1))
        .acquire_timeout(settings.connect_timeout)
        .connect_with(connect)
        .await?;
    Ok(Pools { write, read })
}

/// Put the file in WAL mode, retrying while another process holds it.
async fn set_wal(connect: &SqliteConnectOptions, within: Duration) -> Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let attempt = async {
            let mut conn = connect.connect().await?;
            let mode: String = sqlx::query_scalar("PRAGMA journal_mode = WAL")
                .fetch_one(&mut conn)
                .await?;
            conn.close().await?;
            Ok::<_, sqlx::Error>(mode)
        };
        match attempt.await {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(Error::UnsupportedServer(format!(
                    "SQLite refused WAL mode (journal_mode is {mode}): is the file on a network \
                     file system?"
                )));
            }
            Err(e) => {
                let err = Error::from(e);
                if !err.is_retryable() || tokio::time::Instant::now() >= deadline {
                    return Err(err);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let o = ConnectOptions {
            max_connections: 4,
            connect_timeout: Duration::from_secs(1),
            lock_wait_timeout: Duration::from_secs(1),
        };
        assert!(options("mysql://x", &o).is_err());
        assert!(options("sqlite://sqlmq.db", &o).is_ok());
        assert!(options("sqlite::memory:", &o).is_ok());
        assert!(in_memory("sqlite::memory:"));
        assert!(!in_memory("sqlite://a.db"));
        assert_eq!(busy_timeout(&o), MIN_BUSY_TIMEOUT);
    }
}
