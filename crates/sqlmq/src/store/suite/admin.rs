//! `store/body/admin.rs`: counts, the age of the oldest ready message, cancel, purge, key repair.

use std::collections::HashMap;

use sqlmq_testkit::{TestDb, Value};

use super::{
    LONG, SuiteBackend, bury, claim, fixture, ids, ids_in, messages, now_us, put, queue, sorted,
    wait_past,
};
use crate::Client;
use crate::domain::{Cancelled, Error, Message, MessageId, Receipt};
use crate::store::rows::{PurgeScope, QueueCounts};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// A queue's messages in every state.
struct Spread {
    /// Ready, without a key.
    ready: Vec<Message>,
    /// Delayed by an hour.
    scheduled: Message,
    /// Key "k": the head (ready), then two blocked behind it.
    keyed: Vec<Message>,
    /// In flight.
    leased: MessageId,
    /// A dead letter.
    dead: MessageId,
}

/// Put a [`Spread`] in queue `q`.
async fn spread<B: SuiteBackend>(client: &Client<B>, q: i32) -> Spread {
    let ready = messages("r", 2);
    let scheduled = Message::new("s").delay(LONG);
    let keyed: Vec<Message> = (0..3)
        .map(|i| Message::new(format!("k{i}")).ordering_key("k"))
        .collect();
    let first = vec![
        Message::new("leased").priority(-10),
        Message::new("dead").priority(-9),
    ];
    put(client, q, &first).await;
    put(client, q, &ready).await;
    put(client, q, std::slice::from_ref(&scheduled)).await;
    put(client, q, &keyed).await;
    let got = claim(client, q, 2, LONG).await;
    assert_eq!(got[0].id, first[0].id());
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .fail_queue(&mut conn, q, &got[1].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    Spread {
        ready,
        scheduled,
        keyed,
        leased: first[0].id(),
        dead: first[1].id(),
    }
}

/// The counts of every queue with messages, by state.
async fn counts<B: SuiteBackend>(client: &Client<B>) -> HashMap<i32, QueueCounts> {
    let mut conn = client.reader().acquire().await.unwrap();
    client.store().counts(&mut conn).await.unwrap()
}

/// Counts are per queue and per state, for the queues that have messages only.
async fn counts_by_queue_and_state<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    assert!(counts(&client).await.is_empty());
    let (q, other, _empty) = (
        queue(&client, "q").await,
        queue(&client, "other").await,
        queue(&client, "empty").await,
    );
    spread(&client, q).await;
    put(&client, other, &messages("o", 1)).await;
    let expected = HashMap::from([
        (
            q,
            QueueCounts {
                ready: 3,
                scheduled: 1,
                blocked: 2,
                waiting: 0,
                in_flight: 1,
                dead: 1,
            },
        ),
        (
            other,
            QueueCounts {
                ready: 1,
                ..QueueCounts::default()
            },
        ),
    ]);
    assert_eq!(counts(&client).await, expected);
    db.drop().await;
}

/// The age of the oldest ready message, over every priority; none for a queue without ready
/// messages (empty, only delayed, unknown).
async fn oldest_ready_age<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (q, delayed) = (queue(&client, "q").await, queue(&client, "delayed").await);
    let age = |q: i32| {
        let client = client.clone();
        async move {
            let mut conn = client.reader().acquire().await.unwrap();
            client.store().oldest_ready_us(&mut conn, q).await.unwrap()
        }
    };
    assert_eq!(age(q).await, None);
    assert_eq!(age(i32::MAX).await, None);
    put(&client, delayed, &[Message::new("later").delay(LONG)]).await;
    assert_eq!(age(delayed).await, None);

    // The oldest has the lowest priority: the age is not the first priority's.
    let start = now_us(&client).await;
    put(&client, q, &[Message::new("old").priority(5)]).await;
    wait_past(&client, start + 100_000).await;
    put(&client, q, &[Message::new("new").priority(-5)]).await;
    let a = age(q).await.unwrap();
    let elapsed = now_us(&client).await - start;
    assert!(a >= 100_000 - 1_000, "{a} µs");
    assert!(a <= elapsed + 1_000, "{a} µs, {elapsed} µs elapsed");
    db.drop().await;
}

/// Cancel `id` in queue `q`, in a transaction.
async fn cancel<B: SuiteBackend>(
    client: &Client<B>,
    q: i32,
    id: MessageId,
) -> crate::Result<Cancelled> {
    let mut tx = client.begin().await.unwrap();
    let done = client.store().cancel(&mut tx, q, id, "test").await;
    tx.commit().await.unwrap();
    done
}

