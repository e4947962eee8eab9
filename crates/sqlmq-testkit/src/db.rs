//! A throwaway database for one async test of the library, on any backend.

use std::time::Duration;

use sqlmq::{Client, Queue, QueueConfig};
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool};

use crate::backend::{TestBackend, Value};

/// A database of its own for one test: a migrated [`Client`] on it, plain SQL, and its
/// removal ([`TestDb::drop`]; databases of failed tests are swept after two hours).
pub struct TestDb<B: TestBackend> {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    _backend: std::marker::PhantomData<B>,
}

impl<B: TestBackend> TestDb<B> {
    /// A fresh, empty database.
    pub async fn new() -> TestDb<B> {
        let name = B::create_database().await;
        TestDb {
            url: B::url_of(&name),
            name,
            _backend: std::marker::PhantomData,
        }
    }

    /// An existing database at `url` (not dropped by this crate).
    pub fn at(url: &str) -> TestDb<B> {
        TestDb {
            name: url.rsplit('/').next().unwrap_or_default().to_owned(),
            url: url.to_owned(),
            _backend: std::marker::PhantomData,
        }
    }

    /// A migrated client on this database (housekeeping every 20 ms, so that delays and
    /// expiries are noticed quickly).
    pub async fn client(&self) -> Client<B> {
        let client = Client::builder()
            .housekeeping_interval(Duration::from_millis(20))
            .open::<B>(&self.url)
            .await
            .expect("connect");
        client.migrate().await.expect("migrate");
        client
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
        let mut conn = B::Connection::connect(&self.url).await.unwrap();
        B::execute(&mut conn, sql, args).await
    }

    /// Run a query on a connection of its own.
    pub async fn query(&self, sql: &str, args: &[Value]) -> Vec<Vec<Value>> {
        let mut conn = B::Connection::connect(&self.url).await.unwrap();
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
