//! The worker runtime in one process: typed jobs and outcomes, exactly-once effects through the
//! job transaction, panics, timeouts, automatic lease extension, wakeups, graceful shutdown,
//! and a stalled process that lost its claims.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sqlmq::queue::Backoff;
use sqlmq::worker::WorkerReport;
use sqlmq::{Client, Delivery, Error, Job, JobContext, Message, Outcome, QueueConfig, Worker};
use sqlmq_testkit::{TestBackend, TestDb, Value, check_invariants, eventually_async};
use tokio_util::sync::CancellationToken;

#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct Task {
    n: u32,
    action: String,
}

impl Job for Task {
    const NAME: &'static str = "task";
}

fn task(n: u32, action: &str) -> Task {
    Task {
        n,
        action: action.to_owned(),
    }
}

async fn setup<B: TestBackend>(config: QueueConfig) -> (TestDb<B>, Client<B>, sqlmq::Queue<B>) {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client.create_queue("jobs", config).await.unwrap();
    (db, client, q)
}

/// As [`setup`], with a client whose pool holds at most 2 connections and waits at most
/// `acquire_timeout` for one.
async fn setup_on_two_connections<B: TestBackend>(
    acquire_timeout: Duration,
) -> (TestDb<B>, Client<B>, sqlmq::Queue<B>) {
    let db = TestDb::<B>::new().await;
    db.client().await; // migrated
    let client = Client::builder()
        .max_connections(2)
        .connect_timeout(acquire_timeout)
        .open::<B>(&db.url)
        .await
        .unwrap();
    let q = client
        .create_queue("jobs", QueueConfig::default())
        .await
        .unwrap();
    (db, client, q)
}

/// Run a worker in the background; returns its stop token and handle.
fn spawn<B: TestBackend>(
    builder: sqlmq::worker::WorkerBuilder<B>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<sqlmq::Result<WorkerReport>>,
) {
    let token = CancellationToken::new();
    let handle = tokio::spawn(builder.run(token.clone()));
    (token, handle)
}

