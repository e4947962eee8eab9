//! The exactly-once effects guarantee of the guide (docs/guide/src/guarantees.md): handlers write to a side table and `ack_in` in the same
//! transaction while leases are forced to expire mid-handler, so that other consumers take the
//! same messages. Every message's effect row must appear exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::RngExt;
use sqlmq::{Error, Message, QueueConfig};
use sqlmq_testkit::{TestBackend, Value, check_invariants, queue};

const MESSAGES: usize = 400;
const CONSUMERS: usize = 8;
/// Handlers take 0–450 ms against a 150 ms lease: most leases expire mid-handler.
const LEASE: Duration = Duration::from_millis(150);

pub(crate) async fn effects_apply_once_although_leases_expire_mid_handler<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(1000)).await;
    db.exec("CREATE TABLE effects (message_id CHAR(36) NOT NULL)", &[])
        .await;
    db.exec("CREATE INDEX effects_id ON effects (message_id)", &[])
        .await;
    let batch: Vec<Message> = (0..MESSAGES)
        .map(|i| Message::new(format!("{i}")))
        .collect();
    q.send_batch(batch).await.unwrap();

    let lost = Arc::new(AtomicUsize::new(0));
    let committed = Arc::new(AtomicUsize::new(0));
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (q, client, lost, committed) =
                (q.clone(), client.clone(), lost.clone(), committed.clone());
            tokio::spawn(async move {
                let mut idle = 0;
                while idle < 100 {
                    let Some(d) = q.receive(1, LEASE).await.unwrap().pop() else {
                        idle += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    idle = 0;
                    let work = Duration::from_millis(rand::rng().random_range(0..450));
                    // On SQLite a transaction holds the database's one write lock: work done
                    // inside it would run the consumers one at a time, and with 150 ms leases
                    // nearly every lease would be lost before its handler's transaction even
                    // began. There the handler works first, then writes its effect and acks in
                    // one short transaction (its lease still expires mid-handler).
                    let work_in_tx = B::SCHEME != "sqlite";
                    if !work_in_tx {
                        tokio::time::sleep(work).await;
                    }
                    let mut tx = client.begin().await.unwrap();
                    B::execute(
                        &mut *tx,
                        "INSERT INTO effects (message_id) VALUES (?)",
                        &[Value::from(d.id.to_string())],
                    )
                    .await;
                    if work_in_tx {
                        tokio::time::sleep(work).await;
                    }
                    match q.ack_in(&mut tx, d.receipt()).await {
                        Ok(()) => {
                            tx.commit().await.unwrap();
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::LeaseLost { .. }) => {
                            tx.rollback().await.unwrap();
                            lost.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("ack_in: {e}"),
                    }
                }
            })
        })
        .collect();
    for c in consumers {
        c.await.unwrap();
    }

    let lost = lost.load(Ordering::Relaxed);
    assert!(
        lost > 50,
        "the test must actually lose leases mid-handler (lost {lost})"
    );
    let rows = db
        .query(
            "SELECT message_id, COUNT(*) FROM effects GROUP BY message_id",
            &[],
        )
        .await;
    let twice: Vec<_> = rows.iter().filter(|r| r[1].int() != 1).collect();
    assert!(
        twice.is_empty(),
        "{} messages' effects applied more than once",
        twice.len()
    );
    assert_eq!(rows.len(), MESSAGES, "every message's effect applied");
    assert_eq!(committed.load(Ordering::Relaxed), MESSAGES);
    let stats = q.stats().await.unwrap();
    assert_eq!(stats.pending() + stats.dead, 0, "{stats:?}");
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn ack_in_commits_or_rolls_back_with_the_handlers_writes<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    db.exec("CREATE TABLE effects (n INT)", &[]).await;
    q.send(Message::new("x")).await.unwrap();
    let d = q
        .receive(1, Duration::from_secs(30))
        .await
        .unwrap()
        .pop()
        .unwrap();

    // Roll back: neither the effect nor the ack happened; the lease is still ours.
    let mut tx = client.begin().await.unwrap();
    B::execute(&mut *tx, "INSERT INTO effects VALUES (1)", &[]).await;
    q.ack_in(&mut tx, d.receipt()).await.unwrap();
    tx.rollback().await.unwrap();
    let effects: i64 = db.scalar("SELECT COUNT(*) FROM effects").await;
    assert_eq!(effects, 0);
    assert_eq!(q.stats().await.unwrap().in_flight, 1);

    // Commit: both.
    let mut tx = client.begin().await.unwrap();
    B::execute(&mut *tx, "INSERT INTO effects VALUES (1)", &[]).await;
    q.ack_in(&mut tx, d.receipt()).await.unwrap();
    tx.commit().await.unwrap();
    let effects: i64 = db.scalar("SELECT COUNT(*) FROM effects").await;
    assert_eq!(effects, 1);
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}

pub(crate) async fn nack_in_rolls_back_with_the_callers_transaction<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    q.send(Message::new("x")).await.unwrap();
    let d = q
        .receive(1, Duration::from_secs(30))
        .await
        .unwrap()
        .pop()
        .unwrap();
    let mut tx = client.begin().await.unwrap();
    q.nack_in(&mut tx, d.receipt(), None, "oops").await.unwrap();
    tx.rollback().await.unwrap();
    // still ours, no error recorded
    q.ack(d.receipt()).await.unwrap();
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [effects_apply_once_although_leases_expire_mid_handler, ack_in_commits_or_rolls_back_with_the_handlers_writes, nack_in_rolls_back_with_the_callers_transaction]
);
