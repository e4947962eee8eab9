//! The store-level suite, in the spirit of River's `riverdrivertest`: each store trait method
//! exercised directly, against every backend, by the conformance machinery (`conformance!`
//! makes one test per backend, each on a throwaway database). The conformance suite
//! (`crates/sqlmq/tests/conformance/`) drives the public API; this one holds the seam itself to
//! its contract, edge values included (empty lists, the largest batch, huge durations), so
//! that the backends cannot drift apart behind an API that happens not to notice.
//!
//! Nothing here names a backend: every scenario is generic over [`SuiteBackend`]; where the
//! backends differ by design, a scenario branches on the constant a trait declares for it
//! (`Publish::OFFSETS_AT_PUBLISH`, `Server::ONE_WRITER`).
//!
//! | file | what it checks |
//! |---|---|
//! | `processes.rs` | `store/body/processes.rs` |
//! | `queues.rs` | `store/body/queues.rs` |
//! | `durable.rs` | `store/body/durable.rs` |
//! | `enqueue.rs` | `store/body/enqueue.rs`, `ScriptedSend` |
//! | `claim.rs` | `Claim` |
//! | `settle.rs` | `store/body/settle.rs` |
//! | `maintain.rs` | `store/body/maintain.rs` |
//! | `admin.rs` | `store/body/admin.rs` |
//! | `dead.rs` | `store/body/dead.rs` |
//! | `probe.rs` | `store/body/probe.rs` |
//! | `topics.rs` | `store/body/topics.rs`, `Publish`, `store/body/stream.rs`, `store/body/retention.rs` |
//! | `member_dead.rs` | `store/body/member_dead.rs` |
//! | `groups.rs` | `store/body/groups.rs` |
//! | `group_claim.rs` | `store/body/group_claim.rs` |
//! | `group_settle.rs` | `store/body/group_settle.rs` |
//! | `group_dead.rs` | `store/body/group_dead.rs` |
//! | `group_state.rs` | `store/body/group_state.rs` |
//! | `schema.rs` | `store/body/migrate.rs`, `Server::now_us` |
//! | `server.rs` | `Server`: connect, detect, the locking self-test, the budget, the prefix, the history list length |

mod admin;
mod claim;
mod dead;
mod durable;
mod enqueue;
mod group_claim;
mod group_dead;
mod group_settle;
mod group_state;
mod groups;
mod maintain;
mod member_dead;
mod probe;
mod processes;
mod queues;
mod schema;
mod server;
mod settle;
mod topics;

use std::time::{Duration, SystemTime};

use sqlmq_testkit::{TestBackend, TestDb, Value};

use crate::Client;
use crate::domain::{
    Decide, Delivery, GroupConfig, Message, MessageId, NackOutcome, QueueConfig, Receipt,
    Settlement, StartAt, TopicConfig, time_from_micros,
};
use crate::store::Backend;
use crate::store::rows::{
    ClaimRequest, Entry, Keyed, MessageRow, NewGroupLeases, PendingBatch, PendingRow, RecordRows,
};
use crate::store::statements::{MAX_LIST, run_within, split_into_buckets};
use crate::topic::claim::GroupClaimRequest;

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
    <B as crate::store::Claim>::claim(client.store(), &mut conn, &request, "suite.claim")
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

// Consumer groups.

/// Whether backend `B` gives offsets at publish (nothing is ever pending there).
pub(crate) fn offsets_at_publish<B: SuiteBackend>() -> bool {
    <B as crate::store::Publish>::OFFSETS_AT_PUBLISH
}

/// Whether backend `B` admits one write transaction at a time (no claim ever finds a cursor
/// another claim holds there).
pub(crate) fn one_writer<B: SuiteBackend>() -> bool {
    <B as crate::store::Server>::ONE_WRITER
}

/// A topic `name` of `partitions` (strict order or not) with a cluster group "g" of `config`
/// reading from the start, made through the public API; `(topic id, group id)`.
pub(crate) async fn cluster<B: SuiteBackend>(
    client: &Client<B>,
    name: &str,
    partitions: u32,
    strict: bool,
    config: GroupConfig,
) -> (i32, i32) {
    let topic = client
        .create_topic(
            name,
            TopicConfig::default()
                .partitions(partitions)
                .strict_order(strict),
        )
        .await
        .unwrap();
    let group = topic
        .create_group("g", config, StartAt::Earliest)
        .await
        .unwrap();
    (topic.id(), group.id())
}