/// Cancel removes a message that is ready, delayed, blocked behind its key or dead, and lets
/// its key move on when it was the head; a message in flight has its lease moved to `cancels`
/// (kept until the cancel ends, which removes it); an unknown id, another queue's, or one
/// cancelled already is not found.
async fn cancel_in_each_state<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let s = spread(&client, q).await;
    let o = Message::new("o");
    put(&client, other, std::slice::from_ref(&o)).await;
    // A delayed head: its successor is blocked.
    let delayed_key = vec![
        Message::new("dh").ordering_key("d").delay(LONG),
        Message::new("d1").ordering_key("d"),
    ];
    put(&client, q, &delayed_key).await;
    let messages_before = db.count("messages").await;

    for id in [MessageId::new(), o.id()] {
        match cancel(&client, q, id).await {
            Err(Error::MessageNotFound(got)) => assert_eq!(got, id),
            other => panic!("{id}: {other:?}"),
        }
    }
    // In flight: its lease moves to `cancels`, the message stays; a second cancel is harmless.
    for _ in 0..2 {
        assert_eq!(
            cancel(&client, q, s.leased).await.unwrap(),
            Cancelled::Running
        );
    }
    assert_eq!(db.count("messages").await, messages_before);
    assert_eq!(db.count("leases").await, 0);
    assert_eq!(ids_in(&db, "cancels").await, [s.leased]);
    let mut conn = client.pool().acquire().await.unwrap();
    let cancelled = client
        .store()
        .cancelled_receipts(&mut conn, q)
        .await
        .unwrap();
    assert_eq!(
        client
            .store()
            .cancel_reason(&mut conn, s.leased)
            .await
            .unwrap()
            .as_deref(),
        Some("test")
    );
    drop(conn);
    assert_eq!(cancelled.len(), 1);
    let stale = Receipt {
        id: s.leased,
        token: cancelled[0].token + 1,
    };
    for (receipt, ends) in [(stale, false), (cancelled[0], true), (cancelled[0], false)] {
        let mut tx = client.begin().await.unwrap();
        let ended = client
            .store()
            .end_cancel(&mut tx, q, receipt)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(ended, ends, "{receipt:?}");
    }
    assert_eq!(db.count("cancels").await, 0);
    assert_eq!(db.count("messages").await, messages_before - 1);

    cancel(&client, q, s.ready[0].id()).await.unwrap();
    cancel(&client, q, s.scheduled.id()).await.unwrap();
    cancel(&client, q, s.dead).await.unwrap();
    // The last blocked one: the head stays.
    cancel(&client, q, s.keyed[2].id()).await.unwrap();
    assert_eq!(
        ids_in(&db, "blocked").await,
        sorted(vec![s.keyed[1].id(), delayed_key[1].id()])
    );
    // The head: the next one takes its place.
    cancel(&client, q, s.keyed[0].id()).await.unwrap();
    cancel(&client, q, delayed_key[0].id()).await.unwrap();
    assert_eq!(db.count("blocked").await, 0);
    assert_eq!(
        ids_in(&db, "ready").await,
        sorted(vec![
            s.ready[1].id(),
            s.keyed[1].id(),
            delayed_key[1].id(),
            o.id()
        ])
    );
    // The last of the key: no key is left.
    cancel(&client, q, s.keyed[1].id()).await.unwrap();
    assert_eq!(db.count("key_heads").await, 1);
    match cancel(&client, q, s.keyed[1].id()).await {
        Err(Error::MessageNotFound(id)) => assert_eq!(id, s.keyed[1].id()),
        other => panic!("{other:?}"),
    }

    assert_eq!(db.count("scheduled").await, 0);
    assert_eq!(db.count("dead").await, 0);
    assert_eq!(
        ids_in(&db, "messages").await,
        sorted(vec![s.ready[1].id(), delayed_key[1].id(), o.id()])
    );
    db.drop().await;
}

/// Purge `scope` of queue `q` with `limit`, in a transaction.
async fn purge<B: SuiteBackend>(
    client: &Client<B>,
    q: i32,
    scope: PurgeScope,
    limit: usize,
) -> usize {
    let mut tx = client.begin().await.unwrap();
    let n = client
        .store()
        .purge_batch(&mut tx, q, scope, limit)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    n
}

