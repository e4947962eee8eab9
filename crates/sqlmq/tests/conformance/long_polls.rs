//! Long polls (`receive_wait`): waiters of one client wait in a line per queue or group and are
//! answered first come, first served; a send from another client (another process, as far as
//! in-process wakeups go) reaches them through the shared probe; a wait that ends claims
//! nothing and frees its seat. (What waiting costs the server is counted in
//! `tests/mysql/long_polls.rs`.)

use std::time::Duration;

use sqlmq::topic::StartAt;
use sqlmq::{Client, Error, GroupConfig, Message, QueueConfig, Record, TopicConfig};
use sqlmq_testkit::{TestBackend, TestDb, eventually_async};
use tokio::task::JoinHandle;

const LEASE: Duration = Duration::from_secs(60);
/// Longer than any test waits: only an answer ends these waits.
const LONG: Duration = Duration::from_secs(60);

/// Wait until `n` long polls of `client` are seated.
async fn seated<B: TestBackend>(client: &Client<B>, n: usize) {
    eventually_async(Duration::from_secs(10), "long polls seated", || async {
        (client.long_polls() == n).then_some(())
    })
    .await
}

/// Start `n` long polls on `queue` one after another (each seated before the next starts).
async fn line_up<B: TestBackend>(
    client: &Client<B>,
    queue: &str,
    n: usize,
    batch: usize,
) -> Vec<JoinHandle<Vec<sqlmq::Delivery>>> {
    let mut waiters = Vec::new();
    for i in 0..n {
        let q = client.queue(queue).await.unwrap();
        waiters.push(tokio::spawn(async move {
            q.receive_wait(batch, LEASE, LONG).await.unwrap()
        }));
        seated(client, i + 1).await;
    }
    waiters
}

async fn waiters_are_answered_in_arrival_order_by_sends_from_another_client<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let (waiting, sending) = (db.client().await, db.client().await);
    waiting
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let q = sending.queue("q").await.unwrap();
    let mut waiters = line_up(&waiting, "q", 4, 1).await;
    for (i, waiter) in waiters.drain(..).enumerate() {
        q.send(Message::new(format!("m{i}"))).await.unwrap();
        // No wakeup crosses clients: the shared probe finds the message, and the oldest
        // waiter gets it.
        let got = waiter.await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].body, format!("m{i}").into_bytes());
        // (The next in line was called after this full batch of one, found nothing and sat
        // down again at the front.)
        seated(&waiting, 3 - i).await;
    }
    db.drop().await;
}

async fn a_local_send_answers_at_once_and_a_full_batch_calls_the_next<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    // A probe far too slow to matter: only the local send's call can answer in time.
    client.set_probe_interval(Duration::from_secs(30), Duration::from_secs(30));
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let waiters = line_up(&client, "q", 3, 2).await;
    q.send_batch((0..5).map(|i| Message::new(format!("m{i}"))).collect())
        .await
        .unwrap();
    let mut sizes = Vec::new();
    for waiter in waiters {
        let got = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("answered by the local send, not the 30 s probe")
            .unwrap();
        sizes.push(got.len());
    }
    // The first took a full batch of 2, so it called the second, which did the same. The
    // prober, woken by the send's commit, may also call the third while the second is on its
    // way back to the front of the line: then the third claims first and takes the second
    // batch of 2. Either way every waiter is answered long before the 30 s probe.
    assert_eq!(sizes[0], 2, "{sizes:?}");
    let mut rest = sizes[1..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, [1, 2], "{sizes:?}");
    assert_eq!(client.long_polls(), 0);
    db.drop().await;
}

async fn a_wait_that_ends_claims_nothing_and_frees_its_seat<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let (waiting, sending) = (db.client().await, db.client().await);
    let q = waiting
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    // Times out: empty, and its seat is gone.
    let started = std::time::Instant::now();
    let got = q
        .receive_wait(1, LEASE, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(got.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(waiting.long_polls(), 0);
    // Dropped while waiting (an HTTP client that went away): the seat is freed at once.
    let waiters = line_up(&waiting, "q", 3, 1).await;
    for w in &waiters {
        w.abort();
    }
    for w in waiters {
        assert!(w.await.unwrap_err().is_cancelled());
    }
    assert_eq!(waiting.long_polls(), 0);
    // Nobody claims for the departed: a message sent now stays ready through many probes.
    let other = sending.queue("q").await.unwrap();
    other.send(Message::new("later")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = other.receive(1, LEASE).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].attempt, 1, "never claimed before");
    db.drop().await;
}

async fn a_group_long_poll_is_answered_by_a_publish_from_another_client<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let (waiting, publishing) = (db.client().await, db.client().await);
    let topic = waiting
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let group = topic
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let g = group.clone();
    let waiter = tokio::spawn(async move { g.receive_wait(10, LEASE, LONG).await.unwrap() });
    seated(&waiting, 1).await;
    publishing
        .topic("t")
        .await
        .unwrap()
        .publish(Record::new("r").key("k"))
        .await
        .unwrap();
    let got = waiter.await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, b"r");
    group.ack(got[0].receipt()).await.unwrap();
    db.drop().await;
}

async fn bad_long_polls_fail_at_once_with_typed_errors<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    for (n, lease) in [(0, LEASE), (1001, LEASE), (1, Duration::ZERO)] {
        let result = tokio::time::timeout(Duration::from_secs(5), q.receive_wait(n, lease, LONG))
            .await
            .expect("refused before waiting");
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{n} {lease:?}: {result:?}"
        );
    }
    assert_eq!(client.long_polls(), 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    waiters_are_answered_in_arrival_order_by_sends_from_another_client,
    a_local_send_answers_at_once_and_a_full_batch_calls_the_next,
    a_wait_that_ends_claims_nothing_and_frees_its_seat,
    a_group_long_poll_is_answered_by_a_publish_from_another_client,
    bad_long_polls_fail_at_once_with_typed_errors,
]);
