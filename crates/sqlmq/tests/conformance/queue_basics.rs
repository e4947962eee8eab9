//! The queue lifecycle against a real server: send, receive, ack, nack, retries, dead letters,
//! redrive, delays, priorities, pause, cancel, purge, idempotency.

use std::time::{Duration, Instant};

use sqlmq::queue::{Backoff, NackOutcome};
use sqlmq::{Error, Message, QueueConfig};
use sqlmq_testkit::{TestBackend, check_invariants, eventually_async, queue};

const LEASE: Duration = Duration::from_secs(30);

pub(crate) async fn send_receive_ack<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let sent = q
        .send(Message::new("hello").header("k", "v"))
        .await
        .unwrap();
    assert!(!sent.duplicate);

    let got = q.receive(10, LEASE).await.unwrap();
    assert_eq!(got.len(), 1);
    let d = &got[0];
    assert_eq!(d.id, sent.id);
    assert_eq!(d.body, b"hello");
    assert_eq!(d.attempt, 1);
    assert_eq!(d.token, 1);
    assert_eq!(d.headers.get("k").map(String::as_str), Some("v"));
    assert!(
        q.receive(10, LEASE).await.unwrap().is_empty(),
        "a leased message is not handed out again"
    );

    q.ack(d.receipt()).await.unwrap();
    assert_eq!(db.count("messages").await, 0);
    assert_eq!(db.count("leases").await, 0);
    // acking twice: the lease is gone
    assert!(matches!(
        q.ack(d.receipt()).await,
        Err(Error::LeaseLost { .. })
    ));
    db.drop().await;
}

pub(crate) async fn priorities_then_fifo<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let batch = vec![
        Message::new("low-1").priority(5),
        Message::new("high-1").priority(-5),
        Message::new("mid-1"),
        Message::new("high-2").priority(-5),
        Message::new("mid-2"),
    ];
    q.send_batch(batch).await.unwrap();
    let order: Vec<String> = q
        .receive(10, LEASE)
        .await
        .unwrap()
        .iter()
        .map(|d| String::from_utf8(d.body.clone()).unwrap())
        .collect();
    assert_eq!(order, ["high-1", "high-2", "mid-1", "mid-2", "low-1"]);
    db.drop().await;
}

pub(crate) async fn nack_retries_then_dead_letters_with_history_and_redrive_brings_back<
    B: TestBackend,
>() {
    let config = QueueConfig::default()
        .max_attempts(3)
        .backoff(Backoff::Ladder(vec![Duration::ZERO]));
    let (db, _client, q) = queue::<B>(config).await;
    let id = q.send(Message::new("poison")).await.unwrap().id;
    for attempt in 1..=3u32 {
        let d = eventually_async(Duration::from_secs(5), "redelivery", || async {
            q.receive(1, LEASE).await.unwrap().pop()
        })
        .await;
        assert_eq!((d.id, d.attempt), (id, attempt));
        let outcome = q
            .nack(d.receipt(), None, &format!("boom {attempt}"))
            .await
            .unwrap();
        let expected = if attempt < 3 {
            NackOutcome::Retry {
                after: Duration::ZERO,
            }
        } else {
            NackOutcome::DeadLettered
        };
        assert_eq!(outcome, expected);
    }
    assert!(q.receive(1, LEASE).await.unwrap().is_empty());
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id, id);
    assert_eq!(dead[0].attempts, 3);
    let errors: Vec<&str> = dead[0].errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(errors, ["boom 1", "boom 2", "boom 3"]);
    assert_eq!(q.stats().await.unwrap().dead, 1);

    assert_eq!(q.redrive(&[id]).await.unwrap(), vec![id]);
    let d = q
        .receive(1, LEASE)
        .await
        .unwrap()
        .pop()
        .expect("redriven message");
    assert_eq!((d.id, d.attempt), (id, 1), "attempts start over");
    assert_eq!(d.token, 4, "tokens keep growing across a redrive");
    q.ack(d.receipt()).await.unwrap();
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn backoff_delays_the_retry<B: TestBackend>() {
    let config = QueueConfig::default().backoff(Backoff::Ladder(vec![Duration::from_millis(800)]));
    let (db, _client, q) = queue::<B>(config).await;
    q.send(Message::new("x")).await.unwrap();
    let d = q.receive(1, LEASE).await.unwrap().pop().unwrap();
    let nacked_at = Instant::now();
    q.nack(d.receipt(), None, "later").await.unwrap();
    let again = eventually_async(Duration::from_secs(10), "retry", || async {
        q.receive(1, LEASE).await.unwrap().pop()
    })
    .await;
    assert!(
        nacked_at.elapsed() >= Duration::from_millis(800),
        "retried after {:?}",
        nacked_at.elapsed()
    );
    assert_eq!(again.attempt, 2);
    db.drop().await;
}

