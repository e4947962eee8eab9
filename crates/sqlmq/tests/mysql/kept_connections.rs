//! sqlmq's own transactions keep their connections between them instead of giving each back
//! to the pool, which would test it with a ping: a round trip to the server per send, claim or
//! ack. Counted on the server, per session.

use std::time::Duration;

use sqlmq::{Client, Message, MySql, Queue, QueueConfig};
use sqlmq_testkit::{Proxy, TestDb, address_of};

use crate::questions::{between, pings};

/// Transactions run one after another in the test below: 100 sends, 100 claims, 100 acks.
const TRANSACTIONS: u64 = 300;

/// The pool's size in the test below.
const CONNECTIONS: u64 = 4;

/// A migrated database, a client whose pool holds `connections`, and its queue `kept`.
async fn with_pool_of(connections: u32) -> (TestDb<MySql>, Client<MySql>, Queue<MySql>) {
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let (client, q) = open(&db.url, connections).await;
    (db, client, q)
}

/// A client of the migrated database at `url` whose pool holds `connections`, and its queue
/// `kept`.
async fn open(url: &str, connections: u32) -> (Client<MySql>, Queue<MySql>) {
    let client = Client::builder()
        .max_connections(connections)
        .open::<MySql>(url)
        .await
        .unwrap();
    let q = client
        .create_queue("kept", QueueConfig::default())
        .await
        .unwrap();
    (client, q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_in_a_row_do_not_ping_the_server_between_them() {
    let (db, client, q) = with_pool_of(CONNECTIONS as u32).await;
    let before = pings(&client).await;
    for i in 0..100 {
        q.send(Message::new(format!("m{i}"))).await.unwrap();
    }
    let mut acked = 0;
    while acked < 100 {
        for d in q.receive(1, Duration::from_secs(30)).await.unwrap() {
            q.ack(d.receipt()).await.unwrap();
            acked += 1;
        }
    }
    let after = pings(&client).await;
    // Given back after every transaction, each would have been tested: about 200 pings.
    // Kept, about two per connection: the first reading gives back what it held (tested once
    // each), and the second takes every connection, so the kept ones go back to the pool
    // first (once each); on a loaded machine a few more, when a connection sat unused for
    // the sweep's second. A tenth of the transactions tells the two apart.
    let pinged = between(&before, &after);
    assert!(
        pinged <= TRANSACTIONS / 10,
        "{pinged} pings for {TRANSACTIONS} transactions on {CONNECTIONS} connections"
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_connections_go_back_to_the_pool_for_its_other_users_and_its_close() {
    let (db, client, q) = with_pool_of(2).await;
    let other = client
        .create_queue("other", QueueConfig::default())
        .await
        .unwrap();
    // Sends to two queues at once take both connections. The first given back finds the pool
    // with no idle connection and no room for another, so it goes back to the pool.
    let (a, b) = tokio::join!(q.send(Message::new("a")), other.send(Message::new("b")));
    a.unwrap();
    b.unwrap();
    // The application's own transaction still gets a connection at once.
    let mut tx = tokio::time::timeout(Duration::from_millis(500), client.begin())
        .await
        .expect("a kept connection starved the application's transaction")
        .unwrap();
    sqlx::query("SELECT 1").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    // Unused for a while, kept connections go back to the pool.
    q.send(Message::new("c")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    assert_eq!(client.pool().num_idle() as u32, client.pool().size());
    // And closing the pool never waits for a connection kept by the client.
    q.send(Message::new("d")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), client.pool().close())
        .await
        .expect("closing the pool waited for a kept connection");
    db.drop().await;
}

/// What the test below gives up on half-way through a reply.
#[derive(Clone, Copy)]
enum Abandoned {
    /// One of sqlmq's units of work (a lease extension): its connection would be kept.
    Unit,
    /// One of sqlmq's plain reads (dead letters): its connection goes back to the pool.
    Read,
    /// The application's own transaction on the client's pool.
    AppTransaction,
}

impl Abandoned {
    fn what(self) -> &'static str {
        match self {
            Abandoned::Unit => "a unit of work (a lease extension)",
            Abandoned::Read => "a read (dead letters)",
            Abandoned::AppTransaction => "the application's transaction",
        }
    }
}

/// How long [`Proxy::split_reply`] holds the second part of a reply in the test below: well
/// past the caller's patience.
const HOLD: Duration = Duration::from_secs(2);

/// A caller that gives up on sqlmq half-way through a reply (its own timeout, an HTTP client
/// gone, a handler stopped at its timeout, a lease extension dropped when its handler ends)
/// leaves that connection in the middle of a packet: sqlx (0.9) then reads the rest of the
/// packet as the next reply's header and waits, with no end, for bytes that never come. Such a
/// connection must never serve sqlmq's next transaction (kept) nor go back to the pool (whose
/// ping on it would never end, and its slot with it): everything after answers at once, and
/// the pool keeps every connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_giving_up_half_way_through_a_reply_leaves_no_connection_stuck() {
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let proxy = Proxy::start(address_of(&db.url)).await;
    let (client, q) = open(&proxy.url(&db.url), 2).await;
    q.send(Message::new("m")).await.unwrap();
    let held = q.receive(1, Duration::from_secs(60)).await.unwrap();
    let receipt = held[0].receipt();
    for case in [Abandoned::Unit, Abandoned::Read, Abandoned::AppTransaction] {
        let what = case.what();
        // Connections used just now: none is pinged on its way out of the pool.
        q.send(Message::new("fresh")).await.unwrap();
        // A transaction's BEGIN answers first: the reply split is the one after it.
        let skip = usize::from(!matches!(case, Abandoned::Read));
        proxy.split_reply(skip, HOLD);
        let patience = Duration::from_millis(300);
        let gave_up = match case {
            Abandoned::Unit => {
                tokio::time::timeout(patience, q.extend(receipt, Duration::from_secs(60)))
                    .await
                    .is_err()
            }
            Abandoned::Read => tokio::time::timeout(patience, q.dead_letters(10))
                .await
                .is_err(),
            Abandoned::AppTransaction => {
                let mut tx = client.begin().await.unwrap();
                let read = sqlx::query("SELECT id FROM messages").fetch_all(&mut *tx);
                tokio::time::timeout(patience, read).await.is_err()
            }
        };
        assert!(gave_up, "{what}: its reply was not held half-way");
        let after = async {
            q.send(Message::new("after")).await.unwrap();
            q.stats().await.unwrap();
            // Both of the pool's connections at once: none was lost.
            let a = client.pool().acquire().await.unwrap();
            let b = client.pool().acquire().await.unwrap();
            drop((a, b));
        };
        tokio::time::timeout(HOLD * 5, after)
            .await
            .unwrap_or_else(|_| panic!("{what}: the next transactions waited with no end"));
    }
    db.drop().await;
}
