//! The store-level suite, in the spirit of River's `riverdrivertest`: each store trait method
//! exercised directly, against every backend, by the conformance machinery (`conformance!`
//! makes one test per backend, each on a throwaway database). The conformance suite
//! (`crates/sqlmq/tests/conformance/`) drives the public API; this one holds the seam itself to
//! its contract, edge values included (empty lists, the largest batch, huge durations), so
//! that the backends cannot drift apart behind an API that happens not to notice.
//!
//! Nothing here names a backend: every scenario is generic over [`SuiteBackend`]. The
//! consumer-group traits (`Groups`, `GroupClaim`, `GroupSettle`, `GroupDead`, `GroupState`) are
//! not covered yet.
//!
//! | file | traits |
//! |---|---|
//! | `processes.rs` | `Processes` |
//! | `queues.rs` | `Queues` |
//! | `enqueue.rs` | `Enqueue`, `ScriptedSend` |
//! | `claim.rs` | `Claim` |
//! | `settle.rs` | `QueueSettle` |
//! | `maintain.rs` | `Maintain` |
//! | `admin.rs` | `Admin` |
//! | `dead.rs` | `DeadLetters` |
//! | `probe.rs` | `Probe` |
//! | `topics.rs` | `Topics`, `Publish`, `Stream`, `Retention` |
//! | `member_dead.rs` | `MemberDead` |
//! | `schema.rs` | `Schema`, `Server::now_us` |

mod admin;
mod claim;
mod dead;
mod enqueue;
mod maintain;
mod member_dead;
mod probe;
mod processes;
mod queues;
mod schema;
mod settle;
mod topics;

use std::time::Duration;

use sqlmq_testkit::{TestBackend, TestDb, Value};

use crate::Client;
use crate::domain::{Delivery, Message, MessageId, QueueConfig, Receipt, Settlement};
use crate::store::rows::{ClaimRequest, Entry, Keyed, MessageRow};
use crate::store::statements::{MAX_LIST, split_into_buckets};
use crate::store::{Backend, Claim, Enqueue, Queues};

/// A backend the suite runs on: sqlmq's, with the test kit's throwaway databases.
pub(crate) trait SuiteBackend: Backend + TestBackend {}

impl<B: Backend + TestBackend> SuiteBackend for B {}

/// A fresh database, migrated, and a client on it as the runtime user (no DDL).
pub(crate) async fn fixture<B: SuiteBackend>() -> (TestDb<B>, Client<B>) {
    let db = TestDb::<B>::new().await;
    db.migrate().await;
    let client = Client::builder().open::<B>(&db.url).await.expect("connect");
    (db, client)
}

/// A lease no test outlives.
pub(crate) const LONG: Duration = Duration::from_secs(3600);

/// The longest span given to the database's date arithmetic: a thousand years (the domain's
/// `MAX_DATE_SPAN`, private to its module; `micros_of` caps every duration to it).
pub(crate) const MAX_DATE_SPAN: Duration = Duration::from_secs(1000 * 366 * 24 * 3600);

/// The deadline of the suite's waits on the database clock.
pub(crate) const DEADLINE: Duration = Duration::from_secs(10);

/// A queue named `name` with the default configuration; its id.
pub(crate) async fn queue<B: SuiteBackend>(client: &Client<B>, name: &str) -> i32 {
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .upsert_queue(&mut conn, name, &QueueConfig::default())
        .await
        .unwrap()
        .id
}

/// `n` messages with bodies `"<prefix>0"`, `"<prefix>1"`, … (ids in that order).
pub(crate) fn messages(prefix: &str, n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| Message::new(format!("{prefix}{i}")))
        .collect()
}

/// The ids of `msgs`, in order.
pub(crate) fn ids(msgs: &[Message]) -> Vec<MessageId> {
    msgs.iter().map(Message::id).collect()
}

/// The ids of `deliveries`, in order.
pub(crate) fn delivered(deliveries: &[Delivery]) -> Vec<MessageId> {
    deliveries.iter().map(|d| d.id).collect()
}

/// `ids`, sorted.
pub(crate) fn sorted(mut ids: Vec<MessageId>) -> Vec<MessageId> {
    ids.sort();
    ids
}

/// The entry a fresh message is put in line with.
pub(crate) fn entry(m: &Message) -> Entry {
    Entry {
        id: m.id,
        priority: m.priority,
        attempts: 0,
        token: 0,
    }
}

/// Insert the rows of `msgs`, in statements of bucket sizes (as the engine does).
pub(crate) async fn insert_rows<B: SuiteBackend>(
    client: &Client<B>,
    conn: &mut B::Connection,
    queue_id: i32,
    msgs: &[Message],
) {
    let headers: Vec<Option<String>> = msgs
        .iter()
        .map(|m| (!m.headers.is_empty()).then(|| serde_json::to_string(&m.headers).unwrap()))
        .collect();
    let mut start = 0;
    for size in split_into_buckets(msgs.len(), MAX_LIST) {
        let rows: Vec<MessageRow<'_>> = (start..start + size)
            .map(|i| (&msgs[i], headers[i].as_deref()))
            .collect();
        client
            .store()
            .insert_messages(conn, queue_id, &rows)
            .await
            .unwrap();
        start += size;
    }
}

