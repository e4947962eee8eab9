//! Dropped connections: a proxy between the client and the server drops, resets and stalls
//! connections in the middle of a claim, of an ack and of a send, and swallows the reply to a
//! COMMIT that the server applied. Whatever the moment: no message is lost, an id-bearing send
//! is never applied twice, no call reports Ok for what did not commit, and the same client goes
//! on working without being rebuilt.

use std::collections::HashSet;
use std::future::Future;
use std::time::{Duration, Instant};

use sqlmq::failpoints::{Pause, pause};
use sqlmq::{Client, Message, MessageId, MySql, Queue, QueueConfig};
use sqlmq_testkit::{Proxy, TestDb, Value, address_of};

const LEASE: Duration = Duration::from_secs(30);

/// A database with queue `q`, a proxy to its server, and a client whose connections all go
/// through the proxy (housekeeping rare, so that the only COMMITs are the test's own).
async fn through_proxy() -> (TestDb<MySql>, Proxy, Client<MySql>, Queue<MySql>) {
    let db = TestDb::<MySql>::new().await;
    db.client()
        .await
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let proxy = Proxy::start(address_of(&db.url)).await;
    let client = Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .housekeeping_interval(Duration::from_secs(3600))
        .open::<MySql>(&proxy.url(&db.url))
        .await
        .unwrap();
    let q = client.queue("q").await.unwrap();
    (db, proxy, client, q)
}

/// How many copies of message `id` the database holds.
async fn copies(db: &TestDb<MySql>, id: MessageId) -> i64 {
    db.query(
        "SELECT COUNT(*) FROM sqlmq_messages WHERE id = ?",
        &[Value::from(&id.as_uuid().as_bytes()[..])],
    )
    .await[0][0]
        .int()
}

