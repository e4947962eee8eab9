//! Control of running messages (`Queue::cancel` of an in-flight message, `JobContext::
//! cancelled`, `JobContext::progress`): a cancel from another client reaches the running
//! handler within a second; the ack of a cancelled message fails with `Error::Cancelled` and
//! its transaction's writes roll back; the message is removed, never delivered again, also when
//! its handler ignores the cancel (at its lease's end); progress is visible from another client
//! while the handler runs and gone after its ack.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::inspect::MessageState;
use sqlmq::queue::Cancelled;
use sqlmq::worker::CancellationToken;
use sqlmq::{Client, Delivery, Error, JobContext, Message, Outcome, QueueConfig, Worker};
use sqlmq_testkit::{TestBackend, Value, check_invariants, eventually_async, queue};

/// How long the handler waited for its token after the cancel, and what its commit gave.
type Ended = Arc<Mutex<Option<(Duration, Result<(), String>)>>>;

/// A worker on queue "q" running `handler` with `lease`, polling briskly (shared with
/// `deadlines.rs`).
pub(crate) fn work<B, F, Fut>(
    client: &Client<B>,
    stop: &CancellationToken,
    lease: Duration,
    handler: F,
) -> tokio::task::JoinHandle<sqlmq::worker::WorkerReport>
where
    B: TestBackend,
    F: Fn(Delivery, JobContext<B>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Outcome, Error>> + Send + 'static,
{
    let run = Worker::builder(client)
        .queue_raw("q", handler)
        .concurrency(4)
        .lease(lease)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .run(stop.clone());
    tokio::spawn(async move { run.await.unwrap() })
}

/// Wait until the handler has started (`started` counts deliveries).
async fn until_started(started: &AtomicU32, n: u32) {
    eventually_async(Duration::from_secs(30), "the handler to start", || async {
        (started.load(Ordering::SeqCst) >= n).then_some(())
    })
    .await;
}

pub(crate) async fn a_cancel_from_another_client_reaches_the_handler_and_its_ack_rolls_back<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    db.exec("CREATE TABLE effects (id VARCHAR(64) NOT NULL)", &[])
        .await;
    let id = q.send(Message::new("long")).await.unwrap().id;
    let started = Arc::new(AtomicU32::new(0));
    let seen: Ended = Arc::default();
    let cancelled_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let stop = CancellationToken::new();
    let (s, seen2, at) = (started.clone(), seen.clone(), cancelled_at.clone());
    let worker = work(
        &client,
        &stop,
        Duration::from_secs(30),
        move |_d, ctx: JobContext<B>| {
            let (started, seen, at) = (s.clone(), seen2.clone(), at.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                // A long loop that looks at the token between chunks of work.
                let deadline = Instant::now() + Duration::from_secs(60);
                while !ctx.is_cancelled() && Instant::now() < deadline {
                    tokio::select! {
                        () = ctx.cancelled() => {}
                        () = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                }
                let waited = at.lock().unwrap().expect("cancelled before").elapsed();
                // Its effects in the job transaction: the ack fails, nothing is written.
                let mut tx = ctx.begin().await?;
                B::execute(
                    &mut *tx,
                    "INSERT INTO effects (id) VALUES (?)",
                    &[Value::from(ctx.id().to_string())],
                )
                .await;
                let committed = tx.commit().await.map_err(|e| match e {
                    Error::Cancelled { .. } => "cancelled".to_owned(),
                    other => other.to_string(),
                });
                *seen.lock().unwrap() = Some((waited, committed));
                Ok(Outcome::Done)
            }
        },
    );
    until_started(&started, 1).await;
    // Another client, as another process would.
    let other = db.client().await;
    let other_q = other.queue("q").await.unwrap();
    *cancelled_at.lock().unwrap() = Some(Instant::now());
    assert_eq!(other_q.cancel(id).await.unwrap(), Cancelled::Running);
    let m = other_q
        .message(id)
        .await
        .unwrap()
        .expect("kept until the handler ends");
    assert!(
        matches!(m.state, MessageState::Cancelling | MessageState::InFlight),
        "{:?}",
        m.state
    );
    let (waited, committed) =
        eventually_async(Duration::from_secs(30), "the handler to end", || async {
            seen.lock().unwrap().clone()
        })
        .await;
    assert!(
        waited < Duration::from_secs(1),
        "the token fired after {waited:?}"
    );
    assert_eq!(committed, Err("cancelled".to_owned()));
    assert_eq!(db.scalar("SELECT COUNT(*) FROM effects").await, 0);
    // Removed by the worker when the handler ended, long before the lease would have ended.
    eventually_async(Duration::from_secs(10), "the message to go", || async {
        q.message(id).await.unwrap().is_none().then_some(())
    })
    .await;
    stop.cancel();
    let report = worker.await.unwrap();
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert_eq!(started.load(Ordering::SeqCst), 1, "never delivered again");
    assert_eq!(q.stats().await.unwrap().dead, 0);
    check_invariants(&db).await;
    other.pool().close().await;
    db.drop().await;
}

pub(crate) async fn a_handler_that_ignores_the_cancel_is_abandoned_at_its_lease_without_a_retry<
    B: TestBackend,
>() {
    let config = QueueConfig::default()
        .max_attempts(5)
        .concurrency_limit(Some(1));
    let (db, client, q) = queue::<B>(config).await;
    let id = q
        .send(Message::new("stubborn").concurrency_key("k"))
        .await
        .unwrap()
        .id;
    let next = q
        .send(Message::new("next").concurrency_key("k"))
        .await
        .unwrap()
        .id;
    let started = Arc::new(AtomicU32::new(0));
    let ack: Arc<Mutex<Option<Result<(), Error>>>> = Arc::default();
    let stop = CancellationToken::new();
    let (s, a) = (started.clone(), ack.clone());
    let lease = Duration::from_secs(2);
    let worker = work(&client, &stop, lease, move |d, ctx: JobContext<B>| {
        let (started, ack) = (s.clone(), a.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            if d.body == b"next" {
                return Ok(Outcome::Done);
            }
            // Ignores the token; stops only when the test says (by a plain sleep).
            tokio::time::sleep(Duration::from_secs(6)).await;
            // Its own ack, through the queue: typed.
            let result = ctx.queue().unwrap().ack(ctx.receipt()).await;
            *ack.lock().unwrap() = Some(result);
            Ok(Outcome::Done)
        }
    });
    until_started(&started, 1).await;
    let other = db.client().await;
    let other_q = other.queue("q").await.unwrap();
    let cancelled = Instant::now();
    assert_eq!(other_q.cancel(id).await.unwrap(), Cancelled::Running);
    // Cancelling again is harmless.
    assert_eq!(other_q.cancel(id).await.unwrap(), Cancelled::Running);
    // The concurrency slot stays held while the handler may still run: "next" waits...
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(started.load(Ordering::SeqCst), 1);
    let stats = other_q.stats().await.unwrap();
    assert_eq!(
        stats.in_flight, 1,
        "a cancelling message counts in flight: {stats:?}"
    );
    // ...until the lease would have ended: then the message is gone, never retried, and the
    // slot moves on.
    eventually_async(
        Duration::from_secs(30),
        "the cancelled message to go",
        || async {
            other_q.maintain().await.unwrap();
            other_q.message(id).await.unwrap().is_none().then_some(())
        },
    )
    .await;
    assert!(cancelled.elapsed() >= lease - Duration::from_millis(200));
    eventually_async(Duration::from_secs(30), "the next message", || async {
        other_q.message(next).await.unwrap().is_none().then_some(())
    })
    .await;
    let acked = eventually_async(
        Duration::from_secs(30),
        "the stubborn handler's ack",
        || async { ack.lock().unwrap().take() },
    )
    .await;
    // Cancelled while its cancel lasts; once housekeeping ended it, a lost lease.
    assert!(
        matches!(
            acked,
            Err(Error::Cancelled { .. } | Error::LeaseLost { .. })
        ),
        "{acked:?}"
    );
    stop.cancel();
    worker.await.unwrap();
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "the cancelled one ran once"
    );
    assert_eq!(q.stats().await.unwrap().dead, 0);
    check_invariants(&db).await;
    other.pool().close().await;
    db.drop().await;
}

