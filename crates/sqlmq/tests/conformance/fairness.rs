//! Fair queues (`QueueConfig::fair`, `Message::fairness_key`, `Queue::set_weight`): a tenant
//! with a huge backlog delays no other (every small tenant's messages are delivered while it
//! still has over 90 % of its own waiting), where a first-in-first-out queue starves them;
//! two busy tenants weighted 3:1 get claims 3:1 in every stretch of deliveries; retries and
//! delayed messages take their turn by key too; keys, weights and messages in flight are listed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlmq::{Error, Message, QueueConfig};
use sqlmq_testkit::{TestBackend, check_invariants, queue};

const LEASE: Duration = Duration::from_secs(60);
const CONSUMERS: usize = 8;

/// Send `n` messages of tenant `key` in batches.
async fn send_tenant<B: TestBackend>(q: &sqlmq::Queue<B>, key: &str, n: usize) {
    let mut left = n;
    while left > 0 {
        let size = left.min(1000);
        let batch: Vec<Message> = (0..size)
            .map(|_| Message::new(key.to_owned()).fairness_key(key))
            .collect();
        q.send_batch(batch).await.unwrap();
        left -= size;
    }
}

/// Run `CONSUMERS` consumers acking everything, in claim order into the shared log, until
/// `done` says so looking at the deliveries counted by tenant.
async fn consume_until<B: TestBackend>(
    q: &sqlmq::Queue<B>,
    done: impl Fn(&HashMap<String, usize>) -> bool + Send + Sync + 'static,
) -> (HashMap<String, usize>, Vec<String>) {
    let counts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let done = Arc::new(done);
    let mut tasks = Vec::new();
    for _ in 0..CONSUMERS {
        let (q, counts, log, done) = (q.clone(), counts.clone(), log.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
            loop {
                if done(&counts.lock().unwrap()) {
                    return;
                }
                assert!(tokio::time::Instant::now() < deadline, "consumers stalled");
                let got = q.receive(10, LEASE).await.unwrap();
                {
                    let mut counts = counts.lock().unwrap();
                    let mut log = log.lock().unwrap();
                    for d in &got {
                        let tenant = String::from_utf8(d.body.clone()).unwrap();
                        *counts.entry(tenant.clone()).or_default() += 1;
                        log.push(tenant);
                    }
                }
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
                q.ack_batch(&receipts).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let counts = counts.lock().unwrap().clone();
    let log = log.lock().unwrap().clone();
    (counts, log)
}

const SMALL: [&str; 10] = ["b", "c", "d", "e", "f", "g", "h", "i", "j", "k"];
const SMALL_EACH: usize = 100;

fn small_all_delivered(counts: &HashMap<String, usize>) -> bool {
    SMALL
        .iter()
        .all(|k| counts.get(*k).copied().unwrap_or(0) >= SMALL_EACH)
}

pub(crate) async fn a_big_tenant_delays_no_other<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().fair(true)).await;
    const BIG: usize = 100_000;
    send_tenant(&q, "a", BIG).await;
    for k in SMALL {
        send_tenant(&q, k, SMALL_EACH).await;
    }
    let keys = q.fairness_keys(3).await.unwrap();
    assert_eq!((keys[0].key.as_str(), keys[0].ready), ("a", BIG as u64));
    assert_eq!((keys[0].weight, keys[1].ready), (1, SMALL_EACH as u64));
    let (counts, _) = consume_until(&q, small_all_delivered).await;
    let big_left = BIG - counts.get("a").copied().unwrap_or(0);
    assert!(
        big_left > 90_000,
        "the small tenants waited for {} of the big one's messages",
        BIG - big_left
    );
    assert_eq!(q.stats().await.unwrap().ready as usize, big_left);
    q.purge().await.unwrap();
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn first_in_first_out_starves_small_tenants<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    const BIG: usize = 5_000;
    send_tenant(&q, "a", BIG).await;
    for k in SMALL {
        send_tenant(&q, k, SMALL_EACH).await;
    }
    let (_, log) = consume_until(&q, small_all_delivered).await;
    let first_small = log.iter().position(|t| t != "a").unwrap();
    assert!(
        first_small >= BIG - CONSUMERS * 10,
        "without fair mode the big tenant's backlog goes first (first small at {first_small})"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn weights_share_claims<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().fair(true)).await;
    q.set_weight("heavy", 3).await.unwrap();
    const EACH: usize = 3_000;
    send_tenant(&q, "heavy", EACH).await;
    send_tenant(&q, "light", EACH).await;
    // Both keep messages waiting throughout: stop after 2 400 deliveries.
    let (counts, log) = consume_until(&q, |c| c.values().sum::<usize>() >= 2_400).await;
    assert!(counts["light"] < EACH && counts["heavy"] < EACH);
    // Every stretch of 400 deliveries (in the order the consumers got them) is 3:1 within 20 %.
    for window in log.chunks(400).filter(|w| w.len() == 400) {
        let heavy = window.iter().filter(|t| *t == "heavy").count() as f64;
        let ratio = heavy / (400.0 - heavy);
        assert!(
            (2.4..=3.6).contains(&ratio),
            "heavy:light {ratio:.2} in a stretch of 400"
        );
    }
    let keys = q.fairness_keys(10).await.unwrap();
    let heavy = keys.iter().find(|k| k.key == "heavy").unwrap();
    assert_eq!(heavy.weight, 3);
    // Messages claimed and not settled count in flight under their key.
    let held = q.receive(8, LEASE).await.unwrap();
    let mut expected = HashMap::<String, u64>::new();
    for d in &held {
        *expected
            .entry(String::from_utf8(d.body.clone()).unwrap())
            .or_default() += 1;
    }
    let in_flight: HashMap<String, u64> = q
        .fairness_keys(10)
        .await
        .unwrap()
        .into_iter()
        .filter(|k| k.in_flight > 0)
        .map(|k| (k.key, k.in_flight))
        .collect();
    assert_eq!(in_flight, expected);
    let receipts: Vec<_> = held.iter().map(|d| d.receipt()).collect();
    q.ack_batch(&receipts).await.unwrap();
    // The counters: every message sent arrived once; every one acked has settled.
    for k in q.fairness_keys(10).await.unwrap() {
        let acked = counts[&k.key] as u64 + expected.get(&k.key).copied().unwrap_or(0);
        assert_eq!((k.arrived, k.settled), (EACH as u64, acked), "{k:?}");
        assert_eq!(k.ready, EACH as u64 - acked, "{k:?}");
    }
    // Bad input: typed errors, nothing written.
    for bad in [0, sqlmq::queue::MAX_WEIGHT + 1] {
        assert!(matches!(
            q.set_weight("x", bad).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        q.send(Message::new("x").fairness_key("")).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(
        !q.fairness_keys(100)
            .await
            .unwrap()
            .iter()
            .any(|k| k.key == "x")
    );
    q.purge().await.unwrap();
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn retries_and_delayed_messages_take_their_turn<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().fair(true)).await;
    send_tenant(&q, "a", 200).await;
    // A delayed message of tenant b, due in a moment, and one of c without a key in between.
    q.send(
        Message::new("b")
            .fairness_key("b")
            .delay(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    q.send(Message::new("none")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    q.maintain().await.unwrap();
    // The due message and the keyless one come before most of a's backlog.
    let got = q.receive(20, LEASE).await.unwrap();
    let bodies: Vec<String> = got
        .iter()
        .map(|d| String::from_utf8(d.body.clone()).unwrap())
        .collect();
    assert!(bodies.contains(&"b".to_owned()), "{bodies:?}");
    assert!(bodies.contains(&"none".to_owned()), "{bodies:?}");
    // A nacked message of a goes back in line by its key's share, not at the head.
    let a = got.iter().find(|d| d.body == b"a").unwrap();
    q.nack(a.receipt(), Some(Duration::ZERO), "again")
        .await
        .unwrap();
    let receipts: Vec<_> = got
        .iter()
        .filter(|d| d.id != a.id)
        .map(|d| d.receipt())
        .collect();
    q.ack_batch(&receipts).await.unwrap();
    let rest = q.receive(1000, LEASE).await.unwrap();
    // 202 sent, 20 claimed, one of them back.
    assert_eq!(rest.len(), 183);
    // The keys with messages in flight: only a's (b's and the keyless one are acked). A
    // retried message arrives once more, and counts as settled when it left: a's 200 and its
    // nack's return arrived; 17 acked and the nack settled; 183 in flight.
    let keys = q.fairness_keys(10).await.unwrap();
    let counts: Vec<(&str, u64, u64, u64, u64)> = keys
        .iter()
        .map(|k| (k.key.as_str(), k.ready, k.in_flight, k.arrived, k.settled))
        .collect();
    assert_eq!(counts, [("a", 0, 183, 201, 18)]);
    let receipts: Vec<_> = rest.iter().map(|d| d.receipt()).collect();
    q.ack_batch(&receipts).await.unwrap();
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_big_tenant_delays_no_other,
        first_in_first_out_starves_small_tenants,
        weights_share_claims,
        retries_and_delayed_messages_take_their_turn,
    ],
);