pub(crate) async fn typed_jobs_and_every_outcome<B: TestBackend>() {
    let config = QueueConfig::default()
        .max_attempts(3)
        .backoff(Backoff::Ladder(vec![Duration::from_millis(50)]));
    let (db, client, q) = setup(config).await;
    db.exec("CREATE TABLE effects (n INT NOT NULL)", &[]).await;
    for (n, action) in [
        (1, "done"),
        (2, "tx"),
        (3, "fail-once"),
        (4, "snooze-once"),
        (5, "give-up"),
        (6, "always-fail"),
    ] {
        q.enqueue(&task(n, action)).await.unwrap();
    }
    q.send(Message::new("not json")).await.unwrap();
    q.send(Message::new("{}").header(Message::JOB_HEADER, "other_job"))
        .await
        .unwrap();

    // Snoozes do not count as attempts (attempt() stays 1), so remember them here.
    let snoozes = Arc::new(AtomicUsize::new(0));
    let s = snoozes.clone();
    let builder = Worker::builder(&client).queue("jobs", move |job: Task, ctx: JobContext<B>| {
        let s = s.clone();
        async move {
            match job.action.as_str() {
                "tx" => {
                    let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
                    B::execute(
                        &mut *tx,
                        "INSERT INTO effects VALUES (?)",
                        &[Value::from(job.n)],
                    )
                    .await;
                    tx.commit().await.map_err(|e| e.to_string())?;
                    Ok(Outcome::Done)
                }
                "fail-once" if ctx.attempt() == 1 => Err("first attempt fails".to_owned()),
                "snooze-once" if s.fetch_add(1, Ordering::Relaxed) == 0 => {
                    assert_eq!(ctx.attempt(), 1);
                    Ok(Outcome::Snooze(Duration::from_millis(100)))
                }
                "snooze-once" => {
                    assert_eq!(ctx.attempt(), 1, "a snooze is not an attempt");
                    Ok(Outcome::Done)
                }
                "give-up" => Ok(Outcome::DeadLetter("not worth it".into())),
                "always-fail" => Err(format!("failure {}", ctx.attempt())),
                _ => Ok(Outcome::Done),
            }
        }
    });
    let (stop, run) =
        spawn(builder.poll_interval(Duration::from_millis(5), Duration::from_millis(20)));
    eventually_async(Duration::from_secs(20), "every job settled", || async {
        let s = q.stats().await.unwrap();
        (s.pending() == 0 && s.dead == 4).then_some(())
    })
    .await;
    stop.cancel();
    let report = run.await.unwrap().unwrap();
    // done, tx, fail-once (2nd), snooze-once (after snooze) acked; give-up, always-fail x3,
    // undecodable, other job: dead.
    assert_eq!(report.acked, 4, "{report:?}");
    assert_eq!(report.snoozed, 1, "{report:?}");
    assert_eq!(report.dead_lettered, 4, "{report:?}");
    assert_eq!(
        report.retried, 3,
        "fail-once once, always-fail twice: {report:?}"
    );
    let effects: i64 = db.scalar("SELECT COUNT(*) FROM effects").await;
    assert_eq!(effects, 1);
    let dead = q.dead_letters(10).await.unwrap();
    let reasons: Vec<String> = dead
        .iter()
        .map(|d| d.errors.last().unwrap().error.clone())
        .collect();
    assert!(reasons.iter().any(|r| r == "not worth it"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "failure 3"), "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("cannot decode job \"task\"")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("\"other_job\" sent to a worker of \"task\"")),
        "{reasons:?}"
    );
    // the snooze did not count as an attempt
    let snoozed_attempts: Vec<u32> = dead.iter().map(|d| d.attempts).collect();
    assert!(snoozed_attempts.contains(&3));
    assert!(
        client.processes().await.unwrap().is_empty(),
        "the worker deregistered"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_panicking_handler_is_retried_then_dead_lettered_with_the_panic_text<
    B: TestBackend,
>() {
    let config = QueueConfig::default()
        .max_attempts(3)
        .backoff(Backoff::Ladder(vec![Duration::ZERO]));
    let (db, client, q) = setup(config).await;
    q.enqueue(&task(1, "panic")).await.unwrap();
    let builder =
        Worker::builder(&client).queue("jobs", |job: Task, _ctx: JobContext<B>| async move {
            if job.action == "panic" {
                panic!("handler exploded on {}", job.n);
            }
            Ok::<_, String>(Outcome::Done)
        });
    let (stop, run) =
        spawn(builder.poll_interval(Duration::from_millis(5), Duration::from_millis(20)));
    let dead = eventually_async(Duration::from_secs(20), "dead letter", || async {
        q.dead_letters(1).await.unwrap().pop()
    })
    .await;
    stop.cancel();
    let report = run.await.unwrap().unwrap();
    assert_eq!(dead.attempts, 3);
    let errors: Vec<&str> = dead.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(errors, vec!["handler panicked: handler exploded on 1"; 3]);
    assert_eq!((report.retried, report.dead_lettered), (2, 1));
    db.drop().await;
}

pub(crate) async fn a_handler_longer_than_its_lease_keeps_its_message<B: TestBackend>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    q.enqueue(&task(1, "slow")).await.unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let make = |runs: Arc<AtomicUsize>| {
        move |_job: Task, _ctx: JobContext<B>| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(3500)).await;
                Ok::<_, String>(Outcome::Done)
            }
        }
    };
    // Two workers side by side (two clients: two processes as far as sqlmq knows), 1 s leases.
    let other = Client::<B>::open(&db.url).await.unwrap();
    let lease = Duration::from_secs(1);
    let fast = |b: sqlmq::worker::WorkerBuilder<B>| {
        b.lease(lease)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(20))
    };
    let (stop_a, run_a) = spawn(fast(
        Worker::builder(&client).queue("jobs", make(runs.clone())),
    ));
    let (stop_b, run_b) = spawn(fast(
        Worker::builder(&other).queue("jobs", make(runs.clone())),
    ));
    eventually_async(Duration::from_secs(15), "the slow job done", || async {
        (q.stats().await.unwrap().pending() == 0).then_some(())
    })
    .await;
    stop_a.cancel();
    stop_b.cancel();
    let (a, b) = (run_a.await.unwrap().unwrap(), run_b.await.unwrap().unwrap());
    assert_eq!(
        runs.load(Ordering::Relaxed),
        1,
        "no other worker got the message"
    );
    assert_eq!(a.acked + b.acked, 1);
    assert_eq!(a.lease_lost + b.lease_lost, 0);
    db.drop().await;
}