/// A record to publish: partition, key, headers (JSON), body.
pub(crate) type Rec<'a> = (i32, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// Publish `recs` in one committed transaction through the store, then (where offsets come
/// later) run sequencing steps until every partition of the topic is sequenced: the records
/// are in the log, in order. Their ids.
pub(crate) async fn log_records<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    recs: &[Rec<'_>],
) -> Vec<MessageId> {
    let store = client.store();
    let ids: Vec<MessageId> = recs.iter().map(|_| MessageId::new()).collect();
    let rows: Vec<PendingRow<'_>> = recs
        .iter()
        .zip(&ids)
        .map(|(&(partition, key, headers, body), &id)| PendingRow {
            partition,
            id,
            key: key.map(str::as_bytes),
            headers: headers.map(str::to_owned),
            body,
        })
        .collect();
    let mut tx = client.begin().await.unwrap();
    let mut start = 0;
    while start < rows.len() {
        let end = run_within(start, rows.len(), MAX_LIST, 1 << 24, |i| rows[i].bytes());
        let batch = PendingBatch {
            topic_id,
            rows: &rows[start..end],
        };
        <B as crate::store::Publish>::insert_pending(store, &mut tx, &batch)
            .await
            .unwrap();
        start = end;
    }
    tx.commit().await.unwrap();
    let mut partitions: Vec<i32> = recs.iter().map(|r| r.0).collect();
    partitions.sort_unstable();
    partitions.dedup();
    for p in partitions {
        loop {
            let mut tx = client.begin().await.unwrap();
            let n = <B as crate::store::Publish>::sequence_step(
                store,
                &mut tx,
                topic_id,
                &[p],
                MAX_LIST,
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
            if n == 0 {
                break;
            }
        }
    }
    ids
}

/// `n` plain records in `partition` (bodies `"<partition>.<i>"`); their ids, in offset order.
pub(crate) async fn log_plain<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    partition: i32,
    n: usize,
) -> Vec<MessageId> {
    let bodies: Vec<String> = (0..n).map(|i| format!("{partition}.{i}")).collect();
    let recs: Vec<Rec<'_>> = bodies
        .iter()
        .map(|b| (partition, None, None, b.as_bytes()))
        .collect();
    log_records(client, topic_id, &recs).await
}

/// A cluster group's claim as the engine makes it (`topic::claim`, the store's steps without
/// the housekeeping `Group::receive` runs first): due retries first (their attempts and tokens
/// continue), then fresh offsets from the cursors with work, from partition 0 on; leases of
/// `lease` for `owner`. No strict order. One committed transaction.
pub(crate) async fn group_claim<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    group_id: i32,
    n: usize,
    lease: Duration,
    owner: &str,
) -> Vec<Delivery> {
    let mut tx = client.begin().await.unwrap();
    let request = GroupClaimRequest {
        group_id,
        topic_id,
        strict: false,
        partitions: 1,
        start: 0,
        n,
        lease,
        owner,
    };
    let claimed = crate::topic::claim::claim::<B>(client.store(), &mut tx, &request)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    claimed.deliveries
}

/// `t` in microseconds since the epoch.
pub(crate) fn micros(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Ack `receipts` in group `group_id`, in a committed transaction; the receipts lost.
pub(crate) async fn group_ack<B: SuiteBackend>(
    client: &Client<B>,
    group_id: i32,
    receipts: &[Receipt],
) -> Vec<Receipt> {
    let mut tx = client.begin().await.unwrap();
    let lost = client
        .store()
        .ack_group(&mut tx, group_id, receipts)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    lost
}

/// `fail_group` in a committed transaction (rolled back on an error).
pub(crate) async fn group_fail<B: SuiteBackend>(
    client: &Client<B>,
    group_id: i32,
    receipt: &Receipt,
    decide: &Decide<'_>,
) -> crate::domain::Result<NackOutcome> {
    let mut tx = client.begin().await.unwrap();
    let outcome = client
        .store()
        .fail_group(&mut tx, group_id, receipt, decide)
        .await;
    match outcome {
        Ok(_) => tx.commit().await.unwrap(),
        Err(_) => tx.rollback().await.unwrap(),
    }
    outcome
}

/// One record's rows in a group (on a reader).
pub(crate) async fn rows_of<B: SuiteBackend>(
    client: &Client<B>,
    group_id: i32,
    d: &Delivery,
) -> RecordRows {
    let mut conn = client.reader().acquire().await.unwrap();
    let position = (d.partition.unwrap() as i32, d.offset.unwrap());
    client
        .store()
        .record_rows(&mut conn, group_id, d.id, position)
        .await
        .unwrap()
}

/// Lease the records at `positions` in group `group_id` to `owner` for `lease`, as a claim
/// would hand them out first (attempt 1, token 1), without moving cursors: for scenarios that
/// need records in flight exactly where they say. One committed transaction.
pub(crate) async fn lease_at<B: SuiteBackend>(
    client: &Client<B>,
    (topic_id, group_id): (i32, i32),
    positions: &[(i32, i64)],
    lease: Duration,
    owner: &str,
) -> Vec<Delivery> {
    let now = now_us(client).await;
    let until_us = now.saturating_add(crate::domain::micros_of(lease));
    let store = client.store();
    let mut tx = client.begin().await.unwrap();
    let mut found = store
        .records_at(&mut tx, topic_id, positions)
        .await
        .unwrap();
    found.sort_by_key(|r| (r.partition, r.offset));
    let deliveries: Vec<Delivery> = found
        .into_iter()
        .map(|r| Delivery {
            id: r.id,
            token: 1,
            attempt: 1,
            priority: 0,
            ordering_key: r.key,
            concurrency_key: None,
            idempotency_key: None,
            headers: r.headers,
            body: r.body,
            enqueued_at: time_from_micros(r.published_us),
            lease_expires_at: time_from_micros(until_us),
            deadline: None,
            run_timeout: None,
            partition: Some(r.partition as u32),
            offset: Some(r.offset),
            tracked: false,
            claimed_at: time_from_micros(now),
        })
        .collect();
    let leases = NewGroupLeases {
        group_id,
        deliveries: &deliveries,
        claimed_us: now,
        until_us,
        owner,
    };
    store.insert_group_leases(&mut tx, &leases).await.unwrap();
    tx.commit().await.unwrap();
    deliveries
}

/// A settlement that delivers the record again after `after` without counting the attempt.
pub(crate) fn snooze(attempts: u32, after: Duration) -> Settlement<'static> {
    Settlement {
        retry_after: Some(after),
        attempts: attempts.saturating_sub(1),
        error: None,
        outcome: "snoozed",
    }
}
