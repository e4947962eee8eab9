//! The test server: its URL, throwaway databases on it (swept after two hours when a killed run
//! left them behind), and admin statements.

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::mysql::MySqlPoolOptions;
use sqlx::{AssertSqlSafe, MySqlPool, Row};

/// Name prefix of the test databases (the sweep drops old ones by it).
const PREFIX: &str = "sqlmq_t_";
/// Age after which a test database is considered left behind by a killed run.
const LEFT_BEHIND_AFTER: Duration = Duration::from_secs(2 * 3600);

/// The test server's URL.
pub fn server_url() -> String {
    std::env::var("SQLMQ_TEST_DATABASE_URL")
        .or_else(|_| std::env::var("SQLMQ_DATABASE_URL"))
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// The URL of `database` on the test server.
pub fn url_for(database: &str) -> String {
    let base = server_url();
    let (head, _) = base.rsplit_once('/').expect("database URL has a path");
    format!("{head}/{database}")
}

/// Run `work` with a one-connection pool on the test server (as its configured user, root in
/// CI), on a runtime of its own.
fn with_admin<T>(work: impl AsyncFnOnce(&MySqlPool) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async { work(&admin_pool().await).await })
}

/// Run `sql` on the test server; returns the first column of each row as text (binary
/// strings decoded lossily, other types as empty strings). Panics on an SQL error.
pub fn admin(sql: &str) -> Vec<String> {
    with_admin(async |pool| {
        let rows = sqlx::query(AssertSqlSafe(sql.to_owned()))
            .fetch_all(pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .map(|r| {
                r.try_get::<String, _>(0)
                    .or_else(|_| {
                        r.try_get::<Vec<u8>, _>(0)
                            .map(|b| String::from_utf8_lossy(&b).into())
                    })
                    .unwrap_or_default()
            })
            .collect()
    })
}

/// A database of its own for one test, dropped with this guard.
#[derive(Debug)]
pub struct TestDatabase {
    /// Its name (`sqlmq_t_<unix time>_<random>`).
    pub name: String,
    /// Its URL.
    pub url: String,
}

impl TestDatabase {
    /// Create an empty database (after sweeping those left behind by killed runs).
    pub fn create() -> TestDatabase {
        let name = with_admin(async |pool| create_on(pool).await);
        TestDatabase {
            url: url_for(&name),
            name,
        }
    }

    /// `bin` (a binary under test) on this database, with nothing inherited from the
    /// environment that could change its behaviour (config file, table prefix, payload limit,
    /// log filter).
    pub fn command(&self, bin: &str) -> Command {
        let mut cmd = Command::new(bin);
        cmd.env("SQLMQ_DATABASE_URL", &self.url)
            .env_remove("SQLMQ_CONFIG")
            .env_remove("SQLMQ_TABLE_PREFIX")
            .env_remove("SQLMQ_MAX_PAYLOAD_BYTES")
            .env_remove("RUST_LOG");
        cmd
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let name = &self.name;
        with_admin(async |pool| drop_on(pool, name).await);
    }
}

/// A pool of one connection on the test server.
async fn admin_pool() -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&server_url())
        .await
        .expect("test database server reachable (see SQLMQ_TEST_DATABASE_URL)")
}

/// Create an empty database on the test server (after sweeping those left behind by killed
/// runs); returns its name. For async tests (the blocking [`TestDatabase`] is for process
/// tests).
pub async fn create_database() -> String {
    create_on(&admin_pool().await).await
}

/// Drop a database made by [`create_database`].
pub async fn drop_database(name: &str) {
    drop_on(&admin_pool().await, name).await;
}

async fn create_on(pool: &MySqlPool) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    sweep(pool, now).await;
    let name = format!("{PREFIX}{now}_{:08x}", rand::random::<u32>());
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(pool)
        .await
        .unwrap();
    name
}

async fn drop_on(pool: &MySqlPool, name: &str) {
    let _ = sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
        .execute(pool)
        .await;
}

/// Drop test databases older than [`LEFT_BEHIND_AFTER`] (left by killed runs).
async fn sweep(admin: &MySqlPool, now: u64) {
    let rows = sqlx::query("SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata WHERE schema_name LIKE 'sqlmq\\_t\\_%'")
        .fetch_all(admin)
        .await
        .unwrap_or_default();
    for row in rows {
        let name: String = row.get(0);
        let created = name
            .split('_')
            .nth(2)
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(now);
        if now.saturating_sub(created) > LEFT_BEHIND_AFTER.as_secs() {
            let _ = sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                .execute(admin)
                .await;
        }
    }
}
