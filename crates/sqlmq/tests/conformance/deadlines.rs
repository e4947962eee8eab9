//! Deadlines (`Message::deadline`, `Message::run_timeout`): a message past its deadline is
//! never delivered — the claim or the take that finds it late, in its own transaction or in
//! the caller's, makes it a dead letter with the reason — and a worker stops a handler still running at its
//! message's deadline or run timeout (its cancellation fires first) and dead-letters the
//! message, never retrying it; a run timeout counts from each attempt's claim.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sqlmq::queue::Backoff;
use sqlmq::worker::CancellationToken;
use sqlmq::{Error, JobContext, Message, Outcome, QueueConfig};
use sqlmq_testkit::{TestBackend, check_invariants, eventually_async, queue};

use crate::running::work;

/// The workers' lease: long, the tests stop handlers well before it ends.
const LEASE: Duration = Duration::from_secs(30);

/// The one dead letter's last error, once there is one.
async fn dead_reason<B: TestBackend>(q: &sqlmq::Queue<B>) -> String {
    eventually_async(Duration::from_secs(30), "a dead letter", || async {
        let dead = q.dead_letters(10).await.unwrap();
        dead.first()
            .and_then(|d| d.errors.last())
            .map(|e| e.error.clone())
    })
    .await
}

pub(crate) async fn a_message_past_its_deadline_is_never_delivered<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let past = SystemTime::now() - Duration::from_secs(1);
    let late = q
        .send(Message::new("late").deadline(past))
        .await
        .unwrap()
        .id;
    let on_time = q
        .send(Message::new("on time").deadline(SystemTime::now() + Duration::from_secs(600)))
        .await
        .unwrap()
        .id;
    let plain = q.send(Message::new("plain")).await.unwrap().id;
    // Ready in 1 s, its deadline in 0.3 s: it becomes ready late.
    let delayed = q
        .send(
            Message::new("delayed")
                .delay(Duration::from_secs(1))
                .deadline(SystemTime::now() + Duration::from_millis(300)),
        )
        .await
        .unwrap()
        .id;
    let got = q.receive(10, Duration::from_secs(30)).await.unwrap();
    let ids: Vec<_> = got.iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![on_time, plain], "the late one is not handed out");
    let deadline = got[0]
        .deadline
        .expect("the deadline comes with the delivery");
    assert!(deadline > SystemTime::now() + Duration::from_secs(500));
    assert_eq!(got[1].deadline, None);
    for d in &got {
        q.ack(d.receipt()).await.unwrap();
    }
    eventually_async(
        Duration::from_secs(30),
        "the delayed one to be due",
        || async {
            q.maintain().await.unwrap();
            let got = q.receive(10, Duration::from_secs(30)).await.unwrap();
            assert!(got.is_empty(), "delivered past its deadline: {got:?}");
            (q.dead_letters(10).await.unwrap().len() == 2).then_some(())
        },
    )
    .await;
    for dead in q.dead_letters(10).await.unwrap() {
        assert!([late, delayed].contains(&dead.id));
        assert_eq!(dead.errors.last().unwrap().error, "deadline passed");
    }
    // In the caller's transaction too.
    let in_tx = q
        .send(Message::new("late too").deadline(past))
        .await
        .unwrap()
        .id;
    let mut tx = client.begin().await.unwrap();
    let got = q
        .receive_in(&mut tx, 10, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(got.is_empty(), "{got:?}");
    tx.commit().await.unwrap();
    let dead = q.dead_letters(10).await.unwrap();
    assert!(dead.iter().any(|d| d.id == in_tx), "{dead:?}");
    // And a take: the late one becomes a dead letter, the one behind it is taken.
    let taken_late = q
        .send(Message::new("taken late").deadline(past))
        .await
        .unwrap()
        .id;
    let behind = q.send(Message::new("behind")).await.unwrap().id;
    let mut tx = client.begin().await.unwrap();
    let before = SystemTime::now();
    let got = q.take_in(&mut tx, 10).await.unwrap();
    assert_eq!(got.iter().map(|d| d.id).collect::<Vec<_>>(), [behind]);
    // No lease: it "expires" when it was taken (by the database's clock, this machine's).
    let slack = Duration::from_secs(1);
    assert!(got[0].lease_expires_at + slack >= before);
    assert!(got[0].lease_expires_at <= SystemTime::now() + slack);
    tx.commit().await.unwrap();
    let dead = q.dead_letters(10).await.unwrap();
    let late_one = dead.iter().find(|d| d.id == taken_late).expect("dead");
    assert_eq!(late_one.errors.last().unwrap().error, "deadline passed");
    assert_eq!(q.stats().await.unwrap().in_flight, 0);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_running_handler_is_stopped_at_its_run_timeout_and_never_retried<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(5)).await;
    let id = q
        .send(Message::new("slow").run_timeout(Duration::from_millis(500)))
        .await
        .unwrap()
        .id;
    let started = Arc::new(AtomicU32::new(0));
    let fired = Arc::new(AtomicBool::new(false));
    let told: Arc<Mutex<Option<SystemTime>>> = Arc::default();
    let stop = CancellationToken::new();
    let (s, f, t) = (started.clone(), fired.clone(), told.clone());
    let began = Instant::now();
    let worker = work(&client, &stop, LEASE, move |_d, ctx: JobContext<B>| {
        let (started, fired, told) = (s.clone(), f.clone(), t.clone());
        async move {
            started.fetch_add(1, Ordering::SeqCst);
            *told.lock().unwrap() = ctx.deadline();
            // What the handler started beside it hears the stop through the token.
            let token = ctx.cancellation_token();
            tokio::spawn(async move {
                token.cancelled().await;
                fired.store(true, Ordering::SeqCst);
            });
            // Ignores everything: only the worker's stop ends it.
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(Outcome::Done)
        }
    });
    assert_eq!(dead_reason(&q).await, "run timeout of 500ms exceeded");
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    eventually_async(Duration::from_secs(5), "the token to fire", || async {
        fired.load(Ordering::SeqCst).then_some(())
    })
    .await;
    assert!(
        told.lock().unwrap().is_some(),
        "the handler saw its deadline"
    );
    // Never retried, whatever attempts were left.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(started.load(Ordering::SeqCst), 1);
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!((dead.len(), dead[0].id, dead[0].attempts), (1, id, 1));
    stop.cancel();
    let report = worker.await.unwrap();
    assert_eq!(report.dead_lettered, 1, "{report:?}");
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_deadline_stops_a_running_handler_and_a_run_timeout_counts_per_attempt<
    B: TestBackend,
