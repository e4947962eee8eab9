//! Schema versioning: migrations are idempotent and safe to run concurrently, an un-migrated
//! schema is reported, and an older build refuses a newer schema (the bad-input guarantee of the guide (docs/guide/src/guarantees.md); docs/design/schema-versions.md).

use sqlmq::{Client, Error, Message, QueueConfig};
use sqlmq_testkit::{TestBackend, TestDb, Value};
use std::time::Duration;

pub(crate) async fn an_older_build_refuses_a_newer_schema<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let current = client.schema_version();
    db.exec("INSERT INTO sqlmq_schema_migrations (version, description, applied_at) VALUES (?, 'from the future', '2026-01-01 00:00:00')", &[Value::from(current + 1)]).await;
    match Client::<B>::open(&db.admin_url).await {
        Err(Error::SchemaTooNew { found, supported }) => {
            assert_eq!((found, supported), (current + 1, current))
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    // A client that connected before the upgrade refuses to migrate backwards too.
    assert!(matches!(
        client.migrate().await,
        Err(Error::SchemaTooNew { .. })
    ));
    db.drop().await;
}

pub(crate) async fn an_unmigrated_database_is_reported_until_migrate<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = Client::<B>::open(&db.admin_url).await.unwrap();
    assert_eq!(client.schema_version(), 0);
    match client.create_queue("q", QueueConfig::default()).await {
        Err(Error::SchemaOutdated { found: 0, required }) => assert!(required >= 1),
        other => panic!("expected SchemaOutdated, got {other:?}"),
    }
    let report = client.migrate().await.unwrap();
    assert_eq!(report.from_version, 0);
    assert!(!report.applied.is_empty());
    let again = client.migrate().await.unwrap();
    assert!(again.applied.is_empty(), "a second migrate applies nothing");
    client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    db.drop().await;
}

pub(crate) async fn concurrent_migrations_are_harmless<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let url = db.admin_url.clone();
            tokio::spawn(async move {
                Client::<B>::open(&url)
                    .await
                    .unwrap()
                    .migrate()
                    .await
                    .unwrap()
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let versions: Vec<i64> = db.schema_versions().await;
    let expected: Vec<i64> = (1..=versions.len() as i64).collect();
    assert_eq!(versions, expected, "each version recorded once");
    let client = Client::<B>::open(&db.admin_url).await.unwrap();
    client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap()
        .send(Message::new("ok"))
        .await
        .unwrap();
    db.drop().await;
}

pub(crate) async fn table_prefixes_keep_installations_apart<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let a = Client::builder()
        .table_prefix("app_a_")
        .open::<B>(&db.admin_url)
        .await
        .unwrap();
    let b = Client::builder()
        .table_prefix("app_b_")
        .open::<B>(&db.admin_url)
        .await
        .unwrap();
    a.migrate().await.unwrap();
    b.migrate().await.unwrap();
    let qa = a
        .create_queue("jobs", QueueConfig::default())
        .await
        .unwrap();
    let qb = b
        .create_queue("jobs", QueueConfig::default())
        .await
        .unwrap();
    qa.send(Message::new("for a")).await.unwrap();
    assert!(
        qb.receive(10, std::time::Duration::from_secs(5))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        qa.receive(10, std::time::Duration::from_secs(5))
            .await
            .unwrap()
            .len(),
        1
    );
    let tables = db
        .tables()
        .await
        .iter()
        .filter(|t| t.starts_with("app_b_"))
        .count();
    assert!(tables >= 10, "app_b_ tables: {tables}");
    db.drop().await;
}

/// No table is named after a reserved word: with an empty prefix every table name is bare, and
/// the whole schema, queues and topics with their groups, must still work.
pub(crate) async fn an_empty_table_prefix_works_for_queues_and_topics<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = Client::builder()
        .table_prefix("")
        .open::<B>(&db.admin_url)
        .await
        .unwrap();
    client.migrate().await.unwrap();
    let q = client
        .create_queue("jobs", QueueConfig::default())
        .await
        .unwrap();
    q.send(Message::new("m").ordering_key("k")).await.unwrap();
    let d = q.receive(1, Duration::from_secs(5)).await.unwrap();
    q.ack(d[0].receipt()).await.unwrap();
    let t = client
        .create_topic("events", sqlmq::TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let g = t
        .create_group(
            "g",
            sqlmq::GroupConfig::default(),
            sqlmq::topic::StartAt::Earliest,
        )
        .await
        .unwrap();
    t.publish(sqlmq::Record::new("r").key("k")).await.unwrap();
    let got = g.receive(1, Duration::from_secs(5)).await.unwrap();
    assert_eq!(got.len(), 1);
    g.nack(got[0].receipt(), Some(Duration::ZERO), "again")
        .await
        .unwrap();
    let again = g.receive(1, Duration::from_secs(5)).await.unwrap();
    g.ack(again[0].receipt()).await.unwrap();
    assert_eq!(g.lag().await.unwrap().unconsumed, 0);
    assert!(t.trace(got[0].id).await.unwrap().is_some());
    let bare = db
        .tables()
        .await
        .iter()
        .filter(|t| ["queues", "key_heads", "consumer_groups", "topic_log"].contains(&t.as_str()))
        .count();
    assert_eq!(bare, 4);
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [an_older_build_refuses_a_newer_schema, an_unmigrated_database_is_reported_until_migrate, concurrent_migrations_are_harmless, table_prefixes_keep_installations_apart, an_empty_table_prefix_works_for_queues_and_topics]
);
