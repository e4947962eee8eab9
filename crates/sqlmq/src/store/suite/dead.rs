//! `store/body/dead.rs`: listing a queue's dead letters and putting them back.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{
    DEADLINE, LONG, SuiteBackend, bury, claim, delivered, fixture, ids, ids_in, messages, put,
    queue, receipts, retry, row_of, sorted,
};
use crate::Client;
use crate::domain::{Delivery, Message, MessageId};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// Make a claimed message a dead letter.
async fn kill<B: SuiteBackend>(client: &Client<B>, q: i32, d: &Delivery, error: &str) {
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .fail_queue(&mut conn, q, &d.receipt(), &|n| bury(n, error))
        .await
        .unwrap();
}

/// Put `ids` (or the oldest `limit`) back, in a transaction; the ids redriven, sorted.
async fn redrive<B: SuiteBackend>(
    client: &Client<B>,
    q: i32,
    ids: Option<&[MessageId]>,
    limit: usize,
) -> Vec<MessageId> {
    let mut tx = client.begin().await.unwrap();
    let done = client
        .store()
        .redrive(&mut tx, q, ids, limit)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    sorted(done)
}

/// The oldest dead letters of the queue, up to the limit, with what their messages carry
/// and their error histories; none of another queue.
async fn list_dead_letters<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        store
            .dead_letters(&mut conn, q, 10)
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    let msgs = vec![
        Message::new("first").ordering_key("k").header("h", "v"),
        Message::new("second"),
        Message::new(vec![0u8, 1, 2]),
    ];
    put(&client, q, &msgs).await;
    put(&client, other, &messages("o", 1)).await;
    let first = claim(&client, q, 1, LONG).await.remove(0);
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .fail_queue(&mut conn, q, &first.receipt(), &|n| {
            retry(n, Duration::ZERO, "once")
        })
        .await
        .unwrap();
    drop(conn);
    for expected in &msgs {
        let d = claim(&client, q, 1, LONG).await.remove(0);
        assert_eq!(d.id, expected.id());
        kill(&client, q, &d, "dead").await;
    }
    let o = claim(&client, other, 1, LONG).await.remove(0);
    kill(&client, other, &o, "dead").await;

    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        store
            .dead_letters(&mut conn, q, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let two = store.dead_letters(&mut conn, q, 2).await.unwrap();
    let all = store.dead_letters(&mut conn, q, 100).await.unwrap();
    drop(conn);
    assert_eq!(
        two.iter().map(|d| d.id).collect::<Vec<_>>(),
        ids(&msgs[..2])
    );
    assert_eq!(all.iter().map(|d| d.id).collect::<Vec<_>>(), ids(&msgs));

    let d = &all[0];
    assert_eq!(d.attempts, 2);
    assert_eq!(d.body, b"first");
    assert_eq!(d.ordering_key.as_deref(), Some("k"));
    assert_eq!(d.headers, BTreeMap::from([("h".into(), "v".into())]));
    let errors: Vec<(u32, &str)> = d
        .errors
        .iter()
        .map(|e| (e.attempt, e.error.as_str()))
        .collect();
    assert_eq!(errors, [(1, "once"), (2, "dead")]);
    assert!(d.died_at >= d.enqueued_at);
    assert_eq!(
        (d.partition, d.offset, d.member.as_deref()),
        (None, None, None)
    );
    assert_eq!(
        (all[1].attempts, all[2].body.as_slice()),
        (1, &[0u8, 1, 2][..])
    );
    assert_eq!(all[2].ordering_key, None);
    assert!(all[2].headers.is_empty());
    db.drop().await;
}

/// A redrive by id puts those of the queue's dead letters back in `ready`, attempts reset and
/// token kept (the next claim hands out the next one); ids unknown, not dead or another
/// queue's are not redriven, and an empty list redrives nothing.
async fn redrive_by_id<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    put(&client, q, &messages("m", 3)).await;
    put(&client, other, &messages("o", 1)).await;
    let d = claim(&client, q, 3, LONG).await;
    for x in &d[..2] {
        kill(&client, q, x, "dead").await;
    }
    let o = claim(&client, other, 1, LONG).await.remove(0);
    kill(&client, other, &o, "dead").await;

    assert!(redrive(&client, q, Some(&[][..]), 10).await.is_empty());
    let asked = [d[1].id, MessageId::new(), o.id, d[2].id];
    assert_eq!(redrive(&client, q, Some(&asked[..]), 10).await, [d[1].id]);
    assert_eq!(ids_in(&db, "ready").await, [d[1].id]);
    assert_eq!(
        row_of(&db, "ready", "attempts, token", d[1].id).await,
        Some(vec![0, 1])
    );
    assert_eq!(ids_in(&db, "dead").await, sorted(vec![d[0].id, o.id]));
    assert_eq!(ids_in(&db, "leases").await, [d[2].id]);
    let again = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&again), [d[1].id]);
    assert_eq!((again[0].attempt, again[0].token), (1, 2));
    // Redriven already: not dead any more.
    assert!(
        redrive(&client, q, Some(&[d[1].id][..]), 10)
            .await
            .is_empty()
    );
    db.drop().await;
}