>() {
    let config = QueueConfig::default()
        .max_attempts(5)
        .backoff(Backoff::Ladder(vec![Duration::from_millis(10)]));
    let (db, client, q) = queue::<B>(config).await;
    // Fails its first attempt at once, then takes 600 ms of its 1.5 s run timeout: acked.
    let retried = q
        .send(Message::new("retried").run_timeout(Duration::from_millis(1500)))
        .await
        .unwrap()
        .id;
    let doomed = q
        .send(Message::new("doomed").deadline(SystemTime::now() + Duration::from_millis(1200)))
        .await
        .unwrap()
        .id;
    let attempts = Arc::new(AtomicU32::new(0));
    let stop = CancellationToken::new();
    let a = attempts.clone();
    let worker = work(&client, &stop, LEASE, move |d, _ctx: JobContext<B>| {
        let attempts = a.clone();
        async move {
            if d.body == b"doomed" {
                tokio::time::sleep(Duration::from_secs(600)).await;
                return Ok(Outcome::Done);
            }
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_millis(600)).await;
                return Err(Error::InvalidArgument("first attempt fails".into()));
            }
            tokio::time::sleep(Duration::from_millis(1000)).await;
            Ok(Outcome::Done)
        }
    });
    assert_eq!(dead_reason(&q).await, "deadline passed");
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!((dead.len(), dead[0].id), (1, doomed));
    // 600 ms then 1000 ms: 1.6 s in all, past one run timeout, yet each attempt within its own.
    eventually_async(
        Duration::from_secs(30),
        "the retried one to be acked",
        || async { q.message(retried).await.unwrap().is_none().then_some(()) },
    )
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(q.dead_letters(10).await.unwrap().len(), 1);
    stop.cancel();
    worker.await.unwrap();
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_message_past_its_deadline_is_never_delivered,
        a_running_handler_is_stopped_at_its_run_timeout_and_never_retried,
        a_deadline_stops_a_running_handler_and_a_run_timeout_counts_per_attempt,
    ],
);
