//! Per-key concurrency (`QueueConfig::concurrency_limit`, `Message::concurrency_key`): never
//! more than the limit of one key admitted across clients, other keys and keyless messages
//! never held back, and every way a message ends — ack, dead letter, cancel, purge — frees
//! its slot for the next one in line, in send order; a per-key rate limit skips a key over
//! its rate while the others flow.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlmq::worker::CancellationToken;
use sqlmq::{
    Client, Delivery, Error, JobContext, Message, MessageId, Outcome, QueueConfig, Worker,
};
use sqlmq_testkit::{TestBackend, check_invariants, eventually_async, queue};

use crate::limits::{no_window_over, stop_when_handled};

const LEASE: Duration = Duration::from_secs(30);

/// What the handlers of every client saw, per concurrency key.
#[derive(Default)]
struct Seen {
    running: Mutex<HashMap<String, usize>>,
    most: Mutex<HashMap<String, usize>>,
    ids: Mutex<Vec<MessageId>>,
}

fn worker<B: TestBackend>(
    client: &Client<B>,
    seen: &Arc<Seen>,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>> {
    let seen = seen.clone();
    let run = Worker::builder(client)
        .queue_raw("q", move |d: Delivery, _ctx: JobContext<B>| {
            let seen = seen.clone();
            async move {
                let key = d.concurrency_key.clone().unwrap_or_default();
                {
                    let mut running = seen.running.lock().unwrap();
                    let now = running.entry(key.clone()).or_default();
                    *now += 1;
                    let mut most = seen.most.lock().unwrap();
                    let m = most.entry(key.clone()).or_default();
                    *m = (*m).max(*now);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                *seen.running.lock().unwrap().get_mut(&key).unwrap() -= 1;
                seen.ids.lock().unwrap().push(d.id);
                Ok::<_, String>(Outcome::Done)
            }
        })
        .concurrency(8)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .run(stop.clone());
    tokio::spawn(run)
}

pub(crate) async fn a_key_never_has_more_than_its_limit_running_across_clients<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().concurrency_limit(Some(2))).await;
    // 200 messages over 5 keys, sent in batches that mix the keys, and 20 without a key.
    let mut ids = HashSet::new();
    for chunk in 0..10 {
        let batch: Vec<Message> = (0..22)
            .map(|i| match i {
                0..20 => {
                    Message::new(format!("m{chunk}-{i}")).concurrency_key(format!("k{}", i % 5))
                }
                _ => Message::new("plain"),
            })
            .collect();
        ids.extend(batch.iter().map(|m| m.id()));
        q.send_batch(batch).await.unwrap();
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.blocked),
        (5 * 2 + 20, 200 - 10),
        "two of each key admitted, the rest in line: {stats:?}"
    );
    let seen = Arc::new(Seen::default());
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    // Three clients of eight handler slots each: 24 could run at once without the limit.
    for _ in 0..3 {
        workers.push(worker(&db.client().await, &seen, &stop));
    }
    stop_when_handled(ids.len(), || seen.ids.lock().unwrap().len(), stop, workers).await;
    let handled: Vec<MessageId> = seen.ids.lock().unwrap().clone();
    let unique: HashSet<MessageId> = handled.iter().copied().collect();
    assert_eq!(unique.len(), handled.len(), "a message was handled twice");
    assert_eq!(unique, ids);
    let most = seen.most.lock().unwrap().clone();
    for k in 0..5 {
        let m = most[&format!("k{k}")];
        assert!(m <= 2, "key k{k}: {m} ran at once, over its limit of 2");
    }
    assert!(
        most.iter().any(|(k, m)| !k.is_empty() && *m == 2),
        "the limit was never reached: {most:?}"
    );
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.blocked, stats.in_flight), (0, 0, 0));
    check_invariants(&db).await;
    db.drop().await;
}

/// Bodies of `ds`.
fn bodies(ds: &[Delivery]) -> Vec<String> {
    ds.iter()
        .map(|d| String::from_utf8(d.body.clone()).unwrap())
        .collect()
}

