//! `Claim`: the claim in a transaction of its own, in the caller's (`claim_in`), and the take
//! (`take_in`).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use sqlmq_testkit::Value;

use super::{
    LONG, MAX_DATE_SPAN, SuiteBackend, claim, delivered, entry, fixture, ids, ids_in, insert_rows,
    messages, now_us, put, queue, retry, row_of, sorted,
};
use crate::domain::{Message, time_from_micros};
use crate::store::rows::ClaimRequest;
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// A claim request of the owner "suite".
fn request(queue_id: i32, n: usize, lease: Duration) -> ClaimRequest<'static> {
    ClaimRequest {
        queue_id,
        n,
        lease,
        owner: "suite",
    }
}

/// A take of `n` from queue `q` that finds nothing late: what it took.
async fn take<B: SuiteBackend>(
    store: &crate::store::SqlStore<B>,
    conn: &mut B::Connection,
    q: i32,
    n: usize,
) -> Vec<crate::domain::Delivery> {
    let (taken, late) =
        <B as crate::store::Claim>::take_in(store, conn, &request(q, n, LONG), &|_| false)
            .await
            .unwrap();
    assert!(late.is_empty());
    taken
}

/// Claims hand messages out by priority, then enqueue order, n at a time (n larger than
/// what is ready gives what is ready, zero gives nothing), each its first attempt under token
/// 1, with everything the message carries; the moved rows leave `ready` for `leases`.
async fn claims_by_priority_then_id<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let msgs = vec![
        Message::new("m0").priority(5),
        Message::new("m1").priority(-1),
        Message::new(vec![0u8, 255, 10])
            .header("a", "1")
            .header("b", "two")
            .idempotency_key("idem"),
        Message::new("m3").priority(-1),
        Message::new("m4").priority(5),
        Message::new("m5").priority(i16::MAX).ordering_key("ok"),
        Message::new("m6").priority(i16::MIN),
    ];
    let before = now_us(&client).await;
    put(&client, q, &msgs).await;

    assert!(claim(&client, q, 0, LONG).await.is_empty());
    assert_eq!(db.count("ready").await, 7);

    let first = claim(&client, q, 4, LONG).await;
    let after = now_us(&client).await;
    assert_eq!(
        delivered(&first),
        [msgs[6].id(), msgs[1].id(), msgs[3].id(), msgs[2].id()]
    );
    let d = &first[3];
    assert_eq!(d.body, [0u8, 255, 10]);
    assert_eq!(
        d.headers,
        BTreeMap::from([("a".into(), "1".into()), ("b".into(), "two".into())])
    );
    assert_eq!(d.idempotency_key.as_deref(), Some("idem"));
    assert_eq!((d.ordering_key.as_deref(), d.priority), (None, 0));
    assert_eq!((d.partition, d.offset), (None, None));
    for d in &first {
        assert_eq!((d.attempt, d.token), (1, 1));
        assert!(d.enqueued_at >= time_from_micros(before - 1_000));
        assert!(d.enqueued_at <= time_from_micros(after + 1_000));
        assert!(d.lease_expires_at >= time_from_micros(before) + LONG);
        assert!(d.lease_expires_at <= time_from_micros(after + 1_000) + LONG);
    }
    assert_eq!(first[0].body, b"m6");

    let rest = claim(&client, q, 100, LONG).await;
    assert_eq!(delivered(&rest), [msgs[0].id(), msgs[4].id(), msgs[5].id()]);
    assert_eq!(rest[2].ordering_key.as_deref(), Some("ok"));
    assert!(claim(&client, q, 100, LONG).await.is_empty());

    assert_eq!(db.count("ready").await, 0);
    assert_eq!(ids_in(&db, "leases").await, sorted(ids(&msgs)));
    assert_eq!(db.count("messages").await, 7);
    for m in &msgs {
        let row = row_of(&db, "leases", "queue_id, token, attempts", m.id())
            .await
            .unwrap();
        assert_eq!(row, [i64::from(q), 1, 1]);
    }
    let owners = db
        .query("SELECT DISTINCT owner FROM sqlmq_leases", &[])
        .await;
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0][0].text(), "suite");
    let key = db
        .query(
            "SELECT ordering_key FROM sqlmq_leases WHERE id = ?",
            &[Value::from(msgs[5].id().bytes())],
        )
        .await;
    assert_eq!(key[0][0].text(), "ok");
    db.drop().await;
}

