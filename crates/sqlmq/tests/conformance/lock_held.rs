//! The lock-held mode: `receive_in` claims inside the caller's transaction, `ack_batch_in`
//! acks there, and the transaction's end decides everything — commit (effects and acks
//! together), rollback or a killed process (the messages are ready again at once, attempts
//! unchanged).

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use sqlmq::{Client, Message, MessageId, QueueConfig};
use sqlmq_testkit::{TestBackend, Value, check_invariants, child_test, queue};

const LEASE: Duration = Duration::from_secs(30);

/// Ids of `deliveries`.
fn ids(deliveries: &[sqlmq::Delivery]) -> HashSet<MessageId> {
    deliveries.iter().map(|d| d.id).collect()
}

/// The handler's writes: one effect row per delivery.
async fn write_effects<B: TestBackend>(conn: &mut B::Connection, got: &[sqlmq::Delivery]) {
    for d in got {
        B::execute(
            conn,
            "INSERT INTO effects (message_id) VALUES (?)",
            &[Value::from(d.id.to_string())],
        )
        .await;
    }
}

pub(crate) async fn a_lock_held_batch_commits_with_its_effects_or_rolls_back_whole<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    db.exec("CREATE TABLE effects (message_id CHAR(36) NOT NULL)", &[])
        .await;
    let batch: Vec<Message> = (0..50).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();

    // Handled and acked, then rolled back: nothing happened, not even an attempt.
    let mut tx = client.begin().await.unwrap();
    let got = q.receive_in(&mut tx, 20, LEASE).await.unwrap();
    assert_eq!(got.len(), 20);
    write_effects::<B>(&mut tx, &got).await;
    let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
    let report = q.ack_batch_in(&mut tx, &receipts).await.unwrap();
    assert_eq!((report.acked, report.lost.len()), (20, 0));
    tx.rollback().await.unwrap();
    assert_eq!(db.count("messages").await, 50);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM effects").await, 0);
    check_invariants(&db).await;

    // Committed: the effects and the acks together.
    let mut tx = client.begin().await.unwrap();
    let got = q.receive_in(&mut tx, 30, LEASE).await.unwrap();
    assert_eq!(got.len(), 30);
    assert!(
        got.iter().all(|d| d.attempt == 1),
        "a rolled-back claim counted an attempt"
    );
    write_effects::<B>(&mut tx, &got).await;
    let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
    q.ack_batch_in(&mut tx, &receipts).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(db.count("messages").await, 20);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM effects").await, 30);

    // The rest, with leases: none of the committed ones comes back.
    let rest = q.receive(100, LEASE).await.unwrap();
    assert_eq!(rest.len(), 20);
    assert!(ids(&rest).is_disjoint(&ids(&got)));
    check_invariants(&db).await;
    db.drop().await;
}

/// Two lock-held transactions open at once never share a message, and neither does a
/// consumer with leases meanwhile; what the one that rolls back held is ready again.
/// (SQLite has one writer: there the second transaction waits for the first, which the
/// scenario above covers.)
pub(crate) async fn open_lock_held_batches_are_disjoint<B: TestBackend>() {
    if B::SCHEME == "sqlite" {
        return;
    }
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..30).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    let mut a = client.begin().await.unwrap();
    let mut b = client.begin().await.unwrap();
    let got_a = ids(&q.receive_in(&mut a, 10, LEASE).await.unwrap());
    let got_b = ids(&q.receive_in(&mut b, 10, LEASE).await.unwrap());
    let leased = q.receive(100, LEASE).await.unwrap();
    assert_eq!((got_a.len(), got_b.len(), leased.len()), (10, 10, 10));
    assert!(got_a.is_disjoint(&got_b));
    assert!(got_a.is_disjoint(&ids(&leased)) && got_b.is_disjoint(&ids(&leased)));
    let receipts: Vec<_> = leased.iter().map(|d| d.receipt()).collect();
    q.ack_batch(&receipts).await.unwrap();
    a.commit().await.unwrap(); // claimed with leases, not acked: in flight
    b.rollback().await.unwrap();
    let again = q.receive(100, LEASE).await.unwrap();
    assert_eq!(ids(&again), got_b);
    check_invariants(&db).await;
    db.drop().await;
}

/// The child's side: `SQLMQ_CHILD_LOCK_HELD=<database>`: claim 10 messages lock-held, write
/// how many into the file `SQLMQ_CHILD_LOCK_HELD_SAID`, and hang until killed.
pub(crate) fn child_lock_held<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_LOCK_HELD") else {
        return;
    };
    let said = std::env::var("SQLMQ_CHILD_LOCK_HELD_SAID").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = Client::<B>::open(&B::url_of(&database)).await.unwrap();
        let q = client.queue("q").await.unwrap();
        let mut tx = client.begin().await.unwrap();
        let got = q.receive_in(&mut tx, 10, LEASE).await.unwrap();
        std::fs::write(&said, got.len().to_string()).unwrap();
        std::future::pending::<()>().await;
    });
}

/// A process killed (`kill -9`) while it holds a lock-held batch: its messages are ready again
/// as soon as the server sees the connection close — no lease to wait out — and their attempt
/// count is unchanged.
pub(crate) async fn a_killed_lock_holder_gives_its_messages_back_at_once<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..10).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    let said = std::env::temp_dir().join(format!("{}.lock_held", db.name));
    let _ = std::fs::remove_file(&said);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child_test::<B>("lock_held", "child_lock_held")])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_LOCK_HELD", &db.name)
        .env("SQLMQ_CHILD_LOCK_HELD_SAID", &said)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let claimed = sqlmq_testkit::eventually_async(
        Duration::from_secs(30),
        "the child's lock-held claim",
        || async {
            std::fs::read_to_string(&said)
                .ok()
                .filter(|s| !s.is_empty())
        },
    )
    .await;
    let _ = std::fs::remove_file(&said);
    assert_eq!(claimed, "10");
    if B::SCHEME != "sqlite" {
        // While the child holds them, nobody else gets them.
        assert!(q.receive(100, LEASE).await.unwrap().is_empty());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let back = sqlmq_testkit::eventually_async(
        Duration::from_secs(5),
        "the killed holder's messages ready again",
        || async {
            let got = q.receive(100, LEASE).await.unwrap();
            (!got.is_empty()).then_some(got)
        },
    )
    .await;
    assert_eq!(back.len(), 10);
    assert!(back.iter().all(|d| d.attempt == 1));
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_lock_held_batch_commits_with_its_effects_or_rolls_back_whole,
        open_lock_held_batches_are_disjoint,
        a_killed_lock_holder_gives_its_messages_back_at_once,
    ],
    sync: [child_lock_held]
);