/// A redrive without ids puts back the oldest dead letters, up to the limit.
async fn redrive_the_oldest<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let msgs = messages("m", 3);
    put(&client, q, &msgs).await;
    for _ in 0..3 {
        let d = claim(&client, q, 1, LONG).await.remove(0);
        kill(&client, q, &d, "dead").await;
    }
    assert!(redrive(&client, q, None, 0).await.is_empty());
    assert_eq!(redrive(&client, q, None, 2).await, ids(&msgs[..2]));
    assert_eq!(ids_in(&db, "dead").await, [msgs[2].id()]);
    assert_eq!(redrive(&client, q, None, 100).await, [msgs[2].id()]);
    assert!(redrive(&client, q, None, 100).await.is_empty());
    assert_eq!(ids_in(&db, "ready").await, ids(&msgs));
    db.drop().await;
}

/// A redriven keyed message goes behind its key: blocked behind the key's pending messages,
/// or its head when the key has none.
async fn redrive_keyed_behind_its_key<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let k: Vec<Message> = (0..2)
        .map(|i| Message::new(format!("k{i}")).ordering_key("k"))
        .collect();
    put(&client, q, &k).await;
    let head = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&head), [k[0].id()]);
    kill(&client, q, &head[0], "dead").await;
    // k1 is the head now: k0 goes behind it.
    assert_eq!(
        redrive(&client, q, Some(&[k[0].id()][..]), 10).await,
        [k[0].id()]
    );
    assert_eq!(ids_in(&db, "ready").await, [k[1].id()]);
    assert_eq!(ids_in(&db, "blocked").await, [k[0].id()]);
    let next = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&next), [k[1].id()]);
    kill(&client, q, &next[0], "dead").await;
    let last = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&last), [k[0].id()]);
    assert_eq!(last[0].attempt, 1);
    let mut tx = client.begin().await.unwrap();
    assert!(
        client
            .store()
            .ack_queue(&mut tx, q, &receipts(&last))
            .await
            .unwrap()
            .is_empty()
    );
    tx.commit().await.unwrap();
    assert_eq!(db.count("key_heads").await, 0);
    // The key has nothing pending: k1 becomes its head again.
    assert_eq!(redrive(&client, q, None, 10).await, [k[1].id()]);
    assert_eq!(ids_in(&db, "ready").await, [k[1].id()]);
    assert_eq!(db.count("blocked").await, 0);
    assert_eq!(db.count("key_heads").await, 1);
    db.drop().await;
}

/// More dead letters than one statement's list, redriven by id at once.
async fn redrive_many<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let msgs = messages("m", MANY);
    put(&client, q, &msgs).await;
    claim(&client, q, MANY, Duration::from_millis(1)).await;
    let client = &client;
    sqlmq_testkit::eventually_async(DEADLINE, "the leases to end", || async move {
        let mut conn = client.reader().acquire().await.unwrap();
        client
            .store()
            .any_expired(&mut conn, q)
            .await
            .unwrap()
            .then_some(())
    })
    .await;
    let mut conn = client.pool().acquire().await.unwrap();
    let released = client
        .store()
        .release_queue_expired(&mut conn, q, MANY, &|n| bury(n, "lease expired"))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(released.dead_lettered, MANY);
    assert_eq!(
        redrive(client, q, Some(ids(&msgs).as_slice()), MANY).await,
        ids(&msgs)
    );
    assert_eq!(db.count("ready").await, MANY as i64);
    assert_eq!(db.count("dead").await, 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    list_dead_letters,
    redrive_by_id,
    redrive_the_oldest,
    redrive_keyed_behind_its_key,
    redrive_many,
]);