/// Receive and ack everything until `n` distinct messages were acked in all; their ids.
async fn drain(q: &Queue<MySql>, n: usize, mut acked: HashSet<MessageId>) -> HashSet<MessageId> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} came back",
            acked.len()
        );
        for d in q.receive(10, LEASE).await.unwrap() {
            q.ack(d.receipt()).await.unwrap();
            assert!(acked.insert(d.id), "{} delivered again after its ack", d.id);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connection_dropped_during_a_claim_or_an_ack_loses_nothing_and_reports_no_false_ok() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    let sent: HashSet<MessageId> = q
        .send_batch((0..20).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();

    // During a claim: at the point before its COMMIT leaves the client (a claim is one call of
    // its procedure: before the call; as a script: its rows read and locked, before the writes
    // and the COMMIT, sent together), the connection dropped.
    let held = pause("claim.before_commit");
    let claim = {
        let q = q.clone();
        tokio::spawn(async move { q.receive(5, LEASE).await })
    };
    held.reached().await;
    proxy.drop_all();
    held.release();
    // The server rolled the claim back; the client claims again on a new connection (a claim
    // may run again whatever happened). Ok means those leases are committed and held.
    let got = claim
        .await
        .unwrap()
        .expect("claimed again on a new connection");
    assert_eq!(got.len(), 5);
    assert_eq!(db.count("leases").await, 5, "exactly the second claim's");
    assert_eq!(db.count("ready").await, 15);
    for d in &got {
        q.ack(d.receipt())
            .await
            .expect("the second claim's leases are held");
    }
    let mut already: HashSet<MessageId> = got.iter().map(|d| d.id).collect();

    // During an ack: at the point before its COMMIT leaves the client (a lone ack is one call
    // of its procedure: before the call; as a script: its leases locked, before the deletes
    // and the COMMIT, sent together), the connection reset.
    let got = q
        .receive(1, LEASE)
        .await
        .expect("the same client reconnects by itself");
    let receipt = got[0].receipt();
    let held = pause("ack.before_commit");
    let ack = {
        let q = q.clone();
        tokio::spawn(async move { q.ack(receipt).await })
    };
    held.reached().await;
    proxy.reset_all();
    held.release();
    // The COMMIT never left the client: its outcome is unknown, so the client asks on a new
    // connection, learns the ack did not happen, and runs it again — Ok now means committed.
    ack.await.unwrap().expect("retried on a new connection");
    assert_eq!(db.count("leases").await, 0, "Ok, so committed");
    assert_eq!(db.count("messages").await, 14);
    already.insert(got[0].id);
    let acked = drain(&q, 20, already).await;
    assert_eq!(acked, sent, "every message acked once, none lost");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_whose_reply_is_lost_is_resolved_and_never_applied_twice() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;

    // A send: the server commits, the client never hears; the send is resolved by its id.
    let id = MessageId::new();
    proxy.cut_after_next_commit();
    q.send(Message::new("once").with_id(id))
        .await
        .expect("resolved as committed");
    assert_eq!(proxy.commits_cut(), 1);
    assert_eq!(copies(&db, id).await, 1);
    // The caller retrying the same send (as after an error) does not add a second copy.
    q.send(Message::new("once").with_id(id)).await.unwrap();
    assert_eq!(copies(&db, id).await, 1);

    // An ack: applied by the server, reply lost; Ok only because it did commit.
    let got = q.receive(1, LEASE).await.unwrap();
    proxy.cut_after_next_commit();
    q.ack(got[0].receipt())
        .await
        .expect("resolved as committed");
    assert_eq!(proxy.commits_cut(), 2);
    assert_eq!(copies(&db, id).await, 0, "the ack did commit");

    // A claim: the leases are committed but their receipts never reach the client; the
    // messages come back when the leases end instead of being lost. (The claim's procedure
    // answers its rows before its COMMIT: when the server finds the connection gone while it
    // writes them, it rolls the claim back, and the client's claim, run again on a new
    // connection, gets every message under leases it holds.)
    let sent: HashSet<MessageId> = q
        .send_batch((0..3).map(|i| Message::new(format!("c{i}"))).collect())
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    proxy.cut_after_next_commit();
    let claimed = q.receive(3, Duration::from_secs(2)).await;
    assert_eq!(proxy.commits_cut(), 3);
    let mut already = HashSet::new();
    if let Ok(got) = &claimed
        && !got.is_empty()
    {
        assert_eq!(got.len(), 3, "all or nothing: {got:?}");
        for d in got {
            q.ack(d.receipt()).await.expect("a lease the client holds");
            already.insert(d.id);
        }
    }
    let direct = db.client().await.queue("q").await.unwrap();
    assert_eq!(drain(&direct, 3, already).await, sent);
    db.drop().await;
}

/// The client loses the connection while its COMMIT is still on its way to the server, so its
/// question "did it commit?" on a new connection arrives before the COMMIT does. The resolver
/// must wait for the transaction still holding the rows instead of answering from before it:
/// an ack is reported acked (not lost), a send is sent once and not called a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_still_on_its_way_is_resolved_by_waiting_for_it() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    let id = MessageId::new();
    q.send(Message::new("once").with_id(id)).await.unwrap();

    let got = q.receive(1, LEASE).await.unwrap();
    proxy.cut_before_next_commit_arrives(Duration::from_millis(500));
    let report = q.ack_batch(&[got[0].receipt()]).await.unwrap();
    assert_eq!(proxy.commits_cut(), 1);
    assert_eq!((report.acked, report.lost.len()), (1, 0), "{report:?}");
    assert_eq!(copies(&db, id).await, 0);

    let id = MessageId::new();
    proxy.cut_before_next_commit_arrives(Duration::from_millis(500));
    let sent = q.send(Message::new("twice?").with_id(id)).await.unwrap();
    assert_eq!(proxy.commits_cut(), 2);
    assert!(!sent.duplicate, "a send reported as a duplicate of itself");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(copies(&db, id).await, 1);
    db.drop().await;
}

/// Run `unit` so that its first attempt's COMMIT (or one-statement call) lands after its
/// resolver looked: held at `point` before the first attempt, its connection is cut with the
/// COMMIT delivered 400 ms later; held at `point` again before the second attempt (which comes
/// only after a new connection and the resolver's question) until the first has landed, which
/// `landed` checks.
async fn landing_late<T: Send + 'static>(
    proxy: &Proxy,
    point: &'static str,
    unit: impl Future<Output = T> + Send + 'static,
    landed: impl Future<Output = ()>,
) -> T {
    let first = pause(point);
    let task = tokio::spawn(unit);
    first.reached().await;
    proxy.cut_before_next_commit_arrives(Duration::from_millis(400));
    first.release();
    // Armed once the first is gone: a pause disarms its point by name.
    let second = pause(point);
    second.reached().await;
    assert_eq!(proxy.commits_cut(), 1);
    tokio::time::sleep(Duration::from_millis(800)).await;
    landed.await;
    second.release();
    task.await.unwrap()
}

