//! Counting the statements a client runs, with the server's own per-session `Questions`
//! counters on every connection of its pool (exact even while other tests use the server), and
//! the pings it sends (`Com_admin_commands`, which `Questions` leaves out).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use sqlmq::{Client, MySql, Queue, QueueConfig};
use sqlmq_testkit::TestDb;

/// A migrated database with queue `q`, and a client whose statements are counted exactly: one
/// connection, no housekeeping, no notifications.
pub(crate) async fn counted() -> (TestDb<MySql>, Client<MySql>, Queue<MySql>) {
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let client = Client::builder()
        .housekeeping_interval(Duration::from_secs(3600))
        .notifications(false)
        .max_connections(1)
        .open::<MySql>(&db.url)
        .await
        .unwrap();
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    (db, client, q)
}

/// Statements per call of `op` over `ops` calls (the `i`-th given `i`), less what reading the
/// counters costs. `op` runs once before (as `ops`, for its statements to be prepared).
pub(crate) async fn per_op<F, Fut>(client: &Client<MySql>, ops: usize, mut op: F) -> f64
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    op(ops).await;
    let first = statements(client).await;
    let reading = between(&first, &statements(client).await);
    let before = statements(client).await;
    for i in 0..ops {
        op(i).await;
    }
    let after = statements(client).await;
    between(&before, &after).saturating_sub(reading) as f64 / ops as f64
}

/// Statements the server has run on each of `client`'s connections, by connection id: every
/// connection of its pool is held at once (so no probe runs meanwhile) and asked for its
/// session's `Questions`.
pub(crate) async fn statements(client: &Client<MySql>) -> HashMap<u64, u64> {
    session_counter(client, "QUESTIONS").await
}

/// Pings (and other administrative commands) the server has answered on each of `client`'s
/// connections, read as [`statements`] reads its counts.
pub(crate) async fn pings(client: &Client<MySql>) -> HashMap<u64, u64> {
    session_counter(client, "COM_ADMIN_COMMANDS").await
}

/// The session status variable `name` of each of `client`'s connections, by connection id.
pub(crate) async fn session_counter(client: &Client<MySql>, name: &str) -> HashMap<u64, u64> {
    let pool = client.pool();
    let mut held = Vec::new();
    for _ in 0..pool.size() {
        held.push(pool.acquire().await.unwrap());
    }
    let mut counts = HashMap::new();
    for conn in &mut held {
        let (id, n): (u64, String) = sqlx::query_as(
            "SELECT CONNECTION_ID(), VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME = ?",
        )
        .bind(name)
        .fetch_one(&mut **conn)
        .await
        .unwrap();
        counts.insert(id, n.parse::<u64>().unwrap());
    }
    counts
}

/// Statements run between two readings (a connection opened meanwhile counts from zero).
pub(crate) fn between(before: &HashMap<u64, u64>, after: &HashMap<u64, u64>) -> u64 {
    after
        .iter()
        .map(|(id, n)| n - before.get(id).copied().unwrap_or(0))
        .sum()
}
