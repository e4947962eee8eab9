//! The bad input guarantee of the guide (docs/guide/src/guarantees.md): clear typed errors, and nothing half-written.

use std::time::Duration;

use sqlmq::queue::{Backoff, Receipt};
use sqlmq::{Client, Error, Message, MessageId, QueueConfig};
use sqlmq_testkit::{TestBackend, TestDb, queue};

/// Every table that a rejected call must leave untouched.
const TABLES: [&str; 8] = [
    "messages",
    "ready",
    "scheduled",
    "leases",
    "dead",
    "dedup",
    "key_heads",
    "blocked",
];

async fn assert_nothing_written<B: TestBackend>(db: &TestDb<B>) {
    for t in TABLES {
        assert_eq!(db.count(t).await, 0, "{t} was written to");
    }
}

pub(crate) async fn invalid_names_are_rejected_before_anything_is_written<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    for bad in [
        "",
        "has space",
        "slash/name",
        "ünï",
        "semi;colon",
        &"x".repeat(129),
    ] {
        match client.create_queue(bad, QueueConfig::default()).await {
            Err(Error::InvalidName {
                kind: "queue",
                name,
            }) => assert_eq!(name, bad),
            other => panic!("{bad:?}: expected InvalidName, got {other:?}"),
        }
        assert!(matches!(
            client.queue(bad).await,
            Err(Error::InvalidName { .. })
        ));
    }
    assert_eq!(db.count("queues").await, 0);
    db.drop().await;
}

pub(crate) async fn unknown_queues_are_a_typed_error<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    match client.queue("nope").await {
        Err(Error::UnknownQueue(name)) => assert_eq!(name, "nope"),
        other => panic!("expected UnknownQueue, got {other:?}"),
    }
    assert!(matches!(
        client.delete_queue("nope").await,
        Err(Error::UnknownQueue(_))
    ));
    db.drop().await;
}

