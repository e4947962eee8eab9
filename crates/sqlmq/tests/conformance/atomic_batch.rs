//! The atomic enqueue guarantee of the guide (docs/guide/src/guarantees.md): a batch of any size becomes visible all at once at commit, or not
//! at all; rolled-back transactions leave nothing behind.

use std::time::Duration;

use sqlmq::{Message, QueueConfig};
use sqlmq_testkit::{TestBackend, check_invariants, queue};

const LEASE: Duration = Duration::from_secs(60);

pub(crate) async fn batch_of_100_000_is_invisible_until_commit_then_complete<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..100_000)
        .map(|i| Message::new(format!("m{i}")))
        .collect();
    let ids: Vec<_> = batch.iter().map(|m| m.id()).collect();

    let mut tx = client.begin().await.unwrap();
    let sent = q.send_batch_in(&mut tx, batch).await.unwrap();
    assert_eq!(sent.len(), 100_000);
    // Not committed yet: other sessions see nothing and consumers get nothing.
    assert_eq!(db.count("messages").await, 0);
    assert_eq!(db.count("ready").await, 0);
    assert!(q.receive(10, LEASE).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    assert_eq!(db.count("messages").await, 100_000);
    assert_eq!(q.stats().await.unwrap().ready, 100_000);
    // The first and last message are there, in order.
    let first = q.receive(1, LEASE).await.unwrap().pop().unwrap();
    assert_eq!(first.id, ids[0]);
    assert_eq!(first.body, b"m0");
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn send_batch_of_100_000_in_its_own_transaction<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..100_000).map(|i| Message::new(format!("{i}"))).collect();
    let sent = q.send_batch(batch).await.unwrap();
    assert_eq!(sent.len(), 100_000);
    assert!(sent.iter().all(|s| !s.duplicate));
    assert_eq!(q.stats().await.unwrap().ready, 100_000);
    db.drop().await;
}

pub(crate) async fn a_batch_larger_than_max_allowed_packet_is_split_and_still_atomic<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let packet = client.server().max_allowed_packet as usize;
    // Bodies adding up to three times max_allowed_packet force several statements.
    let body = vec![b'x'; 256 * 1024];
    let n = 3 * packet / body.len() + 1;
    let batch: Vec<Message> = (0..n).map(|_| Message::new(body.clone())).collect();

    let mut tx = client.begin().await.unwrap();
    q.send_batch_in(&mut tx, batch.clone()).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(db.count("messages").await, 0, "rolled back: nothing left");
    assert_eq!(db.count("ready").await, 0);

    q.send_batch(batch).await.unwrap();
    assert_eq!(db.count("messages").await, n as i64);
    db.drop().await;
}

pub(crate) async fn rollback_of_the_callers_transaction_leaves_nothing_of_any_kind<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    db.exec("CREATE TABLE orders (id INT PRIMARY KEY)", &[])
        .await;
    let mut tx = client.begin().await.unwrap();
    B::execute(&mut *tx, "INSERT INTO orders (id) VALUES (1)", &[]).await;
    let batch = vec![
        Message::new("plain"),
        Message::new("delayed").delay(Duration::from_secs(60)),
        Message::new("keyed-1").ordering_key("k"),
        Message::new("keyed-2").ordering_key("k"),
        Message::new("idempotent").idempotency_key("once"),
    ];
    q.send_batch_in(&mut tx, batch).await.unwrap();
    drop(tx); // an application error: the transaction rolls back
    for table in [
        "messages",
        "ready",
        "scheduled",
        "blocked",
        "key_heads",
        "dedup",
    ] {
        assert_eq!(db.count(table).await, 0, "{table} after rollback");
    }
    let orders: i64 = db.scalar("SELECT COUNT(*) FROM orders").await;
    assert_eq!(orders, 0);

    // The same idempotency key is free again, since its first use rolled back.
    assert!(
        !q.send(Message::new("x").idempotency_key("once"))
            .await
            .unwrap()
            .duplicate
    );
    db.drop().await;
}

pub(crate) async fn a_bad_message_in_a_batch_rejects_the_whole_batch<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let mut batch: Vec<Message> = (0..1000).map(|i| Message::new(format!("{i}"))).collect();
    batch.push(Message::new(vec![0u8; client.max_payload_bytes() + 1]));
    assert!(matches!(
        q.send_batch(batch).await,
        Err(sqlmq::Error::PayloadTooLarge { .. })
    ));
    assert_eq!(db.count("messages").await, 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [batch_of_100_000_is_invisible_until_commit_then_complete, send_batch_of_100_000_in_its_own_transaction, a_batch_larger_than_max_allowed_packet_is_split_and_still_atomic, rollback_of_the_callers_transaction_leaves_nothing_of_any_kind, a_bad_message_in_a_batch_rejects_the_whole_batch]
);
