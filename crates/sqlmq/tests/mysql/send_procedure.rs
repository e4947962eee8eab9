//! The send procedure (`CALL sqlmq_send(…)`, migration 8) under concurrency, as other languages
//! call it: the same idempotency key from many connections at once stores one message; one
//! ordering key written from many connections is delivered in commit order, one at a time; a
//! call is one statement (`Questions`). The library's own lone send through
//! `sqlmq_send_plain` (migration 9), and without it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlmq::{Client, Message, MySql, Queue, QueueConfig};
use sqlmq_testkit::TestDb;
use sqlx::MySqlPool;

use crate::questions::{between, counted, per_op, statements};

const LEASE: Duration = Duration::from_secs(30);

/// `CALL sqlmq_send` of `body` with an ordering key and an idempotency key: (uuid, duplicate).
async fn call(
    pool: &MySqlPool,
    body: &str,
    ordering_key: Option<&str>,
    idempotency_key: Option<&str>,
) -> (String, bool) {
    sqlx::query_as::<_, (Vec<u8>, String, i64)>(
        "CALL sqlmq_send('q', ?, NULL, NULL, NULL, ?, ?, NULL)",
    )
    .bind(body)
    .bind(ordering_key)
    .bind(idempotency_key)
    .fetch_all(pool)
    .await
    .map(|rows| (rows[0].1.clone(), rows[0].2 != 0))
    .unwrap_or_else(|e| panic!("CALL: {e}"))
}

