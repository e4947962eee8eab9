//! `store/body/maintain.rs`: due messages into `ready`, the probes of due messages and ended leases, and
//! the pruning of idempotency keys.

use std::time::Duration;

use super::{
    DEADLINE, LONG, SuiteBackend, claim, entry, fixture, ids, ids_in, insert_rows, messages,
    now_us, put, queue, row_of, sorted, wait_past,
};
use crate::Client;
use crate::domain::{Message, MessageId};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// Wait until queue `q` has due messages.
async fn wait_due<B: SuiteBackend>(client: &Client<B>, q: i32) {
    sqlmq_testkit::eventually_async(DEADLINE, "a due message", || async move {
        let mut conn = client.reader().acquire().await.unwrap();
        client
            .store()
            .any_due(&mut conn, q)
            .await
            .unwrap()
            .then_some(())
    })
    .await;
}

/// Delayed messages are due once their time has come, not before; promotion moves up to the
/// limit of them, the earliest first (not the first enqueued), into `ready` with their
/// attempts and tokens; other queues' and future ones stay.
async fn promote_due_messages<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(!store.any_due(&mut conn, q).await.unwrap());
    assert_eq!(store.promote_due(&mut conn, q, 10).await.unwrap(), 0);
    drop(conn);

    // Enqueued in this order; due in the order late (never), third, second, first.
    let msgs = messages("m", 4);
    let delays_us = [60_000, 40_000, 1_000, 3_600_000_000];
    let start = now_us(&client).await;
    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, &msgs).await;
    let entries: Vec<_> = msgs
        .iter()
        .zip(delays_us)
        .enumerate()
        .map(|(i, (m, d))| {
            let mut e = entry(m);
            e.attempts = i as i32;
            e.token = 100 + i as i64;
            (e, d)
        })
        .collect();
    store.place(&mut tx, q, &entries).await.unwrap();
    tx.commit().await.unwrap();
    put(
        &client,
        other,
        &[Message::new("o").delay(Duration::from_millis(1))],
    )
    .await;

    wait_due(&client, other).await;
    wait_past(&client, start + 200_000).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(store.any_due(&mut conn, q).await.unwrap());
    assert_eq!(store.promote_due(&mut conn, q, 0).await.unwrap(), 0);
    assert_eq!(store.promote_due(&mut conn, q, 1).await.unwrap(), 1);
    drop(conn);
    assert_eq!(ids_in(&db, "ready").await, [msgs[2].id()]);
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(store.promote_due(&mut conn, q, 10).await.unwrap(), 2);
    assert!(!store.any_due(&mut conn, q).await.unwrap());
    assert_eq!(store.promote_due(&mut conn, q, 10).await.unwrap(), 0);
    assert!(store.any_due(&mut conn, other).await.unwrap());
    drop(conn);

    assert_eq!(ids_in(&db, "ready").await, ids(&msgs[..3]));
    assert_eq!(ids_in(&db, "scheduled").await.len(), 2);
    for (i, m) in msgs[..3].iter().enumerate() {
        let row = row_of(&db, "ready", "attempts, token", m.id()).await;
        assert_eq!(row, Some(vec![i as i64, 100 + i as i64]));
    }
    db.drop().await;
}

/// More due messages than one statement's list, promoted at once.
async fn promote_many<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let msgs: Vec<Message> = messages("m", MANY)
        .into_iter()
        .map(|m| m.delay(Duration::from_millis(1)))
        .collect();
    put(&client, q, &msgs).await;
    assert_eq!(db.count("scheduled").await, MANY as i64);
    wait_due(&client, q).await;
    let start = now_us(&client).await;
    wait_past(&client, start + 5_000).await;
    let mut conn = client.pool().acquire().await.unwrap();
    let promoted = client
        .store()
        .promote_due(&mut conn, q, MANY * 2)
        .await
        .unwrap();
    drop(conn);
    assert_eq!(promoted, MANY);
    assert_eq!(ids_in(&db, "ready").await, sorted(ids(&msgs)));
    assert_eq!(db.count("scheduled").await, 0);
    db.drop().await;
}

/// A queue has ended leases once a lease's time is over, not while leases are live; other
/// queues' do not count.
async fn any_expired_sees_ended_leases<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    put(&client, q, &messages("m", 2)).await;
    put(&client, other, &messages("o", 1)).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(!store.any_expired(&mut conn, q).await.unwrap());
    drop(conn);
    claim(&client, q, 1, LONG).await;
    claim(&client, q, 1, Duration::MAX).await;
    claim(&client, other, 1, Duration::from_millis(1)).await;
    let client = &client;
    sqlmq_testkit::eventually_async(DEADLINE, "the other queue's lease to end", || async move {
        let mut conn = client.reader().acquire().await.unwrap();
        store
            .any_expired(&mut conn, other)
            .await
            .unwrap()
            .then_some(())
    })
    .await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(!store.any_expired(&mut conn, q).await.unwrap());
    assert!(!store.any_expired(&mut conn, i32::MAX).await.unwrap());
    drop(conn);
    db.drop().await;
}

/// Keys whose window has passed are pruned, up to the limit, the others stay; a limit of
/// zero prunes nothing.
async fn prune_old_keys<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let id = MessageId::new();
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(store.prune_dedup(&mut conn, 10).await.unwrap(), 0);
    store
        .record_keys(&mut conn, q, &[("a", id), ("b", id)], Duration::ZERO)
        .await
        .unwrap();
    store
        .record_keys(&mut conn, other, &[("a", id)], Duration::ZERO)
        .await
        .unwrap();
    store
        .record_keys(&mut conn, q, &[("c", id)], LONG)
        .await
        .unwrap();
    store
        .record_keys(&mut conn, q, &[("d", id)], Duration::MAX)
        .await
        .unwrap();
    assert_eq!(store.prune_dedup(&mut conn, 0).await.unwrap(), 0);
    assert_eq!(store.prune_dedup(&mut conn, 2).await.unwrap(), 2);
    assert_eq!(store.prune_dedup(&mut conn, 10).await.unwrap(), 1);
    assert_eq!(store.prune_dedup(&mut conn, 10).await.unwrap(), 0);
    let left = store
        .recorded_keys(&mut conn, q, &["a", "b", "c", "d"])
        .await
        .unwrap();
    let mut left: Vec<&String> = left.keys().collect();
    left.sort();
    assert_eq!(left, ["c", "d"]);
    drop(conn);
    assert_eq!(db.count("dedup").await, 2);
    db.drop().await;
}

/// More old keys than one statement's list, pruned at once.
async fn prune_many_keys<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let names: Vec<String> = (0..MANY).map(|i| format!("k{i}")).collect();
    let keys: Vec<(&str, MessageId)> = names
        .iter()
        .map(|k| (k.as_str(), MessageId::new()))
        .collect();
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .record_keys(&mut conn, q, &keys, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(store.prune_dedup(&mut conn, MANY + 1).await.unwrap(), MANY);
    drop(conn);
    assert_eq!(db.count("dedup").await, 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    promote_due_messages,
    promote_many,
    any_expired_sees_ended_leases,
    prune_old_keys,
    prune_many_keys,
]);
