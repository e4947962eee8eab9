//! The conformance suite on SQLite: each test database is a file of its own in a directory
//! under the system's temporary directory, removed with its WAL and shared-memory files.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Sqlite, SqliteConnection};

use super::{TestBackend, Value};

/// Name prefix of the test databases.
const PREFIX: &str = "sqlmq_t_";
/// Age after which a test database file is considered left behind by a killed run.
const LEFT_BEHIND_AFTER: Duration = Duration::from_secs(2 * 3600);

/// The directory of the test databases (`SQLMQ_TEST_SQLITE_DIR`, else `sqlmq-tests` under the
/// system's temporary directory).
fn dir() -> PathBuf {
    std::env::var_os("SQLMQ_TEST_SQLITE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("sqlmq-tests"))
}

fn path_of(name: &str) -> PathBuf {
    dir().join(format!("{name}.db"))
}

/// Remove a database file and its companions.
fn remove(name: &str) {
    let db = path_of(name);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = db.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// Remove test databases older than [`LEFT_BEHIND_AFTER`].
fn sweep(now: u64) {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_suffix(".db") else {
            continue;
        };
        let created = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|t| t.parse::<u64>().ok());
        if created.is_some_and(|t| now.saturating_sub(t) > LEFT_BEHIND_AFTER.as_secs()) {
            remove(name);
        }
    }
}

impl TestBackend for Sqlite {
    const TABLES: &'static str = "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";

    const COLUMNS: &'static str = "SELECT name FROM pragma_table_info(?) ORDER BY cid";

    async fn reach(conn: &mut SqliteConnection, other: &str) -> String {
        let path = path_of(other).display().to_string();
        Self::execute(conn, "ATTACH DATABASE ? AS other", &[Value::from(path)]).await;
        "other".to_owned()
    }

    async fn create_database() -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        std::fs::create_dir_all(dir()).expect("test database directory");
        sweep(now);
        let name = format!("{PREFIX}{now}_{:08x}", rand::random::<u32>());
        // Create the (empty) file, so that plain connections to it work before sqlmq's.
        let conn = SqliteConnectOptions::new()
            .filename(path_of(&name))
            .create_if_missing(true)
            .connect()
            .await
            .expect("create the test database file");
        conn.close().await.unwrap();
        name
    }

    async fn drop_database(name: &str) {
        remove(name);
    }

    fn url_of(name: &str) -> String {
        format!("sqlite://{}", path_of(name).display())
    }

    /// The same file: SQLite has no users.
    fn admin_url_of(name: &str) -> String {
        Self::url_of(name)
    }

    async fn execute(conn: &mut SqliteConnection, sql: &str, args: &[Value]) -> u64 {
        super::execute_on::<Self>(conn, sql, args)
            .await
            .rows_affected()
    }

    async fn query(conn: &mut SqliteConnection, sql: &str, args: &[Value]) -> Vec<Vec<Value>> {
        super::query_on::<Self>(conn, sql, args).await
    }

    async fn expire_process(conn: &mut SqliteConnection, table: &str, id: &str) {
        let sql = format!(
            "UPDATE {table} SET expires_at = CAST(unixepoch('subsec') * 1000000 AS INTEGER) \
             - 1000000 WHERE id = ?"
        );
        Self::execute(conn, &sql, &[Value::Bytes(id.as_bytes().to_vec())]).await;
    }
}
