//! Notifications on SQLite: a commit by another client (another process, as far as the waiting
//! one knows) changes the database's write-ahead log, the operating system says so, and the
//! waiting long poll and idle worker are answered long before their probes would look.

use std::time::Duration;

use sqlmq::worker::CancellationToken;
use sqlmq::{Client, Message, QueueConfig, Sqlite, Worker};
use sqlmq_testkit::{Recorder, TestDb, eventually_async};

const LEASE: Duration = Duration::from_secs(30);
/// Far longer than any wait below: only a notification answers in time.
const SLOW_PROBE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_by_another_client_wakes_a_long_poll_and_an_idle_worker_through_the_wal() {
    let db = TestDb::<Sqlite>::new().await;
    db.migrate().await;
    let waiting = Client::<Sqlite>::open(&db.url).await.unwrap();
    waiting.set_probe_interval(SLOW_PROBE, SLOW_PROBE);
    let sender = Client::builder()
        .notifications(false)
        .open::<Sqlite>(&db.url)
        .await
        .unwrap();
    let q = waiting
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    waiting.start_notifications();
    eventually_async(Duration::from_secs(10), "notifications live", || async {
        waiting.notifications().is_live().then_some(())
    })
    .await;
    for i in 0..3 {
        let poll = {
            let q = q.clone();
            tokio::spawn(async move { q.receive_wait(1, LEASE, Duration::from_secs(50)).await })
        };
        eventually_async(Duration::from_secs(10), "seated", || async {
            (waiting.long_polls() == 1).then_some(())
        })
        .await;
        let body = format!("m{i}");
        sender
            .queue("q")
            .await
            .unwrap()
            .send(Message::new(body.clone()))
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(20), poll)
            .await
            .expect("woken by the WAL's change, not the 60 s probe")
            .unwrap()
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].body, body.as_bytes());
        q.ack(got[0].receipt()).await.unwrap();
    }

    // An idle worker whose probe ceiling is a minute.
    let handled = Recorder::default();
    let recorder = handled.clone();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker::builder(&waiting)
            .poll_interval(SLOW_PROBE, SLOW_PROBE)
            .queue_raw(
                "q",
                move |d: sqlmq::Delivery, _ctx: sqlmq::JobContext<Sqlite>| {
                    recorder.0.lock().unwrap().push(d.id);
                    std::future::ready(Ok::<_, String>(sqlmq::Outcome::Done))
                },
            )
            .run(stop.clone()),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    sender
        .queue("q")
        .await
        .unwrap()
        .send(Message::new("to the worker"))
        .await
        .unwrap();
    eventually_async(Duration::from_secs(20), "handled", || async {
        (handled.count() == 1).then_some(())
    })
    .await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    db.drop().await;
}