/// Store `msgs` in one committed transaction through the store's own statements: the rows,
/// then each message in `ready`, in `scheduled` (its delay) or behind its ordering key.
pub(crate) async fn put<B: SuiteBackend>(client: &Client<B>, queue_id: i32, msgs: &[Message]) {
    let store = client.store();
    let mut tx = client.begin().await.unwrap();
    insert_rows(client, &mut tx, queue_id, msgs).await;
    let mut placed = Vec::new();
    let mut keyed = Vec::new();
    for m in msgs {
        let delay_us = crate::domain::micros_of(m.delay);
        match &m.ordering_key {
            None => placed.push((entry(m), delay_us)),
            Some(key) => keyed.push(Keyed {
                key: key.clone(),
                entry: entry(m),
                delay_us,
            }),
        }
    }
    store.place(&mut tx, queue_id, &placed).await.unwrap();
    store.enqueue_keyed(&mut tx, queue_id, keyed).await.unwrap();
    tx.commit().await.unwrap();
}

/// A claim of up to `n` messages leased for `lease` by `owner`, in a transaction of its own.
pub(crate) async fn claim_as<B: SuiteBackend>(
    client: &Client<B>,
    queue_id: i32,
    n: usize,
    lease: Duration,
    owner: &str,
) -> Vec<Delivery> {
    let mut conn = client.pool().acquire().await.unwrap();
    let request = ClaimRequest {
        queue_id,
        n,
        lease,
        owner,
    };
    client
        .store()
        .claim(&mut conn, &request, "suite.claim")
        .await
        .unwrap()
}

/// [`claim_as`] by the owner "suite".
pub(crate) async fn claim<B: SuiteBackend>(
    client: &Client<B>,
    queue_id: i32,
    n: usize,
    lease: Duration,
) -> Vec<Delivery> {
    claim_as(client, queue_id, n, lease, "suite").await
}

/// The receipts of `deliveries`.
pub(crate) fn receipts(deliveries: &[Delivery]) -> Vec<Receipt> {
    deliveries.iter().map(Delivery::receipt).collect()
}

/// A settlement that puts the message back after `after`, counting the attempt, and records
/// `error`.
pub(crate) fn retry(attempts: u32, after: Duration, error: &str) -> Settlement<'_> {
    Settlement {
        retry_after: Some(after),
        attempts,
        error: Some(error),
        outcome: "failed",
    }
}

/// A settlement that makes the message a dead letter, recording `error`.
pub(crate) fn bury(attempts: u32, error: &str) -> Settlement<'_> {
    Settlement {
        retry_after: None,
        attempts,
        error: Some(error),
        outcome: "dead",
    }
}

/// A message id read back from a test query (binary columns may decode as text).
pub(crate) fn id_of(value: &Value) -> MessageId {
    match value {
        Value::Bytes(b) => MessageId::from_slice(b).unwrap(),
        Value::Text(s) => MessageId::from_slice(s.as_bytes()).unwrap(),
        other => panic!("not an id: {other:?}"),
    }
}

/// The ids of every row of sqlmq table `table` (all queues), sorted.
pub(crate) async fn ids_in<B: SuiteBackend>(db: &TestDb<B>, table: &str) -> Vec<MessageId> {
    let rows = db
        .query(&format!("SELECT id FROM sqlmq_{table}"), &[])
        .await;
    sorted(rows.iter().map(|r| id_of(&r[0])).collect())
}

/// Integer columns `columns` of the row of `id` in sqlmq table `table` (`None`: no such row).
pub(crate) async fn row_of<B: SuiteBackend>(
    db: &TestDb<B>,
    table: &str,
    columns: &str,
    id: MessageId,
) -> Option<Vec<i64>> {
    let rows = db
        .query(
            &format!("SELECT {columns} FROM sqlmq_{table} WHERE id = ?"),
            &[Value::from(id.bytes())],
        )
        .await;
    rows.first().map(|r| r.iter().map(Value::int).collect())
}

/// Wait until the database clock has passed `us` (µs since the epoch).
pub(crate) async fn wait_past<B: SuiteBackend>(client: &Client<B>, us: i64) {
    sqlmq_testkit::eventually_async(DEADLINE, "the database clock to pass", || async move {
        let mut conn = client.reader().acquire().await.unwrap();
        let now = crate::store::Server::now_us(client.store(), &mut conn)
            .await
            .unwrap();
        (now > us).then_some(())
    })
    .await;
}

/// The database clock, in microseconds since the epoch (on a reader).
pub(crate) async fn now_us<B: SuiteBackend>(client: &Client<B>) -> i64 {
    let mut conn = client.reader().acquire().await.unwrap();
    crate::store::Server::now_us(client.store(), &mut conn)
        .await
        .unwrap()
}