/// A lone ack is one statement (the procedure's call), which holds no lock before it runs: the
/// client loses the connection while the call is on its way, the resolver finds the lease
/// still held (the call has not arrived), and the ack runs again — but the first call lands
/// in between and acks. The second finds the lease gone; since an earlier attempt may have
/// acked it, the client asks again whether the message is gone, and reports it acked, not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ack_landing_after_its_resolver_looked_is_reported_acked_by_the_next_attempt() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    let id = MessageId::new();
    q.send(Message::new("once").with_id(id)).await.unwrap();
    let got = q.receive(1, LEASE).await.unwrap();

    let receipt = got[0].receipt();
    let landed = async { assert_eq!(copies(&db, id).await, 0, "the first call acked") };
    let report = landing_late(
        &proxy,
        "ack.before_commit",
        {
            let q = q.clone();
            async move { q.ack_batch(&[receipt]).await }
        },
        landed,
    )
    .await
    .unwrap();
    assert_eq!(copies(&db, id).await, 0);
    assert_eq!((report.acked, report.lost.len()), (1, 0), "{report:?}");
    db.drop().await;
}

/// The same for a lone send (one statement, the procedure's call): the resolver finds its id
/// not stored, the call lands before the second attempt, which meets its id stored — by the
/// first call, so the send is reported sent, not a duplicate of itself, and stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_send_landing_after_its_resolver_looked_is_not_called_a_duplicate_of_itself() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    q.send(Message::new("warm")).await.unwrap();
    let id = MessageId::new();

    let landed = async { assert_eq!(copies(&db, id).await, 1, "the first call stored it") };
    let sent = landing_late(
        &proxy,
        "send.before_commit",
        {
            let q = q.clone();
            async move { q.send(Message::new("once").with_id(id)).await }
        },
        landed,
    )
    .await
    .unwrap();
    assert!(!sent.duplicate, "a send reported as a duplicate of itself");
    assert_eq!(copies(&db, id).await, 1);
    db.drop().await;
}

/// The pooled connection an ack batch gets died while idle (a server restart, a network
/// reset): its first statement fails before the ack knows which leases it holds. Nothing was
/// written, so it runs again on a new connection and acks every receipt — it must not be
/// taken for a committed ack whose receipts were all lost (which left the messages leased).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ack_batch_on_a_dead_pooled_connection_acks_on_a_new_one() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    q.send_batch((0..3).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap();
    let got = q.receive(3, LEASE).await.unwrap();
    assert_eq!(got.len(), 3);
    proxy.reset_all();
    let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
    let report = q.ack_batch(&receipts).await.unwrap();
    assert_eq!((report.acked, report.lost.len()), (3, 0), "{report:?}");
    assert_eq!(db.count("leases").await, 0, "acked messages left leased");
    assert_eq!(db.count("messages").await, 0);
    db.drop().await;
}

/// Once the unit `held` stops before its COMMIT: the COMMIT is written into a stalled
/// network and never arrives, then the connection is reset.
async fn lose_the_commit(held: Pause, proxy: &Proxy) {
    held.reached().await;
    proxy.stall();
    held.release();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.reset_all();
    proxy.resume();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_then_reset_send_is_retried_once_and_applied_once() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    let id = MessageId::new();
    let held = pause("send.before_commit");
    let send = {
        let q = q.clone();
        tokio::spawn(async move { q.send(Message::new("x").with_id(id)).await })
    };
    // The outcome is unknown to the client: it asks, learns "not committed", retries.
    lose_the_commit(held, &proxy).await;
    send.await.unwrap().expect("retried on a new connection");
    assert_eq!(copies(&db, id).await, 1);
    // And the client carries on.
    q.send(Message::new("after")).await.unwrap();
    assert_eq!(db.count("ready").await, 2);
    db.drop().await;
}