pub(crate) async fn every_ending_frees_a_slot_for_the_next_in_line<B: TestBackend>() {
    let config = QueueConfig::default()
        .concurrency_limit(Some(2))
        .max_attempts(2);
    let (db, client, q) = queue::<B>(config.clone()).await;
    let a: Vec<Message> = (0..6)
        .map(|i| Message::new(format!("a{i}")).concurrency_key("a"))
        .collect();
    let a_ids: Vec<MessageId> = a.iter().map(|m| m.id()).collect();
    q.send_batch(a).await.unwrap();
    q.send(Message::new("b0").concurrency_key("b"))
        .await
        .unwrap();
    q.send(Message::new("plain")).await.unwrap();

    let got = q.receive(10, LEASE).await.unwrap();
    let mut names = bodies(&got);
    names.sort();
    assert_eq!(
        names,
        ["a0", "a1", "b0", "plain"],
        "two of a, and the others"
    );
    let a0 = got.iter().find(|d| d.body == b"a0").unwrap();
    assert_eq!(
        (a0.concurrency_key.as_deref(), a0.ordering_key.as_deref()),
        (Some("a"), None)
    );
    let a1 = got.iter().find(|d| d.body == b"a1").unwrap();

    // An ack frees a slot: the next in line, in send order.
    q.ack(a0.receipt()).await.unwrap();
    assert_eq!(bodies(&q.receive(10, LEASE).await.unwrap()), ["a2"]);
    // A message waiting out its retry keeps its slot.
    q.nack(a1.receipt(), Some(Duration::from_millis(200)), "later")
        .await
        .unwrap();
    assert!(q.receive(10, LEASE).await.unwrap().is_empty());
    // Cancelling a waiting message takes it out of the line.
    q.cancel(a_ids[3]).await.unwrap();
    // The retry comes back (same slot), and dies on its last attempt: its slot goes to a4.
    let retry = eventually_async(Duration::from_secs(10), "the retry", || async {
        let got = q.receive(10, LEASE).await.unwrap();
        (!got.is_empty()).then_some(got)
    })
    .await;
    assert_eq!(bodies(&retry), ["a1"]);
    q.nack(retry[0].receipt(), None, "dies").await.unwrap();
    assert_eq!(
        q.dead_letters(10).await.unwrap()[0]
            .concurrency_key
            .as_deref(),
        Some("a")
    );
    assert_eq!(bodies(&q.receive(10, LEASE).await.unwrap()), ["a4"]);

    // A raised limit applies at the key's next admission.
    client
        .create_queue("q", config.clone().concurrency_limit(Some(3)))
        .await
        .unwrap();
    q.send(Message::new("a6").concurrency_key("a"))
        .await
        .unwrap();
    assert_eq!(bodies(&q.receive(10, LEASE).await.unwrap()), ["a5"]);
    assert!(q.receive(10, LEASE).await.unwrap().is_empty(), "a6 waits");

    // A purge deletes without releasing; the slots are counted again afterwards.
    q.purge().await.unwrap();
    q.send(Message::new("c0").concurrency_key("a"))
        .await
        .unwrap();
    q.send(Message::new("c1").concurrency_key("a"))
        .await
        .unwrap();
    let mut after = bodies(&q.receive(10, LEASE).await.unwrap());
    after.sort();
    assert_eq!(after, ["c0", "c1"]);

    // A redriven dead letter goes back in its key's line.
    let dead = q.dead_letters(10).await.unwrap();
    q.send(Message::new("c2").concurrency_key("a"))
        .await
        .unwrap();
    q.redrive(&[dead[0].id]).await.unwrap();
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.in_flight, stats.ready, stats.blocked),
        (2, 1, 1),
        "c2 admitted (limit 3), the redriven a1 waits: {stats:?}"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_dead_consumers_message_keeps_its_slot_and_runs_elsewhere<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().concurrency_limit(Some(1))).await;
    q.send_batch(
        (0..2)
            .map(|i| Message::new(format!("a{i}")).concurrency_key("a"))
            .collect(),
    )
    .await
    .unwrap();
    let dead = db.client().await.queue("q").await.unwrap();
    let held = dead.receive(5, Duration::from_secs(1)).await.unwrap();
    assert_eq!(bodies(&held), ["a0"]);
    let other = db.client().await.queue("q").await.unwrap();
    // The holder never settles: when its lease ends a0 runs again, still before a1.
    let got = eventually_async(Duration::from_secs(10), "a0 again", || async {
        let got = other.receive(5, LEASE).await.unwrap();
        (!got.is_empty()).then_some(got)
    })
    .await;
    assert_eq!(bodies(&got), ["a0"]);
    other.ack(got[0].receipt()).await.unwrap();
    assert_eq!(bodies(&other.receive(5, LEASE).await.unwrap()), ["a1"]);
    db.drop().await;
}