/// A paused queue gives nothing to any claim or take, and leaves its messages ready; resumed,
/// it gives them.
async fn a_paused_queue_gives_nothing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 3);
    put(&client, q, &msgs).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(store.set_paused(&mut conn, "q", true).await.unwrap());
    drop(conn);
    assert!(claim(&client, q, 10, LONG).await.is_empty());
    let mut tx = client.begin().await.unwrap();
    assert!(
        <B as crate::store::Claim>::claim_in(store, &mut tx, &request(q, 10, LONG))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(take::<B>(store, &mut tx, q, 10).await.is_empty());
    tx.commit().await.unwrap();
    assert_eq!(ids_in(&db, "ready").await, ids(&msgs));
    assert_eq!(db.count("leases").await, 0);

    let mut conn = client.pool().acquire().await.unwrap();
    assert!(store.set_paused(&mut conn, "q", false).await.unwrap());
    drop(conn);
    assert_eq!(delivered(&claim(&client, q, 10, LONG).await), ids(&msgs));
    db.drop().await;
}

/// A claim takes only its queue's messages: another queue, or one that does not exist, gives
/// nothing.
async fn claims_stay_in_their_queue<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (a, b) = (queue(&client, "a").await, queue(&client, "b").await);
    let msgs = messages("m", 2);
    put(&client, a, &msgs).await;
    assert!(claim(&client, b, 10, LONG).await.is_empty());
    assert!(claim(&client, i32::MAX, 10, LONG).await.is_empty());
    let mut tx = client.begin().await.unwrap();
    assert!(take::<B>(client.store(), &mut tx, b, 10).await.is_empty());
    tx.commit().await.unwrap();
    assert_eq!(db.count("ready").await, 2);
    assert_eq!(delivered(&claim(&client, a, 10, LONG).await), ids(&msgs));
    db.drop().await;
}

/// Each claim hands out the next token and attempt after those the message kept, and the
/// lease row holds them.
async fn tokens_and_attempts_count_up<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let m = Message::new("m");
    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, std::slice::from_ref(&m)).await;
    let mut e = entry(&m);
    e.attempts = 3;
    e.token = 41;
    store.place(&mut tx, q, &[(e, 0)]).await.unwrap();
    tx.commit().await.unwrap();

    let mut tokens = Vec::new();
    for round in 0..3 {
        let d = claim(&client, q, 1, LONG).await.remove(0);
        assert_eq!(d.attempt, 4 + round);
        tokens.push(d.token);
        let row = row_of(&db, "leases", "token, attempts", m.id())
            .await
            .unwrap();
        assert_eq!(row, [d.token as i64, i64::from(d.attempt)]);
        // Back in line at once, keeping the attempt.
        let mut conn = client.pool().acquire().await.unwrap();
        store
            .fail_queue(&mut conn, q, &d.receipt(), &|n| {
                retry(n, Duration::ZERO, "again")
            })
            .await
            .unwrap();
    }
    assert_eq!(tokens, [42, 43, 44]);
    db.drop().await;
}

/// The claim in the caller's transaction goes with it: a rollback puts the messages back in
/// `ready`, a commit leaves them leased.
async fn claim_in_follows_the_transaction<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 3);
    put(&client, q, &msgs).await;

    let mut tx = client.begin().await.unwrap();
    let got = <B as crate::store::Claim>::claim_in(store, &mut tx, &request(q, 2, LONG))
        .await
        .unwrap();
    assert_eq!(delivered(&got), ids(&msgs[..2]));
    tx.rollback().await.unwrap();
    assert_eq!(ids_in(&db, "ready").await, ids(&msgs));
    assert_eq!(db.count("leases").await, 0);

    let mut tx = client.begin().await.unwrap();
    let got = <B as crate::store::Claim>::claim_in(store, &mut tx, &request(q, 2, LONG))
        .await
        .unwrap();
    assert_eq!(delivered(&got), ids(&msgs[..2]));
    assert_eq!(got[0].token, 1, "the rolled-back claim handed nothing out");
    tx.commit().await.unwrap();
    assert_eq!(ids_in(&db, "ready").await, ids(&msgs[2..]));
    assert_eq!(ids_in(&db, "leases").await, ids(&msgs[..2]));
    db.drop().await;
}

