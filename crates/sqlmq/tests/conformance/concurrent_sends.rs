//! Concurrent `send`s through one queue handle, and `publish`es through one topic handle,
//! share commits (group commit in the client) and still answer each on its own.

use std::collections::HashSet;
use std::time::Duration;

use sqlmq::{Message, MessageId, QueueConfig, Record, TopicConfig};
use sqlmq_testkit::{TestBackend, TestDb, check_invariants, eventually_async, queue};
use tokio::task::JoinSet;

const LEASE: Duration = Duration::from_secs(30);
const SENDERS: usize = 64;

/// A burst of sends through clones of one handle: fresh messages are written once each,
/// resent ids come back as duplicates of their originals, keyed and delayed messages keep
/// what makes them so — and the burst took fewer commits than sends (rows written by one
/// statement share its timestamp).
pub(crate) async fn concurrent_sends_share_commits_and_answer_each_alone<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let stored: Vec<Message> = (0..8).map(|i| Message::new(format!("s{i}"))).collect();
    q.send_batch(stored.clone()).await.unwrap();
    let stamps_before = db
        .scalar("SELECT COUNT(DISTINCT created_at) FROM sqlmq_messages")
        .await;

    let mut sends = JoinSet::new();
    for i in 0..SENDERS {
        let q = q.clone();
        let m = match i % 8 {
            // A resend of a stored message, with another body: a duplicate.
            0 => stored[i / 8].clone(),
            1 => Message::new(format!("k{i}")).ordering_key("k"),
            2 => Message::new(format!("d{i}")).delay(Duration::from_secs(3600)),
            _ => Message::new(format!("m{i}")),
        };
        sends.spawn(async move {
            let id = m.id();
            let sent = q.send(m).await.unwrap();
            assert_eq!(sent.id, id);
            (i, sent.duplicate)
        });
    }
    let mut answers = Vec::new();
    while let Some(a) = sends.join_next().await {
        answers.push(a.unwrap());
    }
    for (i, duplicate) in answers {
        assert_eq!(duplicate, i % 8 == 0, "send {i}: duplicate flag");
    }

    let fresh = (SENDERS - SENDERS / 8) as i64;
    assert_eq!(db.count("messages").await, 8 + fresh);
    let stamps = db
        .scalar("SELECT COUNT(DISTINCT created_at) FROM sqlmq_messages")
        .await
        - stamps_before;
    assert!(
        stamps <= (SENDERS / 2) as i64,
        "{fresh} sends through one handle at once wrote at {stamps} distinct times: they did \
         not share commits"
    );

    // Everything but the delayed messages is ready, each once; the keyed ones one at a time.
    let mut seen = HashSet::new();
    loop {
        let got = q.receive(100, LEASE).await.unwrap();
        if got.is_empty() {
            break;
        }
        for d in &got {
            assert!(seen.insert(d.id), "{} delivered twice", d.id);
            assert!(!d.body.starts_with(b"d"), "a delayed message came early");
        }
        q.ack_batch(&got.iter().map(|d| d.receipt()).collect::<Vec<_>>())
            .await
            .unwrap();
    }
    assert_eq!(seen.len(), 8 + fresh as usize - SENDERS / 8);
    check_invariants(&db).await;
    db.drop().await;
}

/// When the shared commit of a burst fails as a whole because of one message (here a trigger
/// refuses one body), every other message of the burst is still written, and only that one
/// send fails.
pub(crate) async fn one_bad_message_never_fails_the_sends_it_shared_a_commit_with<
    B: TestBackend,
>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    refuse_poison(&db, "sqlmq_messages").await;

    let mut sends = JoinSet::new();
    let mut ids = Vec::new();
    for i in 0..SENDERS {
        let q = q.clone();
        let m = if i == SENDERS / 2 {
            Message::new("poison")
        } else {
            Message::new(format!("m{i}"))
        };
        ids.push(m.id());
        sends.spawn(async move { (i, q.send(m).await) });
    }
    while let Some(a) = sends.join_next().await {
        let (i, sent) = a.unwrap();
        if i == SENDERS / 2 {
            let e = sent.expect_err("the poison message was written");
            assert!(e.to_string().contains("poison refused"), "{e}");
        } else {
            sent.unwrap_or_else(|e| panic!("send {i} failed with the poison message: {e}"));
        }
    }
    assert_eq!(db.count("messages").await, SENDERS as i64 - 1);
    let mut got: Vec<MessageId> = Vec::new();
    loop {
        let batch = q.receive(100, LEASE).await.unwrap();
        if batch.is_empty() {
            break;
        }
        got.extend(batch.iter().map(|d| d.id));
    }
    got.sort();
    ids.remove(SENDERS / 2);
    ids.sort();
    assert_eq!(got, ids);
    check_invariants(&db).await;
    db.drop().await;
}