pub(crate) async fn a_handler_past_its_timeout_is_stopped_and_retried<B: TestBackend>() {
    let config = QueueConfig::default().max_attempts(1);
    let (db, client, q) = setup(config).await;
    q.enqueue(&task(1, "hang")).await.unwrap();
    let builder = Worker::builder(&client)
        .queue("jobs", |_: Task, _ctx: JobContext<B>| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, String>(Outcome::Done)
        })
        .timeout(Duration::from_millis(300))
        .poll_interval(Duration::from_millis(5), Duration::from_millis(20));
    let (stop, run) = spawn(builder);
    let dead = eventually_async(Duration::from_secs(10), "timed-out job dead", || async {
        q.dead_letters(1).await.unwrap().pop()
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(dead.errors[0].error, "handler timed out after 300ms");
    db.drop().await;
}

pub(crate) async fn an_idle_worker_picks_up_a_message_from_another_process_within_the_poll_ceiling<
    B: TestBackend,
>() {
    let (db, client, _q) = setup(QueueConfig::default()).await;
    let ceiling = Duration::from_millis(300);
    let started = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let s = started.clone();
    let builder = Worker::builder(&client)
        .queue_raw("jobs", move |_d: Delivery, _ctx: JobContext<B>| {
            let s = s.clone();
            async move {
                s.lock().unwrap().get_or_insert_with(Instant::now);
                Ok::<_, String>(Outcome::Done)
            }
        })
        .poll_interval(Duration::from_millis(10), ceiling);
    let (stop, run) = spawn(builder);
    // Idle long enough for the poll delay to reach its ceiling.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let producer = Client::<B>::open(&db.url).await.unwrap(); // another client: no in-process wakeup
    let q = producer.queue("jobs").await.unwrap();
    let sent_at = Instant::now();
    q.send(Message::new("wake up")).await.unwrap();
    let handled_at = eventually_async(Duration::from_secs(5), "handler start", || async {
        *started.lock().unwrap()
    })
    .await;
    let latency = handled_at - sent_at;
    stop.cancel();
    run.await.unwrap().unwrap();
    // The ceiling plus jitter (20 %) plus one claim.
    assert!(
        latency <= ceiling.mul_f64(1.2) + Duration::from_millis(100),
        "idle wakeup took {latency:?}"
    );
    db.drop().await;
}

pub(crate) async fn a_send_through_the_same_client_wakes_the_worker_at_once<B: TestBackend>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    let started = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let s = started.clone();
    let builder = Worker::builder(&client)
        .queue_raw("jobs", move |_d: Delivery, _ctx: JobContext<B>| {
            let s = s.clone();
            async move {
                s.lock().unwrap().get_or_insert_with(Instant::now);
                Ok::<_, String>(Outcome::Done)
            }
        })
        // A ceiling so long that only the in-process wakeup can explain a fast start.
        .poll_interval(Duration::from_secs(5), Duration::from_secs(5));
    let (stop, run) = spawn(builder);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent_at = Instant::now();
    q.send(Message::new("local")).await.unwrap();
    let handled_at = eventually_async(Duration::from_secs(4), "handler start", || async {
        *started.lock().unwrap()
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
    assert!(
        handled_at - sent_at < Duration::from_millis(500),
        "took {:?}",
        handled_at - sent_at
    );
    db.drop().await;
}

pub(crate) async fn at_shutdown_in_flight_handlers_finish_and_overdue_ones_are_released<
    B: TestBackend,
>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    for n in 0..4 {
        let action = if n < 2 { "quick" } else { "stuck" };
        q.enqueue(&task(n, action)).await.unwrap();
    }
    let builder = Worker::builder(&client)
        .queue("jobs", |job: Task, _ctx: JobContext<B>| async move {
            let wait = if job.action == "quick" { 500 } else { 60_000 };
            tokio::time::sleep(Duration::from_millis(wait)).await;
            Ok::<_, String>(Outcome::Done)
        })
        .shutdown_grace(Duration::from_millis(1500))
        .poll_interval(Duration::from_millis(5), Duration::from_millis(20));
    let (stop, run) = spawn(builder);
    eventually_async(Duration::from_secs(5), "all four claimed", || async {
        (q.stats().await.unwrap().in_flight == 4).then_some(())
    })
    .await;
    let stopped_at = Instant::now();
    stop.cancel();
    let report = run.await.unwrap().unwrap();
    let took = stopped_at.elapsed();
    assert!(
        took < Duration::from_millis(1500) + Duration::from_secs(2),
        "shutdown took {took:?}"
    );
    assert_eq!((report.acked, report.released), (2, 2), "{report:?}");
    let s = q.stats().await.unwrap();
    assert_eq!(
        (s.in_flight, s.ready),
        (0, 2),
        "released at once, not left to their leases: {s:?}"
    );
    let again = q.receive(10, Duration::from_secs(5)).await.unwrap();
    assert!(again.iter().all(|d| d.attempt == 2));
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_stalled_process_whose_claims_were_released_cannot_ack<B: TestBackend>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    for n in 0..3 {
        q.enqueue(&task(n, "slow")).await.unwrap();
    }
    // Process A: slow handlers, long heartbeat (it will not notice being declared dead).
    let a_handled = Arc::new(AtomicUsize::new(0));
    let h = a_handled.clone();
    let (stop_a, run_a) = spawn(
        Worker::builder(&client)
            .queue("jobs", move |_: Task, _ctx: JobContext<B>| {
                let h = h.clone();
                async move {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    h.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .heartbeat_interval(Duration::from_secs(60))
            .lease(Duration::from_secs(60))
            // Its three slots stay busy, so the stalled process cannot claim the messages back.
            .concurrency(3)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(20)),
    );
    eventually_async(Duration::from_secs(5), "A holds all three", || async {
        (q.stats().await.unwrap().in_flight == 3).then_some(())
    })
    .await;
    // A stalls: to its peers its heartbeat deadline has passed.
    let mut conn = db.pool().await.acquire().await.unwrap();
    B::expire_process(&mut conn, "sqlmq_processes", client.owner_id()).await;
    drop(conn);
    // Process B (another client) notices and takes over.
    let other = Client::<B>::open(&db.url).await.unwrap();
    let b_handled = Arc::new(AtomicUsize::new(0));
    let h = b_handled.clone();
    let (stop_b, run_b) = spawn(
        Worker::builder(&other)
            .queue("jobs", move |_: Task, _ctx: JobContext<B>| {
                let h = h.clone();
                async move {
                    h.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .heartbeat_interval(Duration::from_millis(100))
            .poll_interval(Duration::from_millis(5), Duration::from_millis(20)),
    );
    eventually_async(Duration::from_secs(10), "B handled all three", || async {
        (b_handled.load(Ordering::Relaxed) == 3).then_some(())
    })
    .await;
    // A's handlers finish after the takeover: their acks are refused.
    eventually_async(Duration::from_secs(10), "A finished", || async {
        (a_handled.load(Ordering::Relaxed) == 3).then_some(())
    })
    .await;
    stop_a.cancel();
    stop_b.cancel();
    let (a, b) = (run_a.await.unwrap().unwrap(), run_b.await.unwrap().unwrap());
    assert_eq!((a.acked, a.lease_lost), (0, 3), "{a:?}");
    assert_eq!(b.acked, 3, "{b:?}");
    let dead = q.dead_letters(10).await.unwrap();
    assert!(dead.is_empty());
    assert_eq!(db.count("messages").await, 0);
    db.drop().await;
}

pub(crate) async fn bad_worker_settings_and_unknown_queues_are_rejected<B: TestBackend>() {
    let (db, client, _q) = setup(QueueConfig::default()).await;
    let noop = |_: Task, _ctx: JobContext<B>| async { Ok::<_, String>(Outcome::Done) };
    let cases = [
        Worker::builder(&client),
        Worker::builder(&client)
            .queue("jobs", noop)
            .queue("jobs", noop),
        Worker::builder(&client).queue("jobs", noop).concurrency(0),
        Worker::builder(&client)
            .queue("jobs", noop)
            .queue_concurrency("other", 2),
        Worker::builder(&client)
            .queue("jobs", noop)
            .lease(Duration::from_millis(10)),
        Worker::builder(&client).queue("bad name", noop),
    ];
    for builder in cases {
        let result = builder.run(CancellationToken::new()).await;
        assert!(
            matches!(
                result,
                Err(Error::InvalidArgument(_) | Error::InvalidName { .. })
            ),
            "{result:?}"
        );
    }
    let unknown = Worker::builder(&client)
        .queue("missing", noop)
        .run(CancellationToken::new())
        .await;
    assert!(
        matches!(unknown, Err(Error::UnknownQueue(_))),
        "{unknown:?}"
    );
    db.drop().await;
}

pub(crate) async fn a_worker_can_stop_when_drained_or_after_a_number_of_messages<B: TestBackend>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..25).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    let noop = |_d: Delivery, _ctx: JobContext<B>| async { Ok::<_, String>(Outcome::Done) };
    let fast = |b: sqlmq::worker::WorkerBuilder<B>| {
        b.concurrency(4)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(20))
    };

    // At most 10 claimed, then a graceful stop (no token needed).
    let report = fast(
        Worker::builder(&client)
            .queue_raw("jobs", noop)
            .max_messages(10),
    )
    .run(CancellationToken::new())
    .await
    .unwrap();
    assert_eq!(report.acked, 10, "{report:?}");
    assert_eq!(q.stats().await.unwrap().ready, 15);

    // Everything left, then stop on its own.
    let report = tokio::time::timeout(
        Duration::from_secs(20),
        fast(
            Worker::builder(&client)
                .queue_raw("jobs", noop)
                .stop_when_drained(),
        )
        .run(CancellationToken::new()),
    )
    .await
    .expect("stops once drained")
    .unwrap();
    assert_eq!(report.acked, 15, "{report:?}");
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}

/// A worker that stops when drained handles what its own acks release — the next message of an
/// ordering key, of a concurrency key at its limit, a dependant — before it stops: each becomes
/// ready when the ack before it commits, which may be after the worker's last handler ended
/// (the worker once stopped there, its slots free and nothing ready, with the rest blocked).
pub(crate) async fn a_worker_stopping_when_drained_handles_what_its_acks_release<B: TestBackend>() {
    let (db, client, q) = setup(QueueConfig::default().concurrency_limit(Some(1))).await;
    let mut batch: Vec<Message> = (0..4)
        .map(|i| Message::new(format!("o{i}")).ordering_key("K"))
        .collect();
    batch.extend((0..4).map(|i| Message::new(format!("c{i}")).concurrency_key("C")));
    let first = Message::new("d0");
    let second = Message::new("d1").depends_on([first.id()]);
    let third = Message::new("d2").depends_on([second.id()]);
    batch.extend([first, second, third]);
    q.send_batch(batch).await.unwrap();
    let handled = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = {
        let handled = Arc::clone(&handled);
        move |d: Delivery, _ctx: JobContext<B>| {
            let handled = Arc::clone(&handled);
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                handled
                    .lock()
                    .unwrap()
                    .push(String::from_utf8(d.body).unwrap());
                Ok::<_, String>(Outcome::Done)
            }
        }
    };
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        Worker::builder(&client)
            .queue_raw("jobs", handler)
            .concurrency(8)
            .stop_when_drained()
            .run(CancellationToken::new()),
    )
    .await
    .expect("stops once drained")
    .unwrap();
    assert_eq!(report.acked, 11, "{report:?}");
    let handled = handled.lock().unwrap().clone();
    let of = |prefix: char| -> Vec<&str> {
        handled
            .iter()
            .filter(|b| b.starts_with(prefix))
            .map(String::as_str)
            .collect()
    };
    assert_eq!(of('o'), ["o0", "o1", "o2", "o3"], "{handled:?}");
    assert_eq!(of('d'), ["d0", "d1", "d2"], "{handled:?}");
    assert_eq!(of('c').len(), 4, "{handled:?}");
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}

/// Run a worker on "jobs" with `poll` as its probing interval, handle one message to see it
/// running, and return it with the count of messages it handled.
async fn running_worker<B: TestBackend>(
    client: &Client<B>,
    q: &sqlmq::Queue<B>,
    poll: (Duration, Duration),
) -> (
    tokio::task::JoinHandle<sqlmq::Result<WorkerReport>>,
    Arc<AtomicUsize>,
) {
    let handled = Arc::new(AtomicUsize::new(0));
    let handler = {
        let handled = Arc::clone(&handled);
        move |_d: Delivery, _ctx: JobContext<B>| {
            handled.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, String>(Outcome::Done) }
        }
    };
    let worker = tokio::spawn(
        Worker::builder(client)
            .queue_raw("jobs", handler)
            .poll_interval(poll.0, poll.1)
            .run(CancellationToken::new()),
    );
    q.send(Message::new("first")).await.unwrap();
    let seen = Arc::clone(&handled);
    eventually_async(Duration::from_secs(30), "the first message handled", || {
        let seen = Arc::clone(&seen);
        async move { (seen.load(Ordering::SeqCst) == 1).then_some(()) }
    })
    .await;
    (worker, handled)
}

