//! A server killed and restarted under a running worker and producer: both carry on by
//! themselves within 5 s of the server accepting connections again (no process restart, no
//! rebuilt client), and every message whose send returned Ok is handled.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::worker::CancellationToken;
use sqlmq::{Client, Message, MessageId, QueueConfig, Worker};
use sqlmq_testkit::Recorder;

use sqlmq_testkit::PrivateServer;

/// How soon after the server accepts connections again both must be back at work.
const RECOVERY: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_and_a_producer_recover_by_themselves_from_a_server_kill_9_and_restart() {
    let mut server = PrivateServer::install();
    server.start();
    server.wait_ready().await;
    PrivateServer::create_database(&server.url("mysql"), "app").await;
    let client = Client::builder()
        .connect_timeout(Duration::from_secs(2))
        .open::<sqlmq::MySql>(&server.url("app"))
        .await
        .unwrap();
    client.migrate().await.unwrap();
    client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();

    // The producer: one message every 10 ms, remembering which sends returned Ok and when.
    let sent: Arc<Mutex<Vec<(MessageId, Instant)>>> = Arc::default();
    let stop_producing = CancellationToken::new();
    let producer = {
        let (client, sent, stop) = (client.clone(), sent.clone(), stop_producing.clone());
        tokio::spawn(async move {
            let q = client.queue("q").await.unwrap();
            while !stop.is_cancelled() {
                let id = MessageId::new();
                match q.send(Message::new("m").with_id(id)).await {
                    Ok(_) => sent.lock().unwrap().push((id, Instant::now())),
                    // Sends retry by themselves for a while; one may still give up while
                    // the server is away, which the caller sees as a transient error.
                    Err(e) => assert!(e.is_retryable(), "a send failed for good: {e}"),
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    // The worker: a raw handler recording ids (with the time each was handled).
    let handled = Recorder::default();
    let handled_at: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let stop_working = CancellationToken::new();
    let worker = {
        let at = handled_at.clone();
        let recorder = handled.clone();
        let builder = Worker::builder(&client)
            .queue_raw(
                "q",
                move |d: sqlmq::Delivery, _ctx: sqlmq::JobContext<sqlmq::MySql>| {
                    at.lock().unwrap().push(Instant::now());
                    recorder.0.lock().unwrap().push(d.id);
                    std::future::ready(Ok::<_, String>(sqlmq::Outcome::Done))
                },
            )
            .lease(Duration::from_secs(3))
            .poll_interval(Duration::from_millis(5), Duration::from_millis(100));
        let stop = stop_working.clone();
        tokio::spawn(async move { builder.run(stop).await })
    };

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(handled.count() > 10, "running before the crash");
    server.kill9();
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.start();
    server.wait_ready().await;
    let ready = Instant::now();

    let back = |times: Vec<Instant>| times.into_iter().find(|t| *t > ready);
    let deadline = ready + RECOVERY;
    let (mut producing, mut working) = (None, None);
    while Instant::now() < deadline && (producing.is_none() || working.is_none()) {
        producing = producing.or_else(|| back(sent.lock().unwrap().iter().map(|s| s.1).collect()));
        working = working.or_else(|| back(handled_at.lock().unwrap().clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let producing = producing.expect("the producer sends again within 5 s of the restart");
    let working = working.expect("the worker handles again within 5 s of the restart");
    eprintln!(
        "back after the server accepted connections: producer {:?}, worker {:?}",
        producing - ready,
        working - ready
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_producing.cancel();
    producer.await.unwrap();
    let sent = sent.lock().unwrap().clone();
    let outage = sent.windows(2).map(|w| w[1].1 - w[0].1).max().unwrap();
    assert!(
        outage >= Duration::from_secs(1),
        "the producer did see the server go"
    );
    let sent: HashSet<MessageId> = sent.iter().map(|s| s.0).collect();
    // Messages claimed when the server died come back when their 3 s leases end.
    let drained = Instant::now() + Duration::from_secs(30);
    while !sent.is_subset(&handled.ids()) {
        assert!(
            Instant::now() < drained,
            "some sent messages were never handled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_working.cancel();
    worker
        .await
        .unwrap()
        .expect("the worker never stopped on its own");
}
