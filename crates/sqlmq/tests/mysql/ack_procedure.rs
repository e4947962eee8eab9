//! The SQL contract's ack (`CALL sqlmq_ack(queue, receipt)`, migration 12), as another
//! language's handler calls it: in the caller's transaction with its writes — both commit or
//! neither; a receipt that lost its lease, a keyed message, an unknown queue and a malformed
//! receipt are refused with their SQLSTATEs and change nothing; a worker handler that acks
//! through it returns `Outcome::Settled` and the runtime leaves the message alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlmq::{Delivery, JobContext, Message, MySql, Outcome, Queue, Worker};
use sqlmq_testkit::{TestDb, eventually_async};
use sqlx::{MySqlPool, Row};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(30);

/// A database with queue `q`, an `effects` table, and a pool of the runtime user's connections
/// for the test's own transactions.
async fn setup() -> (TestDb<MySql>, Queue<MySql>, MySqlPool) {
    let (db, q, pool) = super::send_procedure::queue_q().await;
    db.exec("CREATE TABLE effects (id VARCHAR(64) NOT NULL)", &[])
        .await;
    (db, q, pool)
}

/// `CALL sqlmq_ack(queue, receipt)` on `conn`: its answer, or the error's SQLSTATE.
async fn ack_sql(
    conn: &mut sqlx::MySqlConnection,
    queue: Option<&str>,
    receipt: Option<&str>,
) -> Result<i64, String> {
    match sqlx::query("CALL sqlmq_ack(?, ?)")
        .bind(queue)
        .bind(receipt)
        .fetch_all(&mut *conn)
        .await
    {
        Ok(rows) => Ok(rows[0].get::<i64, _>(0)),
        Err(e) => Err(e
            .as_database_error()
            .and_then(|e| e.code().map(|c| c.into_owned()))
            .unwrap_or_else(|| format!("{e}"))),
    }
}

async fn effects(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM effects")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_commits_with_the_callers_writes_or_rolls_back_with_them() {
    let (db, q, pool) = setup().await;
    q.send_batch(vec![Message::new("kept"), Message::new("undone")])
        .await
        .unwrap();
    let got = q.receive(2, LEASE).await.unwrap();
    let (kept, undone) = (&got[0], &got[1]);

    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO effects (id) VALUES (?)")
        .bind(kept.id.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
    let answer = ack_sql(&mut tx, Some("q"), Some(&kept.receipt().to_string())).await;
    assert_eq!(answer, Ok(1));
    tx.commit().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO effects (id) VALUES (?)")
        .bind(undone.id.to_string())
        .execute(&mut *tx)
        .await
        .unwrap();
    let answer = ack_sql(&mut tx, Some("q"), Some(&undone.receipt().to_string())).await;
    assert_eq!(answer, Ok(1));
    tx.rollback().await.unwrap();

    // The committed ack and its write; the rolled-back one left its message in flight, its
    // lease intact.
    assert_eq!(effects(&pool).await, 1);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.in_flight, stats.pending()), (1, 1), "{stats:?}");
    q.ack(undone.receipt()).await.unwrap();
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    // Outside a transaction it commits by itself.
    q.send(Message::new("alone")).await.unwrap();
    let alone = q.receive(1, LEASE).await.unwrap().remove(0);
    let mut conn = pool.acquire().await.unwrap();
    let answer = ack_sql(&mut conn, Some("q"), Some(&alone.receipt().to_string())).await;
    assert_eq!(answer, Ok(1));
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    drop(conn);
    pool.close().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_their_cause_and_change_nothing() {
    let (db, q, pool) = setup().await;
    q.send_batch(vec![
        Message::new("plain"),
        Message::new("keyed").ordering_key("k"),
    ])
    .await
    .unwrap();
    let got = q.receive(2, LEASE).await.unwrap();
    let plain = got.iter().find(|d| d.body == b"plain").unwrap();
    let keyed = got.iter().find(|d| d.body == b"keyed").unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let stale = sqlmq::queue::Receipt {
        id: plain.id,
        token: plain.token + 1,
    };
    let cases = [
        (Some("q"), Some(stale.to_string()), "45000"),
        (Some("q"), Some(keyed.receipt().to_string()), "0A000"),
        (Some("nope"), Some(plain.receipt().to_string()), "42S02"),
        (Some("q"), Some("not a receipt".to_owned()), "22023"),
        (Some("q"), Some(format!("{}:", plain.id)), "22023"),
        (Some("q"), None, "22004"),
        (None, Some(plain.receipt().to_string()), "22004"),
    ];
    for (queue, receipt, state) in cases {
        let answer = ack_sql(&mut conn, queue, receipt.as_deref()).await;
        assert_eq!(answer, Err(state.to_owned()), "{queue:?} {receipt:?}");
    }
    // Nothing changed: both are in flight, and their receipts ack through the library.
    assert_eq!(q.stats().await.unwrap().in_flight, 2);
    q.ack(plain.receipt()).await.unwrap();
    q.ack(keyed.receipt()).await.unwrap();
    // A lease that ended is lost, before any sweep noticed.
    q.send(Message::new("late")).await.unwrap();
    let late = q
        .receive(1, Duration::from_millis(200))
        .await
        .unwrap()
        .remove(0);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let answer = ack_sql(&mut conn, Some("q"), Some(&late.receipt().to_string())).await;
    assert_eq!(answer, Err("45000".to_owned()));
    drop(conn);
    pool.close().await;
    db.drop().await;
}

/// A worker handler that acks through the contract in its own transaction returns
/// `Outcome::Settled`: the runtime leaves the message alone. One whose transaction rolled back
/// (it still says settled) gets its message again when the lease ends: effects once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_acks_in_its_own_transaction_settles_its_message() {
    let (db, q, pool) = setup().await;
    q.send_batch(vec![Message::new("a"), Message::new("roll back once")])
        .await
        .unwrap();
    let client = db.client().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let rolled_back = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (pool, runs, rolled_back) = (pool.clone(), Arc::clone(&runs), Arc::clone(&rolled_back));
        move |d: Delivery, ctx: JobContext<MySql>| {
            let (pool, runs, rolled_back) =
                (pool.clone(), Arc::clone(&runs), Arc::clone(&rolled_back));
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
                sqlx::query("INSERT INTO effects (id) VALUES (?)")
                    .bind(d.id.to_string())
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
                let receipt = ctx.receipt().to_string();
                ack_sql(&mut tx, Some("q"), Some(&receipt)).await?;
                if d.body == b"roll back once" && rolled_back.fetch_add(1, Ordering::SeqCst) == 0 {
                    tx.rollback().await.map_err(|e| e.to_string())?;
                } else {
                    tx.commit().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(Outcome::Settled)
            }
        }
    };
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker::builder(&client)
            .queue_raw("q", handler)
            .lease(Duration::from_millis(800))
            .poll_interval(Duration::from_millis(10), Duration::from_millis(50))
            .maintenance_interval(Duration::from_millis(100))
            .run(stop.clone()),
    );
    eventually_async(Duration::from_secs(30), "both settled", || {
        let q = q.clone();
        async move { (q.stats().await.unwrap().pending() == 0).then_some(()) }
    })
    .await;
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(effects(&pool).await, 2, "each message's effects once");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "the rolled-back one ran again"
    );
    assert_eq!((report.acked, report.lease_lost), (3, 0), "{report:?}");
    pool.close().await;
    db.drop().await;
}
