//! The lock-held mode: `receive_in` claims inside the caller's transaction, `ack_batch_in`
//! acks there (or `take_in` claims and removes at once, without a lease), and the
//! transaction's end decides everything — commit (effects and removals together), rollback or
//! a killed process (the messages are ready again at once, attempts unchanged).

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// The child's side: `SQLMQ_CHILD_LOCK_HELD=<database>`: claim 10 messages lock-held (take
/// them, with `SQLMQ_CHILD_LOCK_HELD_TAKE` set), write how many into the file
/// `SQLMQ_CHILD_LOCK_HELD_SAID`, and hang until killed.
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
        let got = if std::env::var_os("SQLMQ_CHILD_LOCK_HELD_TAKE").is_some() {
            q.take_in(&mut tx, 10).await.unwrap()
        } else {
            q.receive_in(&mut tx, 10, LEASE).await.unwrap()
        };
        std::fs::write(&said, got.len().to_string()).unwrap();
        std::future::pending::<()>().await;
    });
}

/// A process killed (`kill -9`) while it holds a lock-held batch: its messages are ready again
/// as soon as the server sees the connection close — no lease to wait out — and their attempt
/// count is unchanged.
pub(crate) async fn a_killed_lock_holder_gives_its_messages_back_at_once<B: TestBackend>() {
    killed_holder::<B>(false).await;
}

/// The same for a process killed while it holds messages it took (`take_in`).
pub(crate) async fn a_killed_taker_gives_its_messages_back_at_once<B: TestBackend>() {
    killed_holder::<B>(true).await;
}

/// A child claims (`take`: takes) 10 messages in a transaction and is killed holding them.
async fn killed_holder<B: TestBackend>(take: bool) {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..10).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    let said = std::env::temp_dir().join(format!("{}.lock_held", db.name));
    let _ = std::fs::remove_file(&said);
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", &child_test::<B>("lock_held", "child_lock_held")])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_LOCK_HELD", &db.name)
        .env("SQLMQ_CHILD_LOCK_HELD_SAID", &said)
        .stdout(Stdio::null());
    if take {
        child.env("SQLMQ_CHILD_LOCK_HELD_TAKE", "1");
    }
    let mut child = child.spawn().unwrap();
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

/// `take_in` removes what it returns when the transaction commits — with the handler's
/// effects, and without writing a lease — and a rollback puts all of it back, attempts
/// unchanged. A paused queue gives nothing; a bad count is refused.
pub(crate) async fn a_take_commits_with_its_effects_or_rolls_back_whole<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    db.exec("CREATE TABLE effects (message_id CHAR(36) NOT NULL)", &[])
        .await;
    let batch: Vec<Message> = (0..50).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    let mut tx = client.begin().await.unwrap();
    assert!(matches!(
        q.take_in(&mut tx, 0).await,
        Err(sqlmq::Error::InvalidArgument(_))
    ));

    let got = q.take_in(&mut tx, 20).await.unwrap();
    assert_eq!(got.len(), 20);
    write_effects::<B>(&mut tx, &got).await;
    tx.rollback().await.unwrap();
    assert_eq!(db.count("messages").await, 50);
    assert_eq!(db.count("ready").await, 50);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM effects").await, 0);
    check_invariants(&db).await;

    // A taken delivery holds no lease: its receipt does not settle the lease a later claim of
    // the same message holds.
    let leased = q.receive(5, LEASE).await.unwrap();
    let stale: Vec<_> = got[..5].iter().map(|d| d.receipt()).collect();
    assert_eq!(ids(&leased), ids(&got[..5]));
    let report = q.ack_batch(&stale).await.unwrap();
    assert_eq!((report.acked, report.lost.len()), (0, 5));
    let receipts: Vec<_> = leased.iter().map(|d| d.receipt()).collect();
    assert_eq!(q.ack_batch(&receipts).await.unwrap().acked, 5);
    let batch: Vec<Message> = (0..5).map(|i| Message::new(format!("{i}"))).collect();
    let resent: Vec<Message> = batch
        .into_iter()
        .zip(&leased)
        .map(|(m, d)| m.with_id(d.id))
        .collect();
    q.send_batch(resent).await.unwrap(); // the five back, in their old place in the order

    let mut tx = client.begin().await.unwrap();
    let got = q.take_in(&mut tx, 30).await.unwrap();
    let bodies: Vec<String> = got
        .iter()
        .map(|d| String::from_utf8(d.body.clone()).unwrap())
        .collect();
    let expected: Vec<String> = (0..30).map(|i| i.to_string()).collect();
    assert_eq!(bodies, expected, "taken in the claim order");
    assert!(got.iter().all(|d| d.attempt == 1));
    write_effects::<B>(&mut tx, &got).await;
    tx.commit().await.unwrap();
    assert_eq!(db.count("messages").await, 20);
    assert_eq!(db.count("leases").await, 0, "a take writes no lease");
    assert_eq!(db.scalar("SELECT COUNT(*) FROM effects").await, 30);
    check_invariants(&db).await;

    q.pause().await.unwrap();
    let mut tx = client.begin().await.unwrap();
    assert!(q.take_in(&mut tx, 100).await.unwrap().is_empty());
    tx.rollback().await.unwrap();
    q.resume().await.unwrap();

    // On a connection outside a transaction the take commits by itself.
    let mut conn = client.pool().acquire().await.unwrap();
    let alone = q.take_in(&mut conn, 5).await.unwrap();
    drop(conn);
    assert_eq!(alone.len(), 5);
    assert_eq!(db.count("messages").await, 15);
    check_invariants(&db).await;

    let rest = q.receive(100, LEASE).await.unwrap();
    assert_eq!(rest.len(), 15);
    assert!(ids(&rest).is_disjoint(&ids(&got)));
    assert!(ids(&rest).is_disjoint(&ids(&alone)));
    db.drop().await;
}