/// A live purge removes up to the limit of each live state and leaves dead letters; a dead
/// purge removes dead letters only; other queues keep everything; the keys of purged heads
/// are repaired afterwards.
async fn purge_by_scope<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    spread(&client, q).await;
    spread(&client, other).await;
    let before = counts(&client).await[&other];

    assert_eq!(purge(&client, q, PurgeScope::Live, 0).await, 0);
    assert_eq!(purge(&client, q, PurgeScope::Dead, 0).await, 0);
    // One of each live state: ready, scheduled, blocked, in flight.
    assert_eq!(purge(&client, q, PurgeScope::Live, 1).await, 4);
    assert_eq!(
        counts(&client).await[&q],
        QueueCounts {
            ready: 2,
            scheduled: 0,
            blocked: 1,
            waiting: 0,
            in_flight: 0,
            dead: 1,
        }
    );
    assert_eq!(purge(&client, q, PurgeScope::Live, 100).await, 3);
    assert_eq!(purge(&client, q, PurgeScope::Live, 100).await, 0);
    assert_eq!(counts(&client).await[&q].dead, 1);
    assert_eq!(purge(&client, q, PurgeScope::Dead, 100).await, 1);
    assert_eq!(purge(&client, q, PurgeScope::Dead, 100).await, 0);
    assert!(!counts(&client).await.contains_key(&q));
    assert_eq!(counts(&client).await[&other], before);
    assert_eq!(db.count("messages").await, 8, "the other queue's");

    // The purged key's row is left to the repair.
    let mut conn = client.pool().acquire().await.unwrap();
    let store = client.store();
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 1);
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 0);
    assert_eq!(store.repair_keys(&mut conn, other).await.unwrap(), 0);
    drop(conn);
    assert_eq!(db.count("key_heads").await, 1, "the other queue's");
    db.drop().await;
}

/// More messages than one statement's list, purged at once.
async fn purge_many<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let now = messages("n", MANY);
    let later: Vec<Message> = messages("l", MANY)
        .into_iter()
        .map(|m| m.delay(LONG))
        .collect();
    put(&client, q, &now).await;
    put(&client, q, &later).await;
    assert_eq!(
        purge(&client, q, PurgeScope::Live, 2 * MANY).await,
        2 * MANY
    );
    assert_eq!(db.count("messages").await, 0);
    assert_eq!(db.count("ready").await, 0);
    assert_eq!(db.count("scheduled").await, 0);
    db.drop().await;
}

/// Delete message `id` from `ready` and `messages` behind the store's back, as a purge that
/// took a head would.
async fn remove_behind_the_back<B: SuiteBackend>(db: &TestDb<B>, id: MessageId) {
    for table in ["ready", "messages"] {
        let done = db
            .exec(
                &format!("DELETE FROM sqlmq_{table} WHERE id = ?"),
                &[Value::from(id.bytes())],
            )
            .await;
        assert_eq!(done, 1);
    }
}

/// A key whose head is gone moves on to its next message at the repair, one step at a time;
/// keys with their heads are left alone.
async fn repair_orphaned_keys<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 0);
    drop(conn);
    let k: Vec<Message> = (0..3)
        .map(|i| Message::new(format!("k{i}")).ordering_key("k"))
        .collect();
    let j = vec![Message::new("j").ordering_key("j")];
    put(&client, q, &k).await;
    put(&client, q, &j).await;

    remove_behind_the_back(&db, k[0].id()).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 1);
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 0);
    drop(conn);
    assert_eq!(
        ids_in(&db, "ready").await,
        sorted(vec![k[1].id(), j[0].id()])
    );
    assert_eq!(ids_in(&db, "blocked").await, [k[2].id()]);

    // The last one gone: the key goes too.
    remove_behind_the_back(&db, k[1].id()).await;
    db.exec(
        "DELETE FROM sqlmq_blocked WHERE id = ?",
        &[Value::from(k[2].id().bytes())],
    )
    .await;
    db.exec(
        "DELETE FROM sqlmq_messages WHERE id = ?",
        &[Value::from(k[2].id().bytes())],
    )
    .await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 1);
    assert_eq!(store.repair_keys(&mut conn, q).await.unwrap(), 0);
    drop(conn);
    assert_eq!(db.count("key_heads").await, 1);
    assert_eq!(ids_in(&db, "ready").await, ids(&j));
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    counts_by_queue_and_state,
    oldest_ready_age,
    cancel_in_each_state,
    purge_by_scope,
    purge_many,
    repair_orphaned_keys,
]);