/// The worker's end, within a deadline.
async fn ended(
    worker: tokio::task::JoinHandle<sqlmq::Result<WorkerReport>>,
) -> sqlmq::Result<WorkerReport> {
    tokio::time::timeout(Duration::from_secs(30), worker)
        .await
        .expect("the worker stops")
        .unwrap()
}

/// A worker whose queue is deleted under it stops with `Error::Deleted` (it ran on silently,
/// claiming from an id that no longer named anything).
pub(crate) async fn a_worker_stops_when_its_queue_is_deleted<B: TestBackend>() {
    let (db, client, q) = setup::<B>(QueueConfig::default()).await;
    let fast = (Duration::from_millis(5), Duration::from_millis(50));
    let (worker, _) = running_worker(&client, &q, fast).await;
    db.client().await.delete_queue("jobs").await.unwrap();
    match ended(worker).await {
        Err(Error::Deleted { what, now: None }) => assert_eq!(what, "queue \"jobs\""),
        other => panic!("{other:?}"),
    }
    db.drop().await;
}

/// A worker whose queue's id goes to another queue (a re-created or restored database; forced
/// here, as neither backend gives an id twice in a database's life) stops with
/// `Error::Deleted` and never touches the other queue's messages — not even when a send to the
/// other queue through the worker's own client wakes it before its prober has looked (the
/// prober looks only every 30 s here). It once served the other queue.
pub(crate) async fn a_worker_never_serves_the_queue_that_took_its_id<B: TestBackend>() {
    let (db, client, q) = setup::<B>(QueueConfig::default()).await;
    let slow = (Duration::from_secs(30), Duration::from_secs(60));
    let (worker, handled) = running_worker(&client, &q, slow).await;
    let id_of = |name: &'static str| {
        let db = &db;
        async move {
            let sql = format!("SELECT id FROM sqlmq_queues WHERE name = '{name}'");
            db.query(&sql, &[]).await[0][0].int()
        }
    };
    let id = id_of("jobs").await;
    // The id goes to another queue in one step, as under a restored backup (the queue row's
    // name changes; `delete_queue`'s own path is the test above): whenever the worker looks,
    // it finds its id held by "other".
    db.exec(
        "UPDATE sqlmq_queues SET name = 'other' WHERE name = 'jobs'",
        &[],
    )
    .await;
    assert_eq!(id_of("other").await, id, "the id went to the other queue");
    let other = client.queue("other").await.unwrap();
    let batch: Vec<Message> = (0..5).map(|i| Message::new(format!("o{i}"))).collect();
    other.send_batch(batch).await.unwrap();
    match ended(worker).await {
        Err(Error::Deleted { what, now }) => {
            assert_eq!(what, "queue \"jobs\"");
            assert_eq!(now.as_deref(), Some("queue \"other\""));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        handled.load(Ordering::SeqCst),
        1,
        "only the first, of its own queue"
    );
    let got = other.receive(10, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|d| d.attempt == 1), "untouched: {got:?}");
    db.drop().await;
}