/// The take removes messages in the claim's order, rows and all, without a lease; a
/// rollback puts them back; a taken keyed message lets its key move on.
async fn take_in_removes_in_claim_order<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = vec![
        Message::new("a").priority(2),
        Message::new("b").priority(1),
        Message::new("k0").ordering_key("k"),
        Message::new("k1").ordering_key("k"),
    ];
    put(&client, q, &msgs).await;

    let mut tx = client.begin().await.unwrap();
    let taken = take::<B>(store, &mut tx, q, 2).await;
    assert_eq!(delivered(&taken), [msgs[2].id(), msgs[1].id()]);
    tx.rollback().await.unwrap();
    assert_eq!(db.count("messages").await, 4);
    assert_eq!(db.count("ready").await, 3);

    let mut tx = client.begin().await.unwrap();
    let taken = take::<B>(store, &mut tx, q, 2).await;
    assert_eq!(delivered(&taken), [msgs[2].id(), msgs[1].id()]);
    assert_eq!(taken[0].ordering_key.as_deref(), Some("k"));
    assert_eq!(
        (taken[0].body.as_slice(), taken[0].attempt),
        (&b"k0"[..], 1)
    );
    tx.commit().await.unwrap();
    assert_eq!(
        ids_in(&db, "messages").await,
        sorted(vec![msgs[0].id(), msgs[3].id()])
    );
    // The key's next message is its head now.
    assert_eq!(
        ids_in(&db, "ready").await,
        sorted(vec![msgs[0].id(), msgs[3].id()])
    );
    assert_eq!(db.count("blocked").await, 0);
    assert_eq!(db.count("leases").await, 0);

    let mut tx = client.begin().await.unwrap();
    let taken = take::<B>(store, &mut tx, q, 100).await;
    assert_eq!(delivered(&taken), [msgs[3].id(), msgs[0].id()]);
    assert!(take::<B>(store, &mut tx, q, 100).await.is_empty());
    tx.commit().await.unwrap();
    assert_eq!(db.count("messages").await, 0);
    assert_eq!(db.count("key_heads").await, 0);
    db.drop().await;
}

/// What a take finds late (the engine's pick) is claimed instead, leased for the request's
/// lease with the next token: its message row stays, its lease is written; the rest are
/// removed as ever.
async fn a_take_claims_what_it_finds_late<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 3);
    put(&client, q, &msgs).await;
    let late_id = msgs[1].id();
    let mut tx = client.begin().await.unwrap();
    let (taken, late) =
        <B as crate::store::Claim>::take_in(store, &mut tx, &request(q, 10, LONG), &|d| {
            d.id == late_id
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(delivered(&taken), [msgs[0].id(), msgs[2].id()]);
    assert_eq!(delivered(&late), [late_id]);
    assert_eq!((late[0].token, late[0].attempt), (1, 1));
    assert_eq!(db.count("ready").await, 0);
    assert_eq!(ids_in(&db, "leases").await, vec![late_id]);
    assert_eq!(ids_in(&db, "messages").await, vec![late_id]);
    db.drop().await;
}

/// More messages than one statement's list: one claim and one take move them all, in order.
async fn the_largest_claim_and_take<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (a, b) = (queue(&client, "a").await, queue(&client, "b").await);
    let (ma, mb) = (messages("a", MANY), messages("b", MANY));
    put(&client, a, &ma).await;
    put(&client, b, &mb).await;

    let got = claim(&client, a, MANY + 10, LONG).await;
    assert_eq!(delivered(&got), ids(&ma));
    assert!(got.iter().all(|d| d.token == 1));
    assert_eq!(db.count("leases").await, MANY as i64);

    let mut tx = client.begin().await.unwrap();
    let taken = take::<B>(store, &mut tx, b, MANY + 10).await;
    assert_eq!(delivered(&taken), ids(&mb));
    tx.commit().await.unwrap();
    assert_eq!(db.count("ready").await, 0);
    assert_eq!(ids_in(&db, "messages").await, sorted(ids(&ma)));
    db.drop().await;
}

/// A lease of `Duration::MAX` is capped (a thousand years), neither an error nor expired.
async fn the_longest_lease<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", 2)).await;
    let before = now_us(&client).await;
    let got = claim(&client, q, 1, Duration::MAX).await;
    assert_eq!(got.len(), 1);
    let ends = got[0].lease_expires_at;
    assert!(ends >= time_from_micros(before) + MAX_DATE_SPAN);
    assert!(ends <= SystemTime::now() + MAX_DATE_SPAN + Duration::from_secs(60));
    let mut tx = client.begin().await.unwrap();
    let got = <B as crate::store::Claim>::claim_in(store, &mut tx, &request(q, 1, Duration::MAX))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert!(!store.any_expired(&mut tx, q).await.unwrap());
    tx.commit().await.unwrap();
    assert_eq!(db.count("leases").await, 2);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    claims_by_priority_then_id,
    a_paused_queue_gives_nothing,
    claims_stay_in_their_queue,
    tokens_and_attempts_count_up,
    claim_in_follows_the_transaction,
    take_in_removes_in_claim_order,
    a_take_claims_what_it_finds_late,
    the_largest_claim_and_take,
    the_longest_lease,
]);