/// A batch holding a resent id (stored already) and a new one, whose one-round-trip send is
/// lost on the way (never committed): the resent id is in the table anyway, so "any id stored"
/// would call the batch committed and lose the new message. It must be written, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_batch_with_a_resent_id_is_not_taken_for_committed() {
    let _turn = crate::serial().await;
    let (db, proxy, _client, q) = through_proxy().await;
    let original = Message::new("original");
    q.send(original.clone()).await.unwrap();
    let fresh = Message::new("fresh");
    let fresh_id = fresh.id();
    let held = pause("send.before_commit");
    let send = {
        let q = q.clone();
        tokio::spawn(async move { q.send_batch(vec![original, fresh]).await })
    };
    lose_the_commit(held, &proxy).await;
    let sent = send.await.unwrap().expect("resolved, then sent");
    assert_eq!(
        sent.iter().map(|s| s.duplicate).collect::<Vec<_>>(),
        [true, false]
    );
    assert_eq!(copies(&db, fresh_id).await, 1, "the new message was lost");
    db.drop().await;
}

/// Neither of the client's two pooled connections is inside a transaction (MariaDB's
/// `@@in_transaction`): a stale one would make the application's autocommit statements on the
/// pool hold their locks until some later BEGIN commits them implicitly.
async fn no_pooled_connection_in_a_transaction(client: &Client<MySql>) {
    let pool = client.pool();
    let held = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
    for mut conn in [held.0, held.1] {
        let open: u64 = sqlx::query_scalar("SELECT @@in_transaction")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert_eq!(open, 0, "a pooled connection is inside a transaction");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_abandoned_while_its_begin_is_in_flight_leaves_no_transaction_on_a_pooled_connection()
 {
    let _turn = crate::serial().await;
    let (db, proxy, _client, _) = through_proxy().await;
    // Two connections, so that the calls below reuse every one of them.
    let client = Client::builder()
        .max_connections(2)
        .housekeeping_interval(Duration::from_secs(3600))
        .open::<MySql>(&proxy.url(&db.url))
        .await
        .unwrap();
    let q = client.queue("q").await.unwrap();
    // A send held with its connection in hand (keyed, so that it runs in a transaction of its
    // own rather than in one round trip); its BEGIN then goes into a stalled network, and the
    // caller gives up (its task is aborted) before the server's answer arrives.
    let held = pause("send.before_begin");
    let send = {
        let q = q.clone();
        tokio::spawn(async move { q.send(Message::new("abandoned").idempotency_key("k")).await })
    };
    held.reached().await;
    proxy.stall();
    held.release();
    tokio::time::sleep(Duration::from_millis(200)).await;
    send.abort();
    proxy.resume();
    tokio::time::sleep(Duration::from_millis(300)).await;
    no_pooled_connection_in_a_transaction(&client).await;
    // The same for transactions the caller begins itself, on connections used a moment ago
    // (the pool hands them out without a ping, so the BEGIN is what meets the stall).
    let warm = (client.begin().await.unwrap(), client.begin().await.unwrap());
    drop(warm);
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.stall();
    for _ in 0..2 {
        let begin = tokio::time::timeout(Duration::from_millis(200), client.begin()).await;
        assert!(begin.is_err(), "the BEGIN was stalled, yet it returned");
    }
    proxy.resume();
    tokio::time::sleep(Duration::from_millis(300)).await;
    no_pooled_connection_in_a_transaction(&client).await;
    // Every connection the pool hands out now is outside any transaction: each send commits
    // (a stale transaction would fail the BEGIN with 1568, or swallow the send uncommitted).
    // Keyed sends and caller transactions, whose BEGIN sets the isolation level first.
    for i in 0..10 {
        q.send(Message::new(format!("after {i}")).idempotency_key(format!("after {i}")))
            .await
            .unwrap_or_else(|e| panic!("send {i} after the abandoned BEGINs: {e}"));
        let mut tx = client.begin().await.unwrap();
        q.send_in(&mut tx, Message::new(format!("in a transaction {i}")))
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    // Counted as admin, on connections of its own: 20 committed, the abandoned send not.
    assert_eq!(db.count("ready").await, 20);
    db.drop().await;
}