pub(crate) async fn bad_concurrency_keys_and_limits_are_refused<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().concurrency_limit(Some(2))).await;
    for bad in [
        Message::new("x").concurrency_key(""),
        Message::new("x").concurrency_key("k".repeat(128)),
        Message::new("x").concurrency_key("a\nb"),
        Message::new("x").concurrency_key("k").ordering_key("k"),
    ] {
        assert!(
            matches!(q.send(bad).await, Err(Error::InvalidArgument(_))),
            "refused"
        );
    }
    q.send(Message::new("x").concurrency_key("k".repeat(127)))
        .await
        .unwrap();
    assert!(matches!(
        client
            .create_queue("z", QueueConfig::default().concurrency_limit(Some(0)))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    let configs = client.queue_configs().await.unwrap();
    assert_eq!(configs[0].1.concurrency_limit, Some(2));
    db.drop().await;
}

/// What the handlers saw: each delivery's key, attempt and start.
type Starts = Arc<Mutex<Vec<(String, u32, std::time::Instant)>>>;

pub(crate) async fn a_key_over_its_rate_is_skipped_while_other_keys_flow<B: TestBackend>() {
    let rate: sqlmq::queue::RateLimit = "20/1s".parse().unwrap();
    let (db, _client, q) = queue::<B>(QueueConfig::default().rate_limit_per_key(Some(rate))).await;
    let mut batch: Vec<Message> = (0..100)
        .map(|i| Message::new(format!("a{i}")).concurrency_key("a"))
        .collect();
    batch.extend((0..20).map(|i| Message::new(format!("b{i}")).concurrency_key("b")));
    batch.extend((0..20).map(|i| Message::new(format!("p{i}"))));
    q.send_batch(batch).await.unwrap();
    let starts: Starts = Arc::default();
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for _ in 0..2 {
        let starts = starts.clone();
        let client = db.client().await;
        let run = Worker::builder(&client)
            .queue_raw("q", move |d: Delivery, _ctx: JobContext<B>| {
                let starts = starts.clone();
                async move {
                    let key = d.concurrency_key.clone().unwrap_or_default();
                    starts
                        .lock()
                        .unwrap()
                        .push((key, d.attempt, std::time::Instant::now()));
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .concurrency(8)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .run(stop.clone());
        workers.push(tokio::spawn(run));
    }
    stop_when_handled(140, || starts.lock().unwrap().len(), stop, workers).await;
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 140, "each message once");
    assert!(
        starts.iter().all(|(_, attempt, _)| *attempt == 1),
        "a message put back for its key's rate keeps its attempt"
    );
    let of = |key: &str| -> Vec<std::time::Instant> {
        let mut v: Vec<_> = starts
            .iter()
            .filter(|(k, _, _)| k == key)
            .map(|(_, _, t)| *t)
            .collect();
        v.sort();
        v
    };
    let a = of("a");
    assert_eq!(a.len(), 100);
    // Five windows' worth: the last starts at least four windows after the first.
    let span = a[99] - a[0];
    assert!(
        span >= Duration::from_millis(3800),
        "100 of a within {span:?}"
    );
    no_window_over(&a, 20);
    // The others were not held back by a's backlog.
    let (b, plain) = (of("b"), of(""));
    assert_eq!((b.len(), plain.len()), (20, 20));
    let first = a[0].min(b[0]).min(plain[0]);
    for last in [b[19], plain[19]] {
        assert!(
            last - first < Duration::from_millis(1500),
            "another key waited {:?}",
            last - first
        );
    }
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.scheduled, stats.dead), (0, 0, 0));
    db.drop().await;
}

/// Eight consumers ack batches of messages of the same keys at once: each batch frees its
/// keys' slots in key order, once per key, so no two batches wait for each other in a cycle
/// (freed in message order, two batches deadlocked on the `key_slots` rows; an ack then failed
/// once its retries ran out).
pub(crate) async fn concurrent_batch_acks_of_shared_keys_never_deadlock<B: TestBackend>() {
    const MESSAGES: usize = 4000;
    let (db, _client, q) = queue::<B>(QueueConfig::default().concurrency_limit(Some(10_000))).await;
    for chunk in 0..(MESSAGES / 1000) {
        let batch: Vec<Message> = (0..1000)
            // Keys out of order within any batch a consumer receives.
            .map(|i| {
                Message::new(format!("m{chunk}-{i}"))
                    .concurrency_key(format!("k{}", (i * 37 + chunk * 11) % 100))
            })
            .collect();
        q.send_batch(batch).await.unwrap();
    }
    let mut consumers = Vec::new();
    for _ in 0..8 {
        let q = db.client().await.queue("q").await.unwrap();
        consumers.push(tokio::spawn(async move {
            let mut acked = 0;
            loop {
                let got = q.receive(100, LEASE).await.unwrap();
                if got.is_empty() {
                    return acked;
                }
                let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
                let report = q.ack_batch(&receipts).await.expect("an ack batch failed");
                acked += report.acked;
            }
        }));
    }
    let mut acked = 0;
    for c in consumers {
        acked += c.await.unwrap();
    }
    assert_eq!(acked, MESSAGES);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.in_flight, stats.blocked), (0, 0, 0));
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_key_never_has_more_than_its_limit_running_across_clients,
        every_ending_frees_a_slot_for_the_next_in_line,
        a_dead_consumers_message_keeps_its_slot_and_runs_elsewhere,
        bad_concurrency_keys_and_limits_are_refused,
        a_key_over_its_rate_is_skipped_while_other_keys_flow,
        concurrent_batch_acks_of_shared_keys_never_deadlock,
    ]
);