pub(crate) async fn bad_messages_are_rejected_and_nothing_is_written<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let limit = client.max_payload_bytes();
    let oversized = Message::new(vec![7u8; limit + 1]);
    match q.send(oversized.clone()).await {
        Err(Error::PayloadTooLarge { size, limit: l }) => assert_eq!((size, l), (limit + 1, limit)),
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    // exactly at the limit is fine... but check the rejections first
    let bad: Vec<(&str, Message)> = vec![
        ("empty ordering key", Message::new("x").ordering_key("")),
        (
            "long ordering key",
            Message::new("x").ordering_key("k".repeat(129)),
        ),
        (
            "control char in key",
            Message::new("x").ordering_key("a\u{7}b"),
        ),
        (
            "empty idempotency key",
            Message::new("x").idempotency_key(""),
        ),
        (
            "delay beyond ten years",
            Message::new("x").delay(Duration::from_secs(11 * 366 * 24 * 3600)),
        ),
        (
            "huge headers",
            Message::new("x").header("h", "v".repeat(70_000)),
        ),
    ];
    for (what, msg) in bad {
        match q.send(msg.clone()).await {
            Err(Error::InvalidArgument(text)) => assert!(!text.is_empty(), "{what}"),
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
        // in a batch of good messages, the whole batch is refused
        let batch = vec![Message::new("good"), msg, Message::new("good too")];
        assert!(q.send_batch(batch).await.is_err(), "{what} in a batch");
        let mut tx = client.begin().await.unwrap();
        assert!(
            q.send_in(&mut tx, Message::new("y").ordering_key(""))
                .await
                .is_err()
        );
        tx.commit().await.unwrap();
    }
    assert_nothing_written(&db).await;
    q.send(Message::new(vec![1u8; limit])).await.unwrap();
    db.drop().await;
}

pub(crate) async fn out_of_range_arguments_are_rejected<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    for n in [0, sqlmq::Queue::MAX_RECEIVE + 1] {
        assert!(
            matches!(
                q.receive(n, Duration::from_secs(1)).await,
                Err(Error::InvalidArgument(_))
            ),
            "n={n}"
        );
    }
    for lease in [
        Duration::ZERO,
        sqlmq::Queue::MAX_LEASE + Duration::from_secs(1),
    ] {
        assert!(
            matches!(q.receive(1, lease).await, Err(Error::InvalidArgument(_))),
            "{lease:?}"
        );
    }
    let receipt = Receipt {
        id: MessageId::new(),
        token: 1,
    };
    assert!(matches!(
        q.extend(receipt, Duration::ZERO).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(q.ack(receipt).await, Err(Error::LeaseLost { .. })));
    assert!(matches!(
        q.cancel(receipt.id).await,
        Err(Error::MessageNotFound(_))
    ));
    assert!(q.redrive(&[receipt.id]).await.unwrap().is_empty());

    let bad_configs = [
        QueueConfig::default().max_attempts(0),
        QueueConfig::default().backoff(Backoff::Ladder(vec![])),
        QueueConfig::default().backoff(Backoff::Exponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
            jitter: 2.0,
        }),
    ];
    for config in bad_configs {
        assert!(matches!(
            client.create_queue("other", config).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    for text in ["", "x", "not-a-uuid:1", &format!("{}:-1", MessageId::new())] {
        assert!(
            matches!(text.parse::<Receipt>(), Err(Error::InvalidArgument(_))),
            "{text:?}"
        );
    }
    assert!(matches!(
        "1s,soon".parse::<Backoff>(),
        Err(Error::InvalidArgument(_))
    ));
    assert_nothing_written(&db).await;
    db.drop().await;
}

pub(crate) async fn bad_client_options_are_rejected<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let bad_prefix = Client::builder()
        .table_prefix("no-dashes")
        .open::<B>(&db.url)
        .await;
    assert!(
        matches!(bad_prefix, Err(Error::InvalidArgument(_))),
        "{bad_prefix:?}"
    );
    let bad_url = Client::<B>::open("postgres://nope").await;
    assert!(
        matches!(bad_url, Err(Error::InvalidArgument(_))),
        "{bad_url:?}"
    );
    let too_big = Client::builder()
        .max_payload_bytes(64 * 1024 * 1024)
        .open::<B>(&db.url)
        .await;
    assert!(
        matches!(too_big, Err(Error::InvalidArgument(_))),
        "{too_big:?}"
    );

    // On MySQL, a connection refused: the real cause comes back quickly and is retryable.
    #[cfg(feature = "mysql")]
    a_refused_connection_is_retryable().await;
    db.drop().await;
}

/// Nothing listens on the port: the real cause comes back quickly and is retryable.
#[cfg(feature = "mysql")]
async fn a_refused_connection_is_retryable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let refused = Client::builder()
        .connect_timeout(Duration::from_secs(3))
        .connect(&format!("mysql://root@127.0.0.1:{port}/test"))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    match refused {
        Err(e) => {
            assert!(e.is_retryable(), "{e}");
            assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
        }
        Ok(_) => panic!("connected to nothing"),
    }
}

/// Quotes, NUL, unicode and values exactly at their limits are stored and read back byte for
/// byte; headers that only escaping makes too large are a typed error, not a database error.
pub(crate) async fn hostile_values_are_stored_and_read_back_unchanged<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let name = "q".repeat(128);
    let q = client
        .create_queue(&name, QueueConfig::default())
        .await
        .unwrap();
    // 128 bytes of quotes, backslashes, SQL and unicode (é and 😀 take 2 and 4 bytes).
    let key = format!("'\"\\;--é😀{}", "k".repeat(128 - 12));
    assert_eq!(key.len(), 128);
    let mut headers = std::collections::BTreeMap::new();
    headers.insert("nul\u{0}key".to_owned(), "a\u{0}b\"'\\\n😀".to_owned());
    headers.insert("é".to_owned(), String::new());
    let body: Vec<u8> = (0..=255u8).chain([0, 0, 0xff]).collect();
    let mut message = Message::new(body.clone())
        .ordering_key(key.clone())
        .idempotency_key(key.clone());
    for (k, v) in &headers {
        message = message.header(k.clone(), v.clone());
    }
    q.send(message).await.unwrap();
    let got = q.receive(1, Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, body);
    assert_eq!(got[0].ordering_key.as_deref(), Some(key.as_str()));
    assert_eq!(got[0].idempotency_key.as_deref(), Some(key.as_str()));
    assert_eq!(got[0].headers, headers);
    q.ack(got[0].receipt()).await.unwrap();

    // Headers under the limit as raw bytes, far over it once their NULs are escaped.
    let escaped = Message::new("x").header("h", "\u{0}".repeat(20_000));
    match q.send(escaped).await {
        Err(Error::InvalidArgument(text)) => assert!(text.contains("headers"), "{text}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // Far above the body limit: refused before anything is sent to the database.
    let limit = client.max_payload_bytes();
    assert!(matches!(
        q.send(Message::new(vec![0u8; 10 * limit])).await,
        Err(Error::PayloadTooLarge { .. })
    ));
    assert_eq!(db.count("messages").await, 0);

    // Topics: a 255-byte record key of the same kind, and the same headers and body.
    let t = client
        .create_topic(&name, sqlmq::TopicConfig::default())
        .await
        .unwrap();
    let record_key = format!("{key}{}", "r".repeat(255 - 128));
    let mut record = sqlmq::Record::new(body.clone()).key(record_key.clone());
    for (k, v) in &headers {
        record = record.header(k.clone(), v.clone());
    }
    let id = t.publish(record).await.unwrap().id;
    t.sequence().await.unwrap();
    let back = t.query_key(&record_key, 10).await.unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].id, id);
    assert_eq!(back[0].body, body);
    assert_eq!(back[0].key.as_deref(), Some(record_key.as_str()));
    assert_eq!(back[0].headers, headers);
    let escaped = sqlmq::Record::new("x").header("h", "\u{1}".repeat(20_000));
    assert!(matches!(
        t.publish(escaped).await,
        Err(Error::InvalidArgument(_))
    ));
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [invalid_names_are_rejected_before_anything_is_written, unknown_queues_are_a_typed_error, bad_messages_are_rejected_and_nothing_is_written, out_of_range_arguments_are_rejected, bad_client_options_are_rejected, hostile_values_are_stored_and_read_back_unchanged]
);