/// A message with an ordering key that is taken lets its key's next message go when — and
/// only when — the transaction commits; a rollback keeps the line as it was.
pub(crate) async fn a_taken_key_moves_on_at_commit<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    for i in 0..3 {
        q.send(Message::new(format!("k{i}")).ordering_key("k"))
            .await
            .unwrap();
    }
    let body = |d: &sqlmq::Delivery| String::from_utf8(d.body.clone()).unwrap();
    let mut tx = client.begin().await.unwrap();
    let got = q.take_in(&mut tx, 10).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["k0"]);
    tx.rollback().await.unwrap();
    check_invariants(&db).await;

    let mut tx = client.begin().await.unwrap();
    let got = q.take_in(&mut tx, 10).await.unwrap();
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["k0"]);
    if B::SCHEME != "sqlite" {
        // The successor is not claimable before the commit (SQLite's one writer would wait).
        assert!(q.receive(10, LEASE).await.unwrap().is_empty());
    }
    tx.commit().await.unwrap();
    check_invariants(&db).await;
    let next = q.receive(10, LEASE).await.unwrap();
    assert_eq!(next.iter().map(body).collect::<Vec<_>>(), ["k1"]);
    let receipts: Vec<_> = next.iter().map(|d| d.receipt()).collect();
    q.ack_batch(&receipts).await.unwrap();
    let mut tx = client.begin().await.unwrap();
    let last = q.take_in(&mut tx, 10).await.unwrap();
    assert_eq!(last.iter().map(body).collect::<Vec<_>>(), ["k2"]);
    tx.commit().await.unwrap();
    assert_eq!(db.count("messages").await, 0);
    check_invariants(&db).await;
    db.drop().await;
}