pub(crate) async fn progress_shows_while_the_handler_runs_and_goes_with_its_ack<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let id = q.send(Message::new("report")).await.unwrap().id;
    let go = Arc::new(tokio::sync::Notify::new());
    let stop = CancellationToken::new();
    let g = go.clone();
    let worker = work(
        &client,
        &stop,
        Duration::from_secs(30),
        move |_d, ctx: JobContext<B>| {
            let go = g.clone();
            async move {
                let released = go.notified();
                // Many reports: written at most once a second, the latest winning.
                for done in 1..=50 {
                    ctx.progress(serde_json::json!({"done": done, "of": 100}))
                        .await?;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let oversized = serde_json::Value::String("x".repeat(sqlmq::worker::MAX_PROGRESS));
                assert!(matches!(
                    ctx.progress(oversized).await,
                    Err(Error::PayloadTooLarge { .. })
                ));
                released.await;
                Ok(Outcome::Done)
            }
        },
    );
    let other = db.client().await;
    let other_q = other.queue("q").await.unwrap();
    let last = eventually_async(Duration::from_secs(30), "the last progress", || async {
        let p = other_q.progress(id).await.unwrap()?;
        (p.value["done"] == 50).then_some(p)
    })
    .await;
    assert_eq!(last.value, serde_json::json!({"done": 50, "of": 100}));
    assert_eq!(other_q.progress_all(10).await.unwrap(), vec![last]);
    go.notify_one();
    eventually_async(Duration::from_secs(30), "the ack", || async {
        q.message(id).await.unwrap().is_none().then_some(())
    })
    .await;
    eventually_async(
        Duration::from_secs(10),
        "the progress row to go",
        || async { (db.scalar("SELECT COUNT(*) FROM sqlmq_progress").await == 0).then_some(()) },
    )
    .await;
    assert_eq!(other_q.progress(id).await.unwrap(), None);
    stop.cancel();
    worker.await.unwrap();
    other.pool().close().await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_cancel_from_another_client_reaches_the_handler_and_its_ack_rolls_back,
        a_handler_that_ignores_the_cancel_is_abandoned_at_its_lease_without_a_retry,
        progress_shows_while_the_handler_runs_and_goes_with_its_ack,
    ],
);
