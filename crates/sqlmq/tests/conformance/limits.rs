//! A queue's limits, counted in the database across clients: never more than `max_in_flight`
//! messages in flight (a dead consumer's slots come back when its leases end), and never more
//! than the rate limit's count in any window of its length, wherever the window starts — for a
//! queue, and for a cluster consumer group.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::queue::RateLimit;
use sqlmq::topic::StartAt;
use sqlmq::worker::CancellationToken;
use sqlmq::{
    Client, Delivery, Error, GroupConfig, JobContext, Message, MessageId, Outcome, QueueConfig,
    Record, TopicConfig, Worker,
};
use sqlmq_testkit::{TestBackend, TestDb, eventually_async, queue};

/// What the handlers of every client saw.
#[derive(Default)]
struct Seen {
    running: AtomicUsize,
    most_running: AtomicUsize,
    ids: Mutex<Vec<MessageId>>,
    starts: Mutex<Vec<Instant>>,
}

/// A worker on `q` of `client` whose handler records into `seen` and takes `work`.
fn worker<B: TestBackend>(
    client: &Client<B>,
    seen: &Arc<Seen>,
    work: Duration,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>> {
    let seen = seen.clone();
    let run = Worker::builder(client)
        .queue_raw("q", move |d: Delivery, _ctx: JobContext<B>| {
            let seen = seen.clone();
            async move {
                seen.starts.lock().unwrap().push(Instant::now());
                let now = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
                seen.most_running.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(work).await;
                seen.running.fetch_sub(1, Ordering::SeqCst);
                seen.ids.lock().unwrap().push(d.id);
                Ok::<_, String>(Outcome::Done)
            }
        })
        .concurrency(8)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .run(stop.clone());
    tokio::spawn(run)
}

/// Run a worker per client until `n` messages were handled; the messages' ids.
async fn handle_all<B: TestBackend>(
    clients: &[Client<B>],
    seen: &Arc<Seen>,
    work: Duration,
    n: usize,
) -> HashSet<MessageId> {
    let stop = CancellationToken::new();
    let workers: Vec<_> = clients
        .iter()
        .map(|c| worker(c, seen, work, &stop))
        .collect();
    stop_when_handled(n, || seen.ids.lock().unwrap().len(), stop, workers).await;
    let ids = seen.ids.lock().unwrap().clone();
    let unique: HashSet<MessageId> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "a message was handled twice");
    unique
}

/// Check that no window of (nearly) a second holds more than `most` of the sorted `starts`:
/// handlers start a moment after their claim commits, so a window measured here may be a
/// little shorter than the database's — 150 ms are allowed for that.
pub(crate) fn no_window_over(starts: &[Instant], most: usize) {
    let window = Duration::from_millis(850);
    for (i, t) in starts.iter().enumerate() {
        let within = starts[i..].iter().take_while(|s| **s - *t < window).count();
        assert!(
            within <= most,
            "{within} handlers started within {window:?}"
        );
    }
}

/// Wait (a minute at most) until `handled()` reaches `n`, then stop `workers`; each must end
/// without an error.
pub(crate) async fn stop_when_handled(
    n: usize,
    handled: impl Fn() -> usize,
    stop: CancellationToken,
    workers: Vec<tokio::task::JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>>>,
) {
    eventually_async(Duration::from_secs(60), "every message handled", || async {
        (handled() >= n).then_some(())
    })
    .await;
    stop.cancel();
    for w in workers {
        w.await.unwrap().unwrap();
    }
}

async fn clients<B: TestBackend>(db: &TestDb<B>, n: usize) -> Vec<Client<B>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(db.client().await);
    }
    out
}

pub(crate) async fn never_more_in_flight_than_the_limit_across_clients<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_in_flight(Some(3))).await;
    let sent: Vec<Message> = (0..60).map(|i| Message::new(format!("m{i}"))).collect();
    let ids: HashSet<MessageId> = sent.iter().map(|m| m.id()).collect();
    q.send_batch(sent).await.unwrap();
    let seen = Arc::new(Seen::default());
    // Three clients, eight handler slots each: 24 could run at once without the limit.
    let handled = handle_all(&clients(&db, 3).await, &seen, Duration::from_millis(30), 60).await;
    assert_eq!(handled, ids);
    let most = seen.most_running.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&most),
        "at most 3 in flight, {most} ran at once"
    );
    db.drop().await;
}

