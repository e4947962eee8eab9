//! An in-memory database: everything works in one process, and nothing is shared or left.

use std::time::Duration;

use sqlmq::topic::StartAt;
use sqlmq::{Client, JobContext, Message, Outcome, QueueConfig, Record, Sqlite};
use sqlmq::{GroupConfig, TopicConfig, Worker};

async fn memory_client() -> Client<Sqlite> {
    let client = Client::<Sqlite>::open("sqlite::memory:").await.unwrap();
    client.migrate().await.unwrap();
    client
}

/// Guarantee: `sqlite::memory:` serves queues, the worker runtime and topics in one process —
/// the setting for unit tests of an application's handlers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_workers_and_topics_run_in_memory() {
    let client = memory_client().await;
    assert!(
        !client.server().durable(),
        "an in-memory database says it is not durable"
    );
    let q = client
        .create_queue("jobs", QueueConfig::default())
        .await
        .unwrap();
    for i in 0..20 {
        q.send(Message::new(format!("{i}"))).await.unwrap();
    }
    let report = Worker::builder(&client)
        .queue_raw(
            "jobs",
            |d: sqlmq::Delivery, _ctx: JobContext<Sqlite>| async move {
                assert!(!d.body.is_empty());
                Ok::<_, std::convert::Infallible>(Outcome::Done)
            },
        )
        .stop_when_drained()
        .run(sqlmq::worker::CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(report.acked, 20, "{report:?}");
    assert_eq!(q.stats().await.unwrap().pending(), 0);

    let topic = client
        .create_topic("events", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let group = topic
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    topic
        .publish_batch((0..10).map(|i| Record::new(format!("{i}"))).collect())
        .await
        .unwrap();
    let mut got = 0;
    for _ in 0..50 {
        let batch = group.receive(10, Duration::from_secs(30)).await.unwrap();
        got += batch.len();
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        group.ack_batch(&receipts).await.unwrap();
        if got == 10 {
            break;
        }
    }
    assert_eq!(got, 10);
    assert_eq!(group.lag().await.unwrap().unconsumed, 0);
}

/// Guarantee: two in-memory clients are two databases: nothing leaks between tests.
#[tokio::test]
async fn each_in_memory_client_is_its_own_database() {
    let a = memory_client().await;
    let b = memory_client().await;
    a.create_queue("only_in_a", QueueConfig::default())
        .await
        .unwrap();
    assert!(a.queue("only_in_a").await.is_ok());
    assert!(matches!(
        b.queue("only_in_a").await,
        Err(sqlmq::Error::UnknownQueue(_))
    ));
}
