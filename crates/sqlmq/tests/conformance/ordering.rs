//! The ordering guarantee of the guide (docs/guide/src/guarantees.md): strict per-key FIFO under 8 concurrent consumers, with retries; a
//! keyed message is never handed out while an earlier one with its key is unacked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use sqlmq::queue::Backoff;
use sqlmq::{Message, QueueConfig};
use sqlmq_testkit::{TestBackend, check_invariants, queue};

const KEYS: usize = 40;
const PER_KEY: usize = 25;
const CONSUMERS: usize = 8;
const PRODUCERS: usize = 4;

#[derive(Default)]
struct Observed {
    /// Keys currently held by some consumer.
    in_flight: HashMap<String, usize>,
    /// Per key, the sequence numbers in the order they were acked.
    acked: HashMap<String, Vec<usize>>,
}

pub(crate) async fn per_key_fifo_holds_under_eight_consumers_with_retries<B: TestBackend>() {
    let config = QueueConfig::default()
        .max_attempts(100)
        .backoff(Backoff::Ladder(vec![Duration::from_millis(30)]));
    let (db, _client, q) = queue::<B>(config).await;
    let observed = Arc::new(Mutex::new(Observed::default()));

    // Producers own disjoint keys and send one message at a time, interleaving across keys, so
    // that each key's send order is well defined while sends to different keys race.
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = q.clone();
            tokio::spawn(async move {
                for seq in 0..PER_KEY {
                    for k in (p..KEYS).step_by(PRODUCERS) {
                        let msg = Message::new(seq.to_string()).ordering_key(format!("key-{k}"));
                        q.send(msg).await.unwrap();
                    }
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (q, observed) = (q.clone(), observed.clone());
            tokio::spawn(async move {
                let mut idle = 0;
                while idle < 100 {
                    let batch = q.receive(4, Duration::from_secs(60)).await.unwrap();
                    if batch.is_empty() {
                        idle += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    idle = 0;
                    for d in batch {
                        let key = d.ordering_key.clone().expect("keyed");
                        {
                            let mut o = observed.lock().unwrap();
                            let holders = o.in_flight.entry(key.clone()).or_default();
                            assert_eq!(*holders, 0, "two messages of {key} handed out at once");
                            *holders += 1;
                        }
                        let (pause, fail) = {
                            let mut rng = rand::rng();
                            (rng.random_range(0..3), rng.random_bool(0.15))
                        };
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                        let seq: usize =
                            String::from_utf8(d.body.clone()).unwrap().parse().unwrap();
                        {
                            let mut o = observed.lock().unwrap();
                            *o.in_flight.get_mut(&key).unwrap() -= 1;
                            if !fail {
                                o.acked.entry(key.clone()).or_default().push(seq);
                            }
                        }
                        if fail {
                            q.nack(d.receipt(), None, "transient").await.unwrap();
                        } else {
                            q.ack(d.receipt()).await.unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    for c in consumers {
        c.await.unwrap();
    }

    let acked = std::mem::take(&mut observed.lock().unwrap().acked);
    assert_eq!(acked.len(), KEYS);
    let expected: Vec<usize> = (0..PER_KEY).collect();
    for (key, seqs) in &acked {
        assert_eq!(seqs, &expected, "order of {key}");
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(stats.pending() + stats.dead, 0, "{stats:?}");
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_delayed_or_dead_head_holds_then_releases_its_key<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    let lease = Duration::from_secs(30);
    q.send(
        Message::new("first")
            .ordering_key("k")
            .delay(Duration::from_millis(400)),
    )
    .await
    .unwrap();
    q.send(Message::new("second").ordering_key("k"))
        .await
        .unwrap();
    q.send(Message::new("other")).await.unwrap();
    // Only the unkeyed message: "second" waits behind the delayed "first".
    let got = q.receive(10, lease).await.unwrap();
    assert_eq!(
        got.iter().map(|d| d.body.as_slice()).collect::<Vec<_>>(),
        [b"other".as_slice()]
    );
    let first = sqlmq_testkit::eventually_async(Duration::from_secs(5), "delayed head", || async {
        q.receive(10, lease).await.unwrap().pop()
    })
    .await;
    assert_eq!(first.body, b"first");
    assert!(
        q.receive(10, lease).await.unwrap().is_empty(),
        "second waits while first is in flight"
    );
    // The head dies (one attempt only): the key moves on.
    q.nack(first.receipt(), None, "fatal").await.unwrap();
    let second = q
        .receive(10, lease)
        .await
        .unwrap()
        .pop()
        .expect("released by the dead head");
    assert_eq!(second.body, b"second");
    q.ack(second.receipt()).await.unwrap();
    // The redriven head starts at the back of its key's line.
    q.send(Message::new("third").ordering_key("k"))
        .await
        .unwrap();
    q.redrive_all().await.unwrap();
    let order: Vec<Vec<u8>> = {
        let mut out = Vec::new();
        for _ in 0..2 {
            let d = q.receive(10, lease).await.unwrap().pop().unwrap();
            out.push(d.body.clone());
            q.ack(d.receipt()).await.unwrap();
        }
        out
    };
    assert_eq!(order, [b"third".to_vec(), b"first".to_vec()]);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn cancelling_a_keyed_message_keeps_the_line_moving<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let lease = Duration::from_secs(30);
    let a = q
        .send(Message::new("a").ordering_key("k"))
        .await
        .unwrap()
        .id;
    let b = q
        .send(Message::new("b").ordering_key("k"))
        .await
        .unwrap()
        .id;
    q.send(Message::new("c").ordering_key("k")).await.unwrap();
    q.cancel(b).await.unwrap(); // a waiting successor
    q.cancel(a).await.unwrap(); // the head
    let d = q.receive(10, lease).await.unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].body, b"c");
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_batch_with_many_keys_queues_each_key_in_order<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let batch: Vec<Message> = (0..3000)
        .map(|i| Message::new(format!("{}", i / 300)).ordering_key(format!("k{}", i % 300)))
        .collect();
    q.send_batch(batch).await.unwrap();
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.blocked), (300, 2700));
    let mut last: HashMap<String, i32> = HashMap::new();
    loop {
        let got = q.receive(1000, Duration::from_secs(30)).await.unwrap();
        if got.is_empty() {
            break;
        }
        let mut keys = std::collections::HashSet::new();
        for d in &got {
            let key = d.ordering_key.clone().unwrap();
            assert!(keys.insert(key.clone()), "one head per key per claim");
            let n: i32 = String::from_utf8(d.body.clone()).unwrap().parse().unwrap();
            let prev = last.insert(key, n).unwrap_or(-1);
            assert_eq!(n, prev + 1);
        }
        let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
        q.ack_batch(&receipts).await.unwrap();
    }
    assert!(last.values().all(|&n| n == 9));
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [per_key_fifo_holds_under_eight_consumers_with_retries, a_delayed_or_dead_head_holds_then_releases_its_key, cancelling_a_keyed_message_keeps_the_line_moving, a_batch_with_many_keys_queues_each_key_in_order]
);