pub(crate) async fn a_dead_consumers_slots_come_back_when_its_leases_end<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_in_flight(Some(2))).await;
    q.send_batch((0..5).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap();
    let dead = db.client().await;
    let held = dead.queue("q").await.unwrap();
    assert_eq!(
        held.receive(5, Duration::from_secs(1)).await.unwrap().len(),
        2
    );
    let other = db.client().await.queue("q").await.unwrap();
    assert!(
        other
            .receive(5, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty()
    );
    // The holder never settles: once its leases end, the slots are the others'.
    let got = eventually_async(Duration::from_secs(10), "the slots back", || async {
        let got = other.receive(5, Duration::from_secs(60)).await.unwrap();
        (!got.is_empty()).then_some(got)
    })
    .await;
    assert_eq!(got.len(), 2, "{got:?}");
    db.drop().await;
}

pub(crate) async fn no_window_sees_more_than_the_rate_limit<B: TestBackend>() {
    let rate = RateLimit::new(20, Duration::from_secs(1));
    let (db, _client, q) = queue::<B>(QueueConfig::default().rate_limit(Some(rate))).await;
    q.send_batch((0..100).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap();
    let seen = Arc::new(Seen::default());
    let started = Instant::now();
    handle_all(&clients(&db, 2).await, &seen, Duration::from_millis(1), 100).await;
    let elapsed = started.elapsed();
    // 20 at once, then 20 more as each second's window frees: the last 20 four seconds on.
    assert!(elapsed >= Duration::from_millis(3900), "{elapsed:?}");
    let mut starts = seen.starts.lock().unwrap().clone();
    starts.sort();
    no_window_over(&starts, 20);
    db.drop().await;
}

pub(crate) async fn limits_are_set_changed_and_removed<B: TestBackend>() {
    let rate: RateLimit = "100/1m".parse().unwrap();
    let config = QueueConfig::default()
        .max_in_flight(Some(7))
        .rate_limit(Some(rate));
    let (db, client, q) = queue::<B>(config.clone()).await;
    let stored = |client: Client<B>| async move {
        let configs = client.queue_configs().await.unwrap();
        configs.into_iter().find(|(n, _)| n == "q").unwrap().1
    };
    assert_eq!(stored(client.clone()).await, config);
    // The lock-held modes would go around the gate: refused on a limited queue.
    let mut tx = client.begin().await.unwrap();
    assert!(matches!(
        q.receive_in(&mut tx, 1, Duration::from_secs(5)).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        q.take_in(&mut tx, 1).await,
        Err(Error::InvalidArgument(_))
    ));
    tx.rollback().await.unwrap();
    for bad in [
        QueueConfig::default().max_in_flight(Some(0)),
        QueueConfig::default().rate_limit(Some(RateLimit::new(0, Duration::from_secs(1)))),
        QueueConfig::default().rate_limit(Some(RateLimit::new(1, Duration::from_millis(1)))),
    ] {
        let r = client.create_queue("q", bad).await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
    assert_eq!(stored(client.clone()).await, config);
    let plain = QueueConfig::default();
    let q = client.create_queue("q", plain.clone()).await.unwrap();
    assert_eq!(stored(client.clone()).await, plain);
    let mut tx = client.begin().await.unwrap();
    assert!(
        q.receive_in(&mut tx, 1, Duration::from_secs(5))
            .await
            .unwrap()
            .is_empty()
    );
    tx.rollback().await.unwrap();
    client.delete_queue("q").await.unwrap();
    assert_eq!(db.count("queue_limits").await, 0);
    db.drop().await;
}

pub(crate) async fn no_window_sees_more_than_a_groups_rate_limit<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let topic = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let rate = RateLimit::new(20, Duration::from_secs(1));
    let group = topic
        .create_group(
            "g",
            GroupConfig::default().rate_limit(Some(rate)),
            StartAt::Earliest,
        )
        .await
        .unwrap();
    assert_eq!(group.config().rate_limit, Some(rate));
    assert!(matches!(
        topic
            .create_group(
                "b",
                GroupConfig::broadcast().rate_limit(Some(rate)),
                StartAt::Earliest
            )
            .await,
        Err(Error::InvalidArgument(_))
    ));
    topic
        .publish_batch((0..60).map(|i| Record::new(format!("r{i}"))).collect())
        .await
        .unwrap();
    let starts: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let starts = starts.clone();
        let client = db.client().await;
        let run = Worker::builder(&client)
            .topic_group_raw("t", "g", move |_d: Delivery, _ctx: JobContext<B>| {
                let starts = starts.clone();
                async move {
                    starts.lock().unwrap().push(Instant::now());
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .concurrency(8)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .run(stop.clone());
        workers.push(tokio::spawn(run));
    }
    stop_when_handled(60, || starts.lock().unwrap().len(), stop, workers).await;
    let mut starts = starts.lock().unwrap().clone();
    starts.sort();
    assert_eq!(starts.len(), 60, "each record once");
    // 20 at once, then 20 more as each window frees: the last 20 two windows on.
    let span = starts[59] - starts[0];
    assert!(
        span >= Duration::from_millis(1800),
        "60 records within {span:?}"
    );
    no_window_over(&starts, 20);
    // Removed: the limit is gone from the group's row.
    let group = topic
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    assert_eq!(group.config().rate_limit, None);
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        never_more_in_flight_than_the_limit_across_clients,
        a_dead_consumers_slots_come_back_when_its_leases_end,
        no_window_sees_more_than_the_rate_limit,
        limits_are_set_changed_and_removed,
        no_window_sees_more_than_a_groups_rate_limit,
    ]
);