/// A database with queue `q`, and a pool of connections for the test's own CALLs.
pub(crate) async fn queue_q() -> (TestDb<MySql>, Queue<MySql>, MySqlPool) {
    let db = TestDb::<MySql>::new().await;
    let q = db
        .client()
        .await
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let pool = db.pool().await;
    (db, q, pool)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_sent_from_eight_connections_at_once_is_one_message() {
    let (db, q, pool) = queue_q().await;
    for round in 0..20 {
        let key = format!("key-{round}");
        let bodies: Vec<String> = (0..8).map(|i| format!("{round}/{i}")).collect();
        let answers = futures_util::future::join_all(
            bodies
                .iter()
                .map(|body| call(&pool, body, None, Some(&key))),
        )
        .await;
        let ids: HashSet<&String> = answers.iter().map(|(id, _)| id).collect();
        let fresh = answers.iter().filter(|(_, dup)| !dup).count();
        assert_eq!((ids.len(), fresh), (1, 1), "round {round}: {answers:?}");
    }
    assert_eq!(db.count("messages").await, 20);
    assert_eq!(q.stats().await.unwrap().ready, 20);
    pool.close().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_ordering_key_written_from_four_connections_is_delivered_in_commit_order() {
    let (db, q, pool) = queue_q().await;
    // Each writer's own sends commit in its order, so each writer's sequence must come out
    // in order; the writers interleave as their commits did.
    let writers = (0..4).map(|w| {
        let pool = pool.clone();
        tokio::spawn(async move {
            for n in 0..25 {
                call(&pool, &format!("{w}/{n}"), Some("account-1"), None).await;
            }
        })
    });
    for w in futures_util::future::join_all(writers).await {
        w.unwrap();
    }
    let mut next: HashMap<String, u32> = HashMap::new();
    let mut delivered = 0;
    while delivered < 100 {
        let got = q.receive(10, LEASE).await.unwrap();
        // The key's head alone is out at any time.
        assert_eq!(got.len(), 1, "after {delivered}");
        let body = String::from_utf8(got[0].body.clone()).unwrap();
        let (w, n) = body.split_once('/').unwrap();
        let expected = next.entry(w.to_owned()).or_default();
        assert_eq!(n.parse::<u32>().unwrap(), *expected, "{body}");
        *expected += 1;
        q.ack(got[0].receipt()).await.unwrap();
        delivered += 1;
    }
    assert!(q.receive(10, LEASE).await.unwrap().is_empty());
    assert_eq!(db.count("key_heads").await, 0);
    pool.close().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_from_sql_is_one_statement() {
    let (db, client, _) = counted().await;
    let send = || async {
        sqlx::query("CALL sqlmq_send('q', 'x', NULL, NULL, NULL, NULL, NULL, NULL)")
            .fetch_all(client.pool())
            .await
            .unwrap();
    };
    send().await; // the connection prepares the CALL once
    let first = statements(&client).await;
    let reading = between(&first, &statements(&client).await);
    let before = statements(&client).await;
    for _ in 0..10 {
        send().await;
    }
    let after = statements(&client).await;
    let per_send = between(&before, &after).saturating_sub(reading) as f64 / 10.0;
    assert_eq!(per_send, 1.0, "statements per CALL");
    assert_eq!(db.count("ready").await, 11);
    db.drop().await;
}

/// The library's own send of one plain message: one statement (`CALL sqlmq_send_plain`), and
/// the four-statement text script where the procedure is missing (an older schema) or not
/// allowed — the send works either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_send_is_one_statement_and_falls_back_to_the_script_without_the_procedure() {
    let (db, client, q) = counted().await;
    let per_send = || {
        per_op(&client, 10, |i| {
            let q = q.clone();
            async move {
                q.send(Message::new(format!("m{i}"))).await.unwrap();
            }
        })
    };
    assert_eq!(per_send().await, 1.0, "statements per lone send");
    assert_eq!(db.count("ready").await, 11);

    db.exec("DROP PROCEDURE sqlmq_send_plain", &[]).await;
    assert_eq!(
        per_send().await,
        4.0,
        "statements per lone send as a script"
    );
    assert_eq!(db.count("ready").await, 22);
    assert_eq!(db.count("messages").await, 22);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_down_drops_the_procedures_and_up_brings_them_back() {
    let db = TestDb::<MySql>::new().await;
    let admin = Client::<MySql>::open(&db.admin_url).await.unwrap();
    let latest = admin.migrate().await.unwrap().to_version;
    // `sqlmq_send` (version 8), the library's own `sqlmq_send_plain` (version 9),
    // `sqlmq_claim_plain` and `sqlmq_ack_plain` (version 10), `sqlmq_ack_group_one`
    // (version 11), `sqlmq_ack` (version 12), `sqlmq_claim_timed` (version 15),
    // `sqlmq_claim_vt` (version 16).
    let routines = || {
        db.scalar(
            "SELECT COUNT(*) FROM information_schema.routines \
             WHERE routine_schema = DATABASE() AND routine_name IN \
             ('sqlmq_send', 'sqlmq_send_plain', 'sqlmq_claim_plain', 'sqlmq_ack_plain', \
             'sqlmq_ack_group_one', 'sqlmq_ack', 'sqlmq_claim_timed', 'sqlmq_claim_vt')",
        )
    };
    assert_eq!(routines().await, 8);
    // Of the versions after the SQL contract's ack (12), 15 adds the claim that answers
    // deadlines, 16 the claim in ready's new primary key's order.
    const ACK: i64 = 12;
    let after: Vec<i64> = (ACK + 1..=latest).rev().collect();
    assert_eq!(admin.migrate_to(ACK).await.unwrap().reverted, after);
    assert_eq!(routines().await, 6);
    assert_eq!(admin.migrate_to(ACK - 1).await.unwrap().reverted, [ACK]);
    assert_eq!(routines().await, 5);
    assert_eq!(
        admin.migrate_to(ACK - 5).await.unwrap().reverted,
        [ACK - 1, ACK - 2, ACK - 3, ACK - 4]
    );
    assert_eq!(routines().await, 0);
    assert_eq!(
        admin.migrate().await.unwrap().applied,
        (ACK - 4..=latest).collect::<Vec<i64>>()
    );
    assert_eq!(routines().await, 8);
    admin.pool().close().await;
    db.drop().await;
}