pub(crate) async fn delayed_messages_are_not_delivered_early<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let delay = Duration::from_millis(1500);
    let sent_at = Instant::now();
    q.send(Message::new("later").delay(delay)).await.unwrap();
    q.send(Message::new("now")).await.unwrap();
    let first = q.receive(10, LEASE).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].body, b"now");
    let later = eventually_async(Duration::from_secs(10), "the delayed message", || async {
        let got = q.receive(10, LEASE).await.unwrap();
        // Every check before the delay has passed must come back empty.
        if sent_at.elapsed() < delay {
            assert!(got.is_empty(), "delivered after {:?}", sent_at.elapsed());
        }
        got.into_iter().next()
    })
    .await;
    assert!(sent_at.elapsed() >= delay);
    assert_eq!(later.body, b"later");
    db.drop().await;
}

pub(crate) async fn stale_tokens_are_rejected_and_change_nothing<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    q.send(Message::new("x")).await.unwrap();
    let first = q
        .receive(1, Duration::from_millis(200))
        .await
        .unwrap()
        .pop()
        .unwrap();
    // let the lease run out and someone else take it
    let second = eventually_async(Duration::from_secs(5), "re-claim after expiry", || async {
        q.receive(1, LEASE).await.unwrap().pop()
    })
    .await;
    assert_eq!(second.id, first.id);
    assert!(second.token > first.token);
    assert!(matches!(
        q.ack(first.receipt()).await,
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(
        q.extend(first.receipt(), LEASE).await,
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(
        q.nack(first.receipt(), None, "x").await,
        Err(Error::LeaseLost { .. })
    ));
    // the current holder is unaffected
    q.extend(second.receipt(), LEASE).await.unwrap();
    q.ack(second.receipt()).await.unwrap();
    db.drop().await;
}

pub(crate) async fn an_expired_lease_cannot_be_acked_even_before_it_is_released<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    q.send(Message::new("x")).await.unwrap();
    let d = q
        .receive(1, Duration::from_millis(100))
        .await
        .unwrap()
        .pop()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // no receive ran, so no sweep released it: the row is still there, but expired
    assert_eq!(db.count("leases").await, 1);
    assert!(matches!(
        q.ack(d.receipt()).await,
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(client.queue_stats().await.unwrap()[0].in_flight, 1);
    db.drop().await;
}

pub(crate) async fn extend_keeps_the_message<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    q.send(Message::new("x")).await.unwrap();
    // Four extensions 400 ms apart outlive the first lease of 1 s; each leaves 600 ms of
    // slack for a loaded machine (150 ms was once not enough under a parallel build).
    let d = q
        .receive(1, Duration::from_secs(1))
        .await
        .unwrap()
        .pop()
        .unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        q.extend(d.receipt(), Duration::from_secs(1)).await.unwrap();
        assert!(q.receive(1, LEASE).await.unwrap().is_empty());
    }
    q.ack(d.receipt()).await.unwrap();
    db.drop().await;
}

pub(crate) async fn lease_expiry_on_the_last_attempt_dead_letters<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    q.send(Message::new("x")).await.unwrap();
    q.receive(1, Duration::from_millis(50))
        .await
        .unwrap()
        .pop()
        .unwrap();
    let dead = eventually_async(Duration::from_secs(5), "dead letter", || async {
        q.maintain().await.unwrap();
        q.dead_letters(10).await.unwrap().pop()
    })
    .await;
    assert_eq!(dead.errors.last().unwrap().error, "lease expired");
    db.drop().await;
}

pub(crate) async fn pause_stops_delivery_at_once_and_resume_restarts_it<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    q.send(Message::new("x")).await.unwrap();
    q.pause().await.unwrap();
    assert!(q.receive(1, LEASE).await.unwrap().is_empty());
    assert!(q.stats().await.unwrap().paused);
    q.send(Message::new("y")).await.unwrap();
    q.resume().await.unwrap();
    assert_eq!(q.receive(10, LEASE).await.unwrap().len(), 2);
    db.drop().await;
}

pub(crate) async fn cancel_waiting_and_in_flight<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let a = q.send(Message::new("a")).await.unwrap().id;
    let b = q
        .send(Message::new("b").delay(Duration::from_secs(60)))
        .await
        .unwrap()
        .id;
    let c = q.send(Message::new("c")).await.unwrap().id;
    q.cancel(a).await.unwrap();
    q.cancel(b).await.unwrap();
    let d = q.receive(10, LEASE).await.unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].id, c);
    // In flight: cancelled where it runs; its ack then fails, and it is never delivered again.
    assert_eq!(q.cancel(c).await.unwrap(), sqlmq::queue::Cancelled::Running);
    assert!(matches!(q.cancel(a).await, Err(Error::MessageNotFound(_))));
    check_invariants(&db).await;
    assert!(
        matches!(q.ack(d[0].receipt()).await, Err(Error::Cancelled { id, .. }) if id == c),
        "the ack of a cancelled message"
    );
    assert!(q.receive(10, LEASE).await.unwrap().is_empty());
    db.drop().await;
}