/// A worker that stops when drained does not stop while a message whose lease it lost is still
/// to come back: the database was out of reach (every connection of the pool held elsewhere)
/// for longer than the lease, so the extension could not run and the handler's ack found the
/// lease ended. The message must run again before the worker reports the queue drained (it
/// stopped at once: the lease had ended but no maintenance had released it, and a look for
/// ready messages found none).
pub(crate) async fn a_worker_stopping_when_drained_waits_for_a_message_whose_lease_it_lost<
    B: TestBackend,
>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    q.send(Message::new("x")).await.unwrap();
    let lease = Duration::from_millis(600);
    let runs = Arc::new(AtomicUsize::new(0));
    let (started, first_started) = tokio::sync::oneshot::channel::<()>();
    let started = Arc::new(std::sync::Mutex::new(Some(started)));
    let go = Arc::new(tokio::sync::Notify::new());
    let handler = {
        let (runs, go) = (Arc::clone(&runs), Arc::clone(&go));
        move |_d: Delivery, _ctx: JobContext<B>| {
            let (runs, go, started) = (Arc::clone(&runs), Arc::clone(&go), Arc::clone(&started));
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    if let Some(started) = started.lock().unwrap().take() {
                        let _ = started.send(());
                    }
                    go.notified().await;
                }
                Ok::<_, String>(Outcome::Done)
            }
        }
    };
    let worker = Worker::builder(&client)
        .queue_raw("jobs", handler)
        .concurrency(1)
        .lease(lease)
        .stop_when_drained()
        .run(CancellationToken::new());
    let worker = tokio::spawn(worker);
    first_started.await.unwrap();
    // The database out of reach for the worker: every connection of its pool held here for
    // twice the lease.
    let mut held = Vec::new();
    for _ in 0..client.pool().options().get_max_connections() {
        held.push(client.pool().acquire().await.unwrap());
    }
    tokio::time::sleep(lease * 2).await;
    go.notify_one();
    drop(held);
    let report = tokio::time::timeout(Duration::from_secs(60), worker)
        .await
        .expect("the worker stopped once drained")
        .unwrap()
        .unwrap();
    assert_eq!(report.lease_lost, 1, "{report:?}");
    assert_eq!(report.acked, 1, "the message ran again: {report:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}

/// How long this test's runtime spent polling tasks, over all its worker threads.
fn runtime_busy() -> Duration {
    let metrics = tokio::runtime::Handle::current().metrics();
    (0..metrics.num_workers())
        .map(|w| metrics.worker_total_busy_duration(w))
        .sum()
}

/// A worker whose handlers all run waits for them without work of its own: neither while too
/// few slots are free for a claim worth making, nor — stopping when drained — while the queue is
/// empty and handlers still run. (It spun in both: it took one free slot's permit and gave it
/// straight back, which returns at once while any slot is free, and looped; a core's worth of
/// CPU, and in the second case a claim per turn, for as long as the handlers ran.)
pub(crate) async fn a_worker_waiting_for_its_handlers_does_no_work<B: TestBackend>() {
    let (db, client, q) = setup(QueueConfig::default()).await;
    let running = Arc::new(AtomicUsize::new(0));
    let handler = {
        let running = Arc::clone(&running);
        move |_d: Delivery, _ctx: JobContext<B>| {
            let running = Arc::clone(&running);
            async move {
                running.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok::<_, String>(Outcome::Done)
            }
        }
    };
    // One claim loop: three of its four slots taken, one free, fewer than half a batch. Then,
    // stopping when drained, one taken and the queue empty.
    for (sent, drained) in [(3, false), (1, true)] {
        running.store(0, Ordering::SeqCst);
        let batch: Vec<Message> = (0..sent).map(|i| Message::new(format!("{i}"))).collect();
        q.send_batch(batch).await.unwrap();
        let stop = CancellationToken::new();
        let mut builder = Worker::builder(&client)
            .queue_raw("jobs", handler.clone())
            .concurrency(4)
            .claimers(1)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50));
        if drained {
            builder = builder.stop_when_drained();
        }
        let worker = tokio::spawn(builder.run(stop.clone()));
        eventually_async(Duration::from_secs(20), "every message running", || async {
            (running.load(Ordering::SeqCst) == sent).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = runtime_busy();
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Spinning, one worker thread is busy the whole second (0.77-1.0 s measured); a
        // loaded machine stretches the few short polls of a waiting worker, hence the margin.
        let busy = runtime_busy() - before;
        assert!(
            busy < Duration::from_millis(500),
            "{busy:?} of work in a second of waiting (stopping when drained: {drained})"
        );
        if !drained {
            stop.cancel();
        }
        let report = worker.await.unwrap().unwrap();
        assert_eq!(report.acked, sent as u64, "{report:?}");
    }
    db.drop().await;
}

/// The worker never needs more connections than its pool: 32 handlers on a pool of 2 (half of
/// them in job transactions, which hold a connection while they run) with short leases that
/// must be extended; every message is acked and the worker stops on its own.
pub(crate) async fn a_worker_needs_no_more_connections_than_its_pool<B: TestBackend>() {
    let (db, client, q) = setup_on_two_connections::<B>(Duration::from_secs(30)).await;
    let batch: Vec<Message> = (0..300).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    let seen = sqlmq_testkit::Recorder::default();
    let recorder = seen.clone();
    let handler = move |d: Delivery, ctx: JobContext<B>| {
        let recorder = recorder.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            recorder.0.lock().unwrap().push(d.id);
            if d.body[0].is_multiple_of(2) {
                let tx = ctx.begin().await.map_err(|e| e.to_string())?;
                tokio::time::sleep(Duration::from_millis(5)).await;
                tx.commit().await.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(Outcome::Done)
        }
    };
    let report = tokio::time::timeout(
        Duration::from_secs(120),
        Worker::builder(&client)
            .queue_raw("jobs", handler)
            .concurrency(32)
            .lease(Duration::from_millis(900))
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .stop_when_drained()
            .run(CancellationToken::new()),
    )
    .await
    .expect("the worker drained the queue")
    .unwrap();
    assert_eq!(report.acked, 300, "{report:?}");
    // At least once: on a loaded machine a 900 ms lease can end while its extension waits for
    // one of the two connections, and the message runs again.
    assert_eq!(seen.ids().len(), 300, "every message handled");
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}

/// A lease extension that waits for a connection does not stop the handler: the handler's own
/// transaction holds one, everything else of the pool is busy (held here where the pool has more
/// than the one writer SQLite has), and the extension comes due. The handler must go on and
/// commit — freeing the connection the extension waits for — rather than sit unpolled until the
/// pool's acquire timeout fails the extension (as it did: the worker awaited the extension in
/// place of the handler, and a pool of 2 under 32 handlers stalled for 30 s at a time).
pub(crate) async fn a_handler_runs_on_while_its_lease_extension_waits_for_a_connection<
    B: TestBackend,
>() {
    let acquire_timeout = Duration::from_secs(5);
    let (db, client, q) = setup_on_two_connections::<B>(acquire_timeout).await;
    q.send(Message::new("x")).await.unwrap();
    let lease = Duration::from_millis(900);
    let (past, past_extension) = tokio::sync::oneshot::channel::<()>();
    let past = Arc::new(std::sync::Mutex::new(Some(past)));
    let handler = move |_d: Delivery, ctx: JobContext<B>| {
        let past = Arc::clone(&past);
        async move {
            let tx = ctx.begin().await.map_err(|e| e.to_string())?;
            // Past the extension's time (a third of the lease) while holding the connection.
            tokio::time::sleep(lease * 2 / 3).await;
            if let Some(past) = past.lock().unwrap().take() {
                let _ = past.send(());
            }
            tx.commit().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(Outcome::Done)
        }
    };
    let worker = Worker::builder(&client)
        .queue_raw("jobs", handler)
        .concurrency(1)
        .lease(lease)
        .max_messages(1)
        .run(CancellationToken::new());
    let worker = tokio::spawn(worker);
    let mut held = Vec::new();
    for _ in 1..client.pool().options().get_max_connections() {
        held.push(client.pool().acquire().await.unwrap());
    }
    let went_on = tokio::time::timeout(acquire_timeout * 3 / 5, past_extension).await;
    drop(held);
    assert!(
        matches!(went_on, Ok(Ok(()))),
        "the handler stood still while its lease extension waited for a connection"
    );
    let report = tokio::time::timeout(Duration::from_secs(60), worker)
        .await
        .expect("the worker stopped after its message")
        .unwrap()
        .unwrap();
    assert_eq!(report.acked, 1, "{report:?}");
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [a_worker_needs_no_more_connections_than_its_pool, a_handler_runs_on_while_its_lease_extension_waits_for_a_connection, a_worker_stopping_when_drained_waits_for_a_message_whose_lease_it_lost, a_worker_waiting_for_its_handlers_does_no_work, typed_jobs_and_every_outcome, a_panicking_handler_is_retried_then_dead_lettered_with_the_panic_text, a_handler_longer_than_its_lease_keeps_its_message, a_handler_past_its_timeout_is_stopped_and_retried, an_idle_worker_picks_up_a_message_from_another_process_within_the_poll_ceiling, a_send_through_the_same_client_wakes_the_worker_at_once, at_shutdown_in_flight_handlers_finish_and_overdue_ones_are_released, a_stalled_process_whose_claims_were_released_cannot_ack, bad_worker_settings_and_unknown_queues_are_rejected, a_worker_can_stop_when_drained_or_after_a_number_of_messages, a_worker_stopping_when_drained_handles_what_its_acks_release, a_worker_stops_when_its_queue_is_deleted, a_worker_never_serves_the_queue_that_took_its_id]
);
