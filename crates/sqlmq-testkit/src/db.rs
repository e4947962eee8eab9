//! A throwaway database for one async test of the library, on any backend.

use std::time::Duration;

use sqlmq::{Client, Queue, QueueConfig};
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool};

use crate::backend::{TestBackend, Value};

/// A database of its own for one test: a migrated [`Client`] on it, plain SQL, and its
/// removal ([`TestDb::drop`]; databases of failed tests are swept after two hours).
///
/// Clients and pools connect as the database's runtime user (no DDL, see
/// [`TestBackend::url_of`]); the schema is migrated and the test's own SQL ([`TestDb::exec`],
/// [`TestDb::query`]) runs as the admin.
pub struct TestDb<B: TestBackend> {
    /// Its name.
    pub name: String,
    /// Its URL, as the runtime user.
    pub url: String,
    /// Its URL as the admin.
    pub admin_url: String,
    _backend: std::marker::PhantomData<B>,
}

impl<B: TestBackend> TestDb<B> {
    /// A fresh, empty database.
    pub async fn new() -> TestDb<B> {
        let name = B::create_database().await;
        TestDb {
            url: B::url_of(&name),
            admin_url: B::admin_url_of(&name),
            name,
            _backend: std::marker::PhantomData,
        }
    }

    /// An existing database at `url` (not dropped by this crate).
    pub fn at(url: &str) -> TestDb<B> {
        TestDb {
            name: url.rsplit('/').next().unwrap_or_default().to_owned(),
            url: url.to_owned(),
            admin_url: url.to_owned(),
            _backend: std::marker::PhantomData,
        }
    }

    /// A client on this database as the runtime user, after migrating it as the admin
    /// (housekeeping every 20 ms, so that delays and expiries are noticed quickly).
    pub async fn client(&self) -> Client<B> {
        self.migrate().await;
        let client = Client::builder()
            .housekeeping_interval(Duration::from_millis(20))
            .open::<B>(&self.url)
            .await
            .expect("connect");
        client
            .migrate()
            .await
            .expect("migrate (up to date: no DDL)");
        client
    }

    /// Create or upgrade the schema as the admin.
    pub async fn migrate(&self) {
        let admin = Client::<B>::open(&self.admin_url).await.expect("connect");
        admin.migrate().await.expect("migrate");
        admin.pool().close().await;
    }

    /// A pool on this database for the test's own SQL.
    pub async fn pool(&self) -> Pool<B> {
        PoolOptions::<B>::new()
            .max_connections(8)
            .connect(&self.url)
            .await
            .unwrap()
    }

    /// Run `sql` (placeholders `?`) with `args` on a connection of its own; rows affected.
    pub async fn exec(&self, sql: &str, args: &[Value]) -> u64 {
        let mut conn = B::Connection::connect(&self.admin_url).await.unwrap();
        B::execute(&mut conn, sql, args).await
    }

    /// Run a query on a connection of its own.
    pub async fn query(&self, sql: &str, args: &[Value]) -> Vec<Vec<Value>> {
        let mut conn = B::Connection::connect(&self.admin_url).await.unwrap();
        B::query(&mut conn, sql, args).await
    }

    /// The first column of the first row of `sql`, as an integer (`COUNT(*)`, …).
    pub async fn scalar(&self, sql: &str) -> i64 {
        self.query(sql, &[]).await[0][0].int()
    }

    /// The names of the database's tables.
    pub async fn tables(&self) -> Vec<String> {
        let rows = self.query(B::TABLES, &[]).await;
        rows.iter().map(|r| r[0].text()).collect()
    }

    /// The column names of `table`, in order.
    pub async fn columns(&self, table: &str) -> Vec<String> {
        let rows = self.query(B::COLUMNS, &[Value::from(table)]).await;
        rows.iter().map(|r| r[0].text()).collect()
    }

    /// Copy every row of `table` from `source` (a database with the same table, possibly
    /// with more columns) into this database; rows copied.
    pub async fn copy_from(&self, source: &TestDb<B>, table: &str) -> u64 {
        let columns = self.columns(table).await.join(", ");
        let mut conn = B::Connection::connect(&self.admin_url).await.unwrap();
        let other = B::reach(&mut conn, &source.name).await;
        let sql = format!("INSERT INTO {table} ({columns}) SELECT {columns} FROM {other}.{table}");
        B::execute(&mut conn, &sql, &[]).await
    }

    /// Whether `table` holds the same rows here as in `source`, in this database's columns
    /// (NULLs compare equal): the rows of both, without duplicates, are as many as the rows of
    /// each.
    pub async fn same_rows(&self, source: &TestDb<B>, table: &str) -> bool {
        let columns = self.columns(table).await.join(", ");
        let mut conn = B::Connection::connect(&self.admin_url).await.unwrap();
        let other = B::reach(&mut conn, &source.name).await;
        let count = |sql: String| format!("SELECT COUNT(*) FROM ({sql}) u");
        let here = format!("SELECT {columns} FROM {table}");
        let there = format!("SELECT {columns} FROM {other}.{table}");
        let mut n = Vec::new();
        for sql in [
            count(here.clone()),
            count(there.clone()),
            count(format!("{here} UNION {there}")),
        ] {
            n.push(B::query(&mut conn, &sql, &[]).await[0][0].int());
        }
        n[0] == n[1] && n[1] == n[2]
    }

    /// The schema versions recorded (with the default prefix), in order.
    pub async fn schema_versions(&self) -> Vec<i64> {
        let sql = "SELECT version FROM sqlmq_schema_migrations ORDER BY version";
        let rows = self.query(sql, &[]).await;
        rows.iter().map(|r| r[0].int()).collect()
    }

    /// Rows of a sqlmq table (with the default prefix).
    pub async fn count(&self, table: &str) -> i64 {
        self.scalar(&format!("SELECT COUNT(*) FROM sqlmq_{table}"))
            .await
    }

    /// Drop the database.
    pub async fn drop(self) {
        B::drop_database(&self.name).await;
    }
}

/// A client on a fresh database and a queue `q` on it.
pub async fn queue<B: TestBackend>(config: QueueConfig) -> (TestDb<B>, Client<B>, Queue<B>) {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let queue = client.create_queue("q", config).await.unwrap();
    (db, client, queue)
}