/// Concurrent takers, each committing most of its batches and rolling some back, together
/// remove every message exactly once: no message is taken by two committed transactions, none
/// is lost with a rollback.
pub(crate) async fn concurrent_takers_remove_each_message_once<B: TestBackend>() {
    const MESSAGES: usize = 300;
    const TAKERS: usize = 6;
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..MESSAGES)
        .map(|i| Message::new(format!("{i}")))
        .collect();
    let sent: HashSet<MessageId> = batch.iter().map(Message::id).collect();
    q.send_batch(batch).await.unwrap();
    let committed: Arc<Mutex<Vec<MessageId>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut takers = tokio::task::JoinSet::new();
    for t in 0..TAKERS {
        let (client, q, committed) = (client.clone(), q.clone(), Arc::clone(&committed));
        takers.spawn(async move {
            let mut round = 0usize;
            while committed.lock().unwrap().len() < MESSAGES {
                assert!(Instant::now() < deadline, "the takers did not finish");
                round += 1;
                let mut tx = client.begin().await.unwrap();
                let got = q.take_in(&mut tx, 7).await.unwrap();
                // Hold the locks a moment, so that the takers' transactions overlap.
                tokio::time::sleep(Duration::from_millis(2)).await;
                if (t + round).is_multiple_of(4) {
                    tx.rollback().await.unwrap();
                } else {
                    tx.commit().await.unwrap();
                    committed.lock().unwrap().extend(got.iter().map(|d| d.id));
                }
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
    }
    while let Some(done) = takers.join_next().await {
        done.unwrap();
    }
    let committed = committed.lock().unwrap().clone();
    let unique: HashSet<MessageId> = committed.iter().copied().collect();
    assert_eq!(unique.len(), committed.len(), "a message was taken twice");
    assert_eq!(unique, sent, "a message was lost");
    assert_eq!(db.count("messages").await, 0);
    check_invariants(&db).await;
    db.drop().await;
}

/// Concurrent takers of keyed messages, committing most batches and rolling some back, take
/// each key's messages in the order they were sent: a key's next message is only visible once
/// the take of the one before it committed. Each taker records what it took in an effects table
/// inside its transaction; the table's auto-increment numbers follow the order of the takes
/// (a successor is read only after its predecessor's commit), so per key they must list the
/// messages in sequence.
pub(crate) async fn concurrent_takers_keep_each_key_in_order<B: TestBackend>() {
    const KEYS: usize = 5;
    const PER_KEY: usize = 30;
    const TAKERS: usize = 6;
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let serial = if B::SCHEME == "sqlite" {
        "n INTEGER PRIMARY KEY AUTOINCREMENT"
    } else {
        "n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"
    };
    db.exec(
        &format!("CREATE TABLE taken ({serial}, k VARCHAR(8) NOT NULL, seq INT NOT NULL)"),
        &[],
    )
    .await;
    for seq in 0..PER_KEY {
        let batch: Vec<Message> = (0..KEYS)
            .map(|k| Message::new(format!("{k}:{seq}")).ordering_key(format!("k{k}")))
            .collect();
        q.send_batch(batch).await.unwrap();
    }
    let committed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut takers = tokio::task::JoinSet::new();
    for t in 0..TAKERS {
        let (client, q, committed) = (client.clone(), q.clone(), Arc::clone(&committed));
        takers.spawn(async move {
            let mut round = 0usize;
            while committed.load(std::sync::atomic::Ordering::SeqCst) < KEYS * PER_KEY {
                assert!(Instant::now() < deadline, "the takers did not finish");
                round += 1;
                let mut tx = client.begin().await.unwrap();
                let got = q.take_in(&mut tx, 3).await.unwrap();
                for d in &got {
                    let body = String::from_utf8(d.body.clone()).unwrap();
                    let (k, seq) = body.split_once(':').unwrap();
                    B::execute(
                        &mut tx,
                        "INSERT INTO taken (k, seq) VALUES (?, ?)",
                        &[Value::Text(k.to_owned()), Value::Int(seq.parse().unwrap())],
                    )
                    .await;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                if (t + round).is_multiple_of(4) {
                    tx.rollback().await.unwrap();
                } else {
                    tx.commit().await.unwrap();
                    committed.fetch_add(got.len(), std::sync::atomic::Ordering::SeqCst);
                }
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        });
    }
    while let Some(done) = takers.join_next().await {
        done.unwrap();
    }
    let total = (KEYS * PER_KEY) as i64;
    assert_eq!(db.scalar("SELECT COUNT(*) FROM taken").await, total);
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM (SELECT DISTINCT k, seq FROM taken) d")
            .await,
        total,
        "a message was taken twice"
    );
    let out_of_order = "SELECT COUNT(*) FROM taken a JOIN taken b \
        ON a.k = b.k AND a.n < b.n AND a.seq > b.seq";
    assert_eq!(
        db.scalar(out_of_order).await,
        0,
        "a key's messages out of order"
    );
    assert_eq!(db.count("messages").await, 0);
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_lock_held_batch_commits_with_its_effects_or_rolls_back_whole,
        open_lock_held_batches_are_disjoint,
        a_killed_lock_holder_gives_its_messages_back_at_once,
        a_killed_taker_gives_its_messages_back_at_once,
        a_take_commits_with_its_effects_or_rolls_back_whole,
        a_taken_key_moves_on_at_commit,
        concurrent_takers_remove_each_message_once,
        concurrent_takers_keep_each_key_in_order,
    ],
    sync: [child_lock_held]
);
