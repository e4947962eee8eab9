//! sqlmq's own transactions keep their connections between them instead of giving each back
//! to the pool, which would test it with a ping: a round trip to the server per send, claim or
//! ack. Counted on the server, per session.

use std::time::Duration;

use sqlmq::{Client, Message, MySql, Queue, QueueConfig};
use sqlmq_testkit::TestDb;

use crate::questions::{between, pings};

/// Transactions run one after another in the test below: 100 sends, 100 claims, 100 acks.
const TRANSACTIONS: u64 = 300;

/// The pool's size in the test below.
const CONNECTIONS: u64 = 4;

/// A migrated database, a client whose pool holds `connections`, and its queue `kept`.
async fn with_pool_of(connections: u32) -> (TestDb<MySql>, Client<MySql>, Queue<MySql>) {
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let client = Client::builder()
        .max_connections(connections)
        .open::<MySql>(&db.url)
        .await
        .unwrap();
    let q = client
        .create_queue("kept", QueueConfig::default())
        .await
        .unwrap();
    (db, client, q)
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