pub(crate) async fn purge_removes_everything_but_dead_letters<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    let batch = (0..2500).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();
    q.send(Message::new("delayed").delay(Duration::from_secs(60)))
        .await
        .unwrap();
    q.send(Message::new("k1").ordering_key("k")).await.unwrap();
    q.send(Message::new("k2").ordering_key("k")).await.unwrap();
    let held = q.receive(5, LEASE).await.unwrap();
    q.nack(held[0].receipt(), None, "dies").await.unwrap();
    assert_eq!(
        q.purge().await.unwrap(),
        2502,
        "2503 sent, one of them dead"
    );
    let s = q.stats().await.unwrap();
    assert_eq!(
        (s.ready, s.scheduled, s.blocked, s.in_flight, s.dead),
        (0, 0, 0, 0, 1)
    );
    assert!(matches!(
        q.ack(held[1].receipt()).await,
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(db.count("key_heads").await, 0);
    check_invariants(&db).await;
    assert_eq!(q.purge_dead_letters().await.unwrap(), 1);
    assert_eq!(db.count("messages").await, 0);
    db.drop().await;
}

pub(crate) async fn idempotent_send_returns_the_original<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let first = q
        .send(Message::new("charge").idempotency_key("order-1"))
        .await
        .unwrap();
    let again = q
        .send(Message::new("charge again").idempotency_key("order-1"))
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.id, first.id);
    // in a batch, against the stored key and against itself
    let sent = q
        .send_batch(vec![
            Message::new("x").idempotency_key("order-1"),
            Message::new("y").idempotency_key("order-2"),
            Message::new("z").idempotency_key("order-2"),
        ])
        .await
        .unwrap();
    assert_eq!((sent[0].id, sent[0].duplicate), (first.id, true));
    assert!(!sent[1].duplicate);
    assert_eq!((sent[2].id, sent[2].duplicate), (sent[1].id, true));
    // still a duplicate after the original was processed
    for d in q.receive(10, LEASE).await.unwrap() {
        q.ack(d.receipt()).await.unwrap();
    }
    assert!(
        q.send(Message::new("late retry").idempotency_key("order-1"))
            .await
            .unwrap()
            .duplicate
    );
    assert!(q.receive(10, LEASE).await.unwrap().is_empty());
    db.drop().await;
}

