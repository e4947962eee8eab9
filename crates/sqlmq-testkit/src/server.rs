//! The test server: its URL, throwaway databases on it (swept after two hours when a killed run
//! left them behind), and admin statements.
//!
//! Least privilege is part of what the suite proves: each throwaway database comes with a user
//! of its own that may only run data statements on it (`SELECT, INSERT, UPDATE, DELETE`, no
//! DDL), and the library, the CLI and the HTTP server under test connect as that user
//! ([`url_for`]). Only creating the schema ([`admin_url_for`], the configured user) and the
//! tests' own DDL run as the server's admin.

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

/// Password of the per-database runtime users (test servers only).
const RUNTIME_PASSWORD: &str = "sqlmq-runtime";

/// The URL of `database` on the test server as its runtime user (data statements only).
pub fn url_for(database: &str) -> String {
    let admin = admin_url_for(database);
    let (scheme, rest) = admin.split_once("://").expect("database URL has a scheme");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{database}:{RUNTIME_PASSWORD}@{host}")
}

/// The URL of `database` on the test server as the configured (admin) user: for migrations and
/// the tests' own DDL.
pub fn admin_url_for(database: &str) -> String {
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
    /// Its URL, as its runtime user (no DDL).
    pub url: String,
    /// Its URL as the admin (migrations, the test's own DDL).
    pub admin_url: String,
}

impl TestDatabase {
    /// Create an empty database (after sweeping those left behind by killed runs).
    pub fn create() -> TestDatabase {
        let name = with_admin(async |pool| create_on(pool).await);
        TestDatabase {
            url: url_for(&name),
            admin_url: admin_url_for(&name),
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
    for sql in [
        format!("CREATE DATABASE `{name}`"),
        format!("CREATE USER '{name}'@'%' IDENTIFIED BY '{RUNTIME_PASSWORD}'"),
        format!("GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON `{name}`.* TO '{name}'@'%'"),
    ] {
        sqlx::query(AssertSqlSafe(sql.clone()))
            .execute(pool)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{sql}: {e} (the test server's user must be able to create databases and \
                     users: see SQLMQ_TEST_DATABASE_URL)"
                )
            });
    }
    name
}

async fn drop_on(pool: &MySqlPool, name: &str) {
    for sql in [
        format!("DROP DATABASE IF EXISTS `{name}`"),
        format!("DROP USER IF EXISTS '{name}'@'%'"),
    ] {
        let _ = sqlx::query(AssertSqlSafe(sql)).execute(pool).await;
    }
}

/// Drop test databases older than [`LEFT_BEHIND_AFTER`] (left by killed runs).
async fn sweep(admin: &MySqlPool, now: u64) {
    let rows = sqlx::query("SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata WHERE schema_name LIKE 'sqlmq\\_t\\_%' \
        UNION SELECT CAST(user AS CHAR) FROM mysql.user WHERE user LIKE 'sqlmq\\_t\\_%'")
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
            drop_on(admin, &name).await;
        }
    }
}
