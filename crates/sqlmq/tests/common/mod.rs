//! Shared test harness: every test gets its own database on the server at
//! `SQLMQ_TEST_DATABASE_URL` (default: `SQLMQ_DATABASE_URL`, else
//! `mysql://root@127.0.0.1:3306/test`), created here and dropped by `TestDb::drop`.
//! Databases left behind by failed tests are swept after two hours.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlmq::{Client, Queue, QueueConfig};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{AssertSqlSafe, MySqlPool, Row};

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

pub struct TestDb {
    pub name: String,
    pub url: String,
    admin: MySqlPool,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let admin = MySqlPoolOptions::new()
            .max_connections(2)
            .connect(&server_url())
            .await
            .expect("test database server reachable (see SQLMQ_TEST_DATABASE_URL)");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        sweep(&admin, now).await;
        let name = format!("sqlmq_t_{now}_{:08x}", rand::random::<u32>());
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&admin)
            .await
            .unwrap();
        TestDb {
            url: url_for(&name),
            name,
            admin,
        }
    }

    /// A migrated client on this database.
    pub async fn client(&self) -> Client {
        let client = Client::builder()
            .housekeeping_interval(Duration::from_millis(20))
            .connect(&self.url)
            .await
            .expect("connect");
        client.migrate().await.expect("migrate");
        client
    }

    /// A pool on this database for direct SQL.
    pub async fn pool(&self) -> MySqlPool {
        MySqlPoolOptions::new()
            .max_connections(8)
            .connect(&self.url)
            .await
            .unwrap()
    }

    pub async fn drop(self) {
        sqlx::query(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS `{}`",
            self.name
        )))
        .execute(&self.admin)
        .await
        .unwrap();
    }
}

/// Drop test databases older than two hours (left by failed or killed runs).
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
        if now.saturating_sub(created) > 7200 {
            let _ = sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                .execute(admin)
                .await;
        }
    }
}

/// A client on a fresh database and a queue on it.
pub async fn queue(config: QueueConfig) -> (TestDb, Client, Queue) {
    let db = TestDb::new().await;
    let client = db.client().await;
    let queue = client.create_queue("q", config).await.unwrap();
    (db, client, queue)
}

/// Poll `check` until it returns `Some`, failing after `deadline`.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Count rows of a sqlmq table (with the default prefix).
pub async fn count(pool: &MySqlPool, table: &str) -> i64 {
    sqlx::query(AssertSqlSafe(format!("SELECT COUNT(*) FROM sqlmq_{table}")))
        .fetch_one(pool)
        .await
        .unwrap()
        .get(0)
}

/// Check the storage invariants: every message is in exactly one state table, every state row
/// has its message, every ordering key has exactly one live head, every waiting keyed message
/// has its key. (Only primary-key lookups: these run on tables of 100 000 rows.)
pub async fn check_invariants(pool: &MySqlPool) {
    let scalar = |sql: &'static str| async move {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(pool)
            .await
            .unwrap()
    };
    let messages = scalar("SELECT COUNT(*) FROM sqlmq_messages").await;
    let placed = scalar(
        "SELECT COUNT(*) FROM (SELECT id FROM sqlmq_ready UNION ALL SELECT id FROM sqlmq_scheduled \
         UNION ALL SELECT id FROM sqlmq_leases UNION ALL SELECT id FROM sqlmq_dead \
         UNION ALL SELECT id FROM sqlmq_blocked) s JOIN sqlmq_messages m ON m.id = s.id",
    )
    .await;
    let distinct = scalar(
        "SELECT COUNT(DISTINCT id) FROM (SELECT id FROM sqlmq_ready UNION ALL SELECT id FROM sqlmq_scheduled \
         UNION ALL SELECT id FROM sqlmq_leases UNION ALL SELECT id FROM sqlmq_dead \
         UNION ALL SELECT id FROM sqlmq_blocked) s",
    )
    .await;
    let rows = scalar(
        "SELECT (SELECT COUNT(*) FROM sqlmq_ready) + (SELECT COUNT(*) FROM sqlmq_scheduled) + \
         (SELECT COUNT(*) FROM sqlmq_leases) + (SELECT COUNT(*) FROM sqlmq_dead) + \
         (SELECT COUNT(*) FROM sqlmq_blocked)",
    )
    .await;
    assert_eq!(rows, placed, "state rows without a message");
    assert_eq!(rows, distinct, "messages in two state tables at once");
    assert_eq!(messages, distinct, "messages in no state table");
    let headless = scalar(
        "SELECT COUNT(*) FROM sqlmq_key_heads k LEFT JOIN sqlmq_messages m ON m.id = k.head_id WHERE \
         m.id IS NULL OR ( \
         NOT EXISTS (SELECT 1 FROM sqlmq_ready r WHERE r.queue_id = m.queue_id AND r.priority = m.priority AND r.id = m.id) \
         AND NOT EXISTS (SELECT 1 FROM sqlmq_scheduled s WHERE s.id = m.id) \
         AND NOT EXISTS (SELECT 1 FROM sqlmq_leases l WHERE l.id = m.id))",
    )
    .await;
    assert_eq!(headless, 0, "every ordering key needs a live head");
    let keyless = scalar(
        "SELECT COUNT(*) FROM sqlmq_blocked b LEFT JOIN sqlmq_key_heads k \
         ON k.queue_id = b.queue_id AND k.ordering_key = b.ordering_key WHERE k.queue_id IS NULL",
    )
    .await;
    assert_eq!(keyless, 0, "blocked messages need their key row");
}

/// A raw handler that records the id of every delivery it handles, then acks it.
#[derive(Clone, Default)]
pub struct Recorder(pub std::sync::Arc<std::sync::Mutex<Vec<sqlmq::MessageId>>>);

impl Recorder {
    /// How many deliveries were handled.
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The distinct ids handled.
    pub fn ids(&self) -> std::collections::HashSet<sqlmq::MessageId> {
        self.0.lock().unwrap().iter().copied().collect()
    }
}

impl sqlmq::Handler<sqlmq::Delivery> for Recorder {
    type Error = String;

    fn handle(
        &self,
        delivery: sqlmq::Delivery,
        _ctx: sqlmq::JobContext,
    ) -> impl Future<Output = Result<sqlmq::Outcome, String>> + Send {
        self.0.lock().unwrap().push(delivery.id);
        std::future::ready(Ok(sqlmq::Outcome::Done))
    }
}