/// Guarantee 8 for message ids: sending an id that is stored already (a retry after an
/// unknown COMMIT outcome, a resent clone) is a no-op that returns the original, alone, in a
/// batch, in the caller's transaction, and in a batch split into several statements.
pub(crate) async fn resending_a_stored_id_returns_the_original<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let original = Message::new("original");
    let first = q.send(original.clone()).await.unwrap();
    assert!(!first.duplicate);
    let again = q
        .send(Message::new("changed body").with_id(first.id))
        .await
        .unwrap();
    assert_eq!((again.id, again.duplicate), (first.id, true));

    // A batch: a stored id, a new one, and a repeat within the batch.
    let fresh = Message::new("fresh");
    let sent = q
        .send_batch(vec![original.clone(), fresh.clone(), fresh.clone()])
        .await
        .unwrap();
    let flags: Vec<bool> = sent.iter().map(|s| s.duplicate).collect();
    assert_eq!(flags, [true, false, true]);
    assert_eq!(db.count("messages").await, 2);

    // In the caller's transaction, which goes on and commits its other work.
    let mut tx = client.begin().await.unwrap();
    assert!(
        q.send_in(&mut tx, original.clone())
            .await
            .unwrap()
            .duplicate
    );
    let other = q.send_in(&mut tx, Message::new("other")).await.unwrap();
    assert!(!other.duplicate);
    tx.commit().await.unwrap();
    assert_eq!(db.count("messages").await, 3);

    // A batch of several INSERT statements (on MySQL: 1 024 rows each), with stored ids in its first and its last statement
    // and a repeat that spans statements: only those are skipped, the rest is stored.
    let mut batch: Vec<Message> = (0..1500).map(|i| Message::new(format!("b{i}"))).collect();
    batch[10] = original.clone();
    batch[1200] = fresh.clone();
    batch[1400] = batch[5].clone();
    let sent = q.send_batch(batch).await.unwrap();
    let dups: Vec<usize> = (0..sent.len()).filter(|&i| sent[i].duplicate).collect();
    assert_eq!(dups, [10, 1200, 1400]);
    assert_eq!(db.count("messages").await, 3 + 1497);
    assert_eq!(q.stats().await.unwrap().ready, 3 + 1497);

    // A batch whose rows go in statements of 64, 32 and 4 rows, with a stored id in the second:
    // the 64 rows the first statement stored are the batch's own, not resends.
    let mut batch: Vec<Message> = (0..100).map(|i| Message::new(format!("c{i}"))).collect();
    batch[70] = original.clone();
    let sent = q.send_batch(batch).await.unwrap();
    let dups: Vec<usize> = (0..sent.len()).filter(|&i| sent[i].duplicate).collect();
    assert_eq!(dups, [70]);
    assert_eq!(db.count("messages").await, 3 + 1497 + 99);
    assert_eq!(q.stats().await.unwrap().ready, 3 + 1497 + 99);

    // The original is what is delivered, once.
    let got = q.receive(1, LEASE).await.unwrap();
    assert_eq!(
        (got[0].id, got[0].body.as_slice()),
        (first.id, &b"original"[..])
    );

    // Concurrent senders of one new id: one stores it, the others wait for its commit and see
    // a duplicate.
    let racer = Message::new("raced");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (q, m) = (q.clone(), racer.clone());
            tokio::spawn(async move { q.send(m).await.unwrap().duplicate })
        })
        .collect();
    let mut stored = 0;
    for t in tasks {
        stored += usize::from(!t.await.unwrap());
    }
    assert_eq!(stored, 1);
    assert_eq!(db.count("messages").await, 3 + 1497 + 99 + 1);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn idempotency_keys_expire_with_their_window<B: TestBackend>() {
    let (db, _client, q) =
        queue::<B>(QueueConfig::default().dedup_window(Duration::from_millis(200))).await;
    let first = q
        .send(Message::new("a").idempotency_key("k"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = q
        .send(Message::new("b").idempotency_key("k"))
        .await
        .unwrap();
    assert!(!second.duplicate);
    assert_ne!(second.id, first.id);
    db.drop().await;
}

pub(crate) async fn concurrent_senders_of_one_key_store_one_message<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move {
                q.send(Message::new(format!("{i}")).idempotency_key("same"))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap());
    }
    assert_eq!(ids.iter().filter(|s| !s.duplicate).count(), 1);
    assert!(ids.iter().all(|s| s.id == ids[0].id));
    assert_eq!(db.count("messages").await, 1);
    db.drop().await;
}

/// A claim moves a message from `ready` to `leases` and a nack moves it back: stats read
/// while messages move count each exactly once (counts read by statements at different
/// instants counted some twice or not at all).
pub(crate) async fn stats_count_each_message_once_while_messages_move<B: TestBackend>() {
    const MESSAGES: u64 = 20;
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_attempts(1000)).await;
    for i in 0..MESSAGES {
        q.send(Message::new(format!("m{i}"))).await.unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (q, stop) = (q.clone(), stop.clone());
        tokio::spawn(async move {
            let mut moved = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for d in q.receive(MESSAGES as usize, LEASE).await.unwrap() {
                    q.nack(d.receipt(), Some(Duration::ZERO), "again")
                        .await
                        .unwrap();
                    moved += 1;
                }
            }
            moved
        })
    };
    let until = Instant::now() + Duration::from_secs(3);
    let mut reads = 0;
    while Instant::now() < until {
        let s = q.stats().await.unwrap();
        assert_eq!(
            s.ready + s.scheduled + s.in_flight + s.dead,
            MESSAGES,
            "every message counted once: {s:?}"
        );
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let moved = churn.await.unwrap();
    assert!(
        moved > 2 * MESSAGES && reads > 10,
        "messages moved {moved} times under {reads} reads: too few to prove anything"
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [send_receive_ack, priorities_then_fifo, nack_retries_then_dead_letters_with_history_and_redrive_brings_back, backoff_delays_the_retry, delayed_messages_are_not_delivered_early, stale_tokens_are_rejected_and_change_nothing, an_expired_lease_cannot_be_acked_even_before_it_is_released, extend_keeps_the_message, lease_expiry_on_the_last_attempt_dead_letters, pause_stops_delivery_at_once_and_resume_restarts_it, cancel_waiting_and_in_flight, purge_removes_everything_but_dead_letters, idempotent_send_returns_the_original, resending_a_stored_id_returns_the_original, idempotency_keys_expire_with_their_window, concurrent_senders_of_one_key_store_one_message, stats_count_each_message_once_while_messages_move]
);