/// A trigger on `table` that refuses to insert a row whose body is `poison`.
async fn refuse_poison<B: TestBackend>(db: &TestDb<B>, table: &str) {
    let poison = "706f69736f6e"; // "poison" in hexadecimal
    let trigger = match B::SCHEME {
        "mysql" => format!(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON {table} FOR EACH ROW \
             IF NEW.body = X'{poison}' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison refused'; END IF"
        ),
        _ => format!(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON {table} FOR EACH ROW \
             WHEN NEW.body = X'{poison}' BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
        ),
    };
    db.exec(&trigger, &[]).await;
}

/// The same for a topic: a burst of publishes through clones of one handle, with resent ids,
/// two publishes of one new id at once and one record a trigger refuses: each resend is a
/// duplicate, exactly one of the pair is not, the refused publish alone fails, and every other
/// record is logged once with dense offsets per partition.
pub(crate) async fn concurrent_publishes_share_commits_and_answer_each_alone<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    // Where a publish writes its rows: records wait for offsets in `topic_pending` where the
    // backend has one, and go straight to the log where the publish gives them.
    let pending = db.tables().await.iter().any(|t| t == "sqlmq_topic_pending");
    refuse_poison(
        &db,
        if pending {
            "sqlmq_topic_pending"
        } else {
            "sqlmq_topic_log"
        },
    )
    .await;
    let stored: Vec<Record> = (0..8).map(|i| Record::new(format!("s{i}"))).collect();
    t.publish_batch(stored.clone()).await.unwrap();
    let twin = Record::new("twin");

    let mut publishes = JoinSet::new();
    for i in 0..SENDERS {
        let t = t.clone();
        let r = match i % 8 {
            0 => stored[i / 8].clone(),
            1 if i == 1 || i == 9 => twin.clone(),
            2 if i == 2 => Record::new("poison"),
            _ => Record::new(format!("r{i}")).key(format!("k{i}")),
        };
        publishes.spawn(async move { (i, t.publish(r).await) });
    }
    let mut twins = Vec::new();
    while let Some(a) = publishes.join_next().await {
        let (i, published) = a.unwrap();
        match i {
            2 => {
                let e = published.expect_err("the poison record was published");
                assert!(e.to_string().contains("poison refused"), "{e}");
            }
            1 | 9 => twins.push(published.unwrap().duplicate),
            _ => {
                let p = published.unwrap_or_else(|e| panic!("publish {i} failed: {e}"));
                assert_eq!(p.duplicate, i % 8 == 0, "publish {i}: duplicate flag");
            }
        }
    }
    twins.sort();
    assert_eq!(
        twins,
        [false, true],
        "one of two publishes of one id is the original"
    );

    // 8 stored, 64 publishes minus 8 resends, one twin and the poison.
    let expected = 8 + SENDERS - 8 - 1 - 1;
    let logged = eventually_async(Duration::from_secs(10), "all sequenced", || async {
        let rows = db
            .query(
                "SELECT partition_no, msg_offset FROM sqlmq_topic_log \
                 ORDER BY partition_no, msg_offset",
                &[],
            )
            .await;
        (rows.len() >= expected).then_some(rows)
    })
    .await;
    assert_eq!(logged.len(), expected, "each record logged once");
    for p in 0..2 {
        let offsets: Vec<i64> = logged
            .iter()
            .filter(|r| r[0].int() == p)
            .map(|r| r[1].int())
            .collect();
        assert_eq!(offsets, (0..offsets.len() as i64).collect::<Vec<_>>());
    }
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [concurrent_sends_share_commits_and_answer_each_alone, one_bad_message_never_fails_the_sends_it_shared_a_commit_with, concurrent_publishes_share_commits_and_answer_each_alone]
);
