//! What sleeping durable runs cost an idle worker of their queue: nothing. 10 000 runs asleep
//! (each a delayed message with its journal) leave the idle worker's statements per second and
//! the index rows those statements read where they were with none asleep, and hold none of its
//! slots. Counted with the server's per-session counters on every connection of the worker's
//! pool (exact even while other tests use the server), never timed.

use std::time::Duration;

use sqlmq::worker::CancellationToken;
use sqlmq::{Client, JobContext, Message, MySql, Outcome, QueueConfig, Worker};
use sqlmq_testkit::{TestDb, eventually_async};

use crate::questions::{between, session_counter, statements};

const SLEEPERS: usize = 10_000;
/// Over which the idle worker is counted.
const WINDOW: Duration = Duration::from_secs(3);

/// Index and table rows read on `client`'s connections.
async fn rows_read(client: &Client<MySql>) -> std::collections::HashMap<u64, u64> {
    let mut total = session_counter(client, "HANDLER_READ_NEXT").await;
    for name in [
        "HANDLER_READ_KEY",
        "HANDLER_READ_RND_NEXT",
        "HANDLER_READ_FIRST",
    ] {
        for (id, n) in session_counter(client, name).await {
            *total.entry(id).or_default() += n;
        }
    }
    total
}

/// Statements and rows read per second by an idle worker on `client` serving queue "q".
async fn idle_cost(client: &Client<MySql>) -> (f64, f64) {
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker::builder(client)
            .queue_raw("q", |_d, _ctx: JobContext<MySql>| async {
                Err::<Outcome, _>("a sleeping run was handled before its time".to_owned())
            })
            .poll_interval(Duration::from_millis(50), Duration::from_millis(200))
            .run(stop.clone()),
    );
    // Its poll delay climbs to its ceiling first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s0, r0) = (statements(client).await, rows_read(client).await);
    tokio::time::sleep(WINDOW).await;
    let (s1, r1) = (statements(client).await, rows_read(client).await);
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.acked + report.retried, 0, "{report:?}");
    let secs = WINDOW.as_secs_f64();
    (
        between(&s0, &s1) as f64 / secs,
        between(&r0, &r1) as f64 / secs,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_sleeping_runs_cost_an_idle_worker_nothing() {
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let idle = Client::builder()
        .notifications(false)
        .max_connections(2)
        .open::<MySql>(&db.url)
        .await
        .unwrap();
    let q = idle
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let (none_stmts, none_rows) = idle_cost(&idle).await;

    // 10 000 runs, each with a recorded step, put to sleep for an hour by another client.
    let sleeper = Client::builder()
        .max_connections(8)
        .open::<MySql>(&db.url)
        .await
        .unwrap();
    for chunk in 0..SLEEPERS / 1000 {
        let batch = (0..1000)
            .map(|i| Message::new(format!("{chunk}-{i}")))
            .collect();
        q.send_batch(batch).await.unwrap();
    }
    let stop = CancellationToken::new();
    let putting = tokio::spawn(
        Worker::builder(&sleeper)
            .queue_raw("q", |_d, ctx: JobContext<MySql>| async move {
                ctx.step("before", || async { Ok::<_, std::io::Error>(1) })
                    .await?;
                ctx.sleep(Duration::from_secs(3600)).await?;
                Ok::<_, sqlmq::Error>(Outcome::Done)
            })
            .concurrency(32)
            .run(stop.clone()),
    );
    eventually_async(Duration::from_secs(300), "every run asleep", || async {
        let s = q.stats().await.unwrap();
        (s.scheduled == SLEEPERS as u64 && s.ready + s.in_flight == 0).then_some(())
    })
    .await;
    stop.cancel();
    putting.await.unwrap().unwrap();
    assert_eq!(db.count("run_steps").await, 2 * SLEEPERS as i64);

    let (asleep_stmts, asleep_rows) = idle_cost(&idle).await;
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.in_flight, stats.scheduled),
        (0, SLEEPERS as u64),
        "no slot held"
    );
    println!(
        "idle worker: {none_stmts:.1} statements/s, {none_rows:.1} rows read/s with none asleep; \
         {asleep_stmts:.1} and {asleep_rows:.1} with {SLEEPERS} asleep"
    );
    // The same statements (the probe's delay is jittered: a margin), reading no more rows.
    assert!(
        asleep_stmts <= none_stmts * 1.5 + 2.0,
        "{asleep_stmts:.1} statements/s with {SLEEPERS} asleep vs {none_stmts:.1} with none"
    );
    assert!(
        asleep_rows <= none_rows * 1.5 + 20.0,
        "{asleep_rows:.1} rows read/s with {SLEEPERS} asleep vs {none_rows:.1} with none"
    );
    db.drop().await;
}
