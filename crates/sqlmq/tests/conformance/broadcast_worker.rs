//! Broadcast members on the worker runtime: every member handles every committed record once,
//! in offset order per partition, while publishers commit out of order; a failing record holds
//! back only its partition and ends as that member's dead letter; a restarted member resumes
//! from its checkpoint, and a job transaction moves the position with the handler's writes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use sqlmq::queue::Backoff;
use sqlmq::topic::StartAt;
use sqlmq::worker::WorkerBuilder;
use sqlmq::{
    Client, Delivery, GroupConfig, JobContext, Outcome, Record, Topic, TopicConfig, Worker,
};
use sqlmq_testkit::{TestBackend, TestDb, Value, eventually_async};
use tokio_util::sync::CancellationToken;

/// What one member handled, in order: (partition, offset, body).
type Handled = Arc<Mutex<Vec<(u32, i64, String)>>>;

fn fast<B: TestBackend>(builder: WorkerBuilder<B>) -> WorkerBuilder<B> {
    builder.poll_interval(Duration::from_millis(5), Duration::from_millis(50))
}

async fn topic<B: TestBackend>(client: &Client<B>, partitions: u32) -> Topic<B> {
    client
        .create_topic("events", TopicConfig::default().partitions(partitions))
        .await
        .unwrap()
}

/// A raw handler that records what it handled and succeeds.
fn recorder<B: TestBackend>(
    seen: Handled,
) -> impl Fn(Delivery, JobContext<B>) -> std::future::Ready<Result<Outcome, String>> + Send + Sync {
    move |d: Delivery, ctx: JobContext<B>| {
        assert!(ctx.member().is_some());
        seen.lock().unwrap().push((
            d.partition.unwrap(),
            d.offset.unwrap(),
            String::from_utf8(d.body).unwrap(),
        ));
        std::future::ready(Ok(Outcome::Done))
    }
}

/// Wait until `seen` holds `n` records.
async fn until_handled(seen: &Handled, n: usize, what: &str) {
    eventually_async(Duration::from_secs(30), what, || async {
        (seen.lock().unwrap().len() >= n).then_some(())
    })
    .await;
}

/// Each partition's offsets in the order handled, checked to be 0, 1, 2, ... with no repeat.
fn assert_in_order(seen: &[(u32, i64, String)], member: &str) -> BTreeMap<u32, i64> {
    let mut next: BTreeMap<u32, i64> = BTreeMap::new();
    for (p, o, _) in seen {
        let expect = next.entry(*p).or_insert(0);
        assert_eq!(o, expect, "member {member}, partition {p}: {seen:?}");
        *expect += 1;
    }
    next
}

pub(crate) async fn every_member_handles_every_record_once_in_offset_order_while_publishers_commit_out_of_order<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 2).await;
    t.create_group("caches", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let members = ["a", "b", "c"];
    let seen: Vec<Handled> = members.iter().map(|_| Handled::default()).collect();
    let token = CancellationToken::new();
    let mut builder = fast(Worker::builder(&client)).concurrency(2);
    for (m, s) in members.into_iter().zip(&seen) {
        builder = builder.topic_broadcast_raw("events", "caches", m, recorder::<B>(s.clone()));
    }
    let worker = tokio::spawn(builder.run(token.clone()));
    // 8 publishers, each holding its transaction open a random while: commits land out of
    // the order in which the records were written.
    let publishers: Vec<_> = (0..8)
        .map(|p| {
            let (c, t) = (client.clone(), t.clone());
            tokio::spawn(async move {
                for i in 0..10 {
                    let mut tx = c.begin().await.unwrap();
                    let record = Record::new(format!("{p}-{i}")).key(format!("k{}", i % 3));
                    t.publish_in(&mut tx, record).await.unwrap();
                    let hold = rand::rng().random_range(0..20);
                    tokio::time::sleep(Duration::from_millis(hold)).await;
                    tx.commit().await.unwrap();
                }
            })
        })
        .collect();
    for p in publishers {
        p.await.unwrap();
    }
    for (m, s) in members.iter().zip(&seen) {
        until_handled(s, 80, &format!("member {m} handles all 80")).await;
    }
    // Nothing more arrives: no record is handled twice.
    tokio::time::sleep(Duration::from_millis(200)).await;
    token.cancel();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.acked, 240);
    let g = t.group("caches").await.unwrap();
    for (m, s) in members.iter().zip(&seen) {
        let seen = s.lock().unwrap().clone();
        assert_eq!(seen.len(), 80, "member {m}");
        let ends = assert_in_order(&seen, m);
        let mut bodies: Vec<&str> = seen.iter().map(|x| x.2.as_str()).collect();
        bodies.sort();
        bodies.dedup();
        assert_eq!(bodies.len(), 80, "member {m} saw every record once");
        // Its checkpoint is where it stopped.
        let mut reader = g.reader(m).await.unwrap();
        let positions: BTreeMap<u32, i64> = reader.positions().into_iter().collect();
        assert_eq!(positions, ends, "member {m}'s checkpoint");
        assert!(reader.poll(10).await.unwrap().is_empty());
    }
    let lag = g.lag().await.unwrap();
    assert_eq!(lag.members.len(), 3);
    assert!(lag.members.iter().all(|m| m.behind == 0), "{lag:?}");
    db.drop().await;
}

pub(crate) async fn a_failing_record_holds_back_only_its_partition_then_becomes_that_members_dead_letter<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 2).await;
    let config = GroupConfig::broadcast()
        .max_attempts(3)
        .backoff(Backoff::Ladder(vec![Duration::from_millis(300)]));
    t.create_group("nodes", config, StartAt::Earliest)
        .await
        .unwrap();
    // Partition 0: "flaky" (fails twice, then passes), "poison" (always fails for member a),
    // "after"; partition 1: five plain records.
    for body in ["flaky", "poison", "after"] {
        t.publish(Record::new(body).partition(0)).await.unwrap();
    }
    for i in 0..5 {
        t.publish(Record::new(format!("p1-{i}")).partition(1))
            .await
            .unwrap();
    }
    let (seen_a, seen_b) = (Handled::default(), Handled::default());
    let flaky_failures = Arc::new(Mutex::new(0u32));
    let handler = |seen: Handled, fails_poison: bool| {
        let flaky_failures = flaky_failures.clone();
        move |d: Delivery, ctx: JobContext<B>| {
            let (seen, flaky_failures) = (seen.clone(), flaky_failures.clone());
            async move {
                let body = String::from_utf8(d.body).unwrap();
                if body == "flaky" && fails_poison {
                    let mut n = flaky_failures.lock().unwrap();
                    if *n < 2 {
                        *n += 1;
                        assert_eq!(ctx.attempt(), *n);
                        return Err(format!("flaky failure {n}"));
                    }
                }
                if body == "poison" && fails_poison {
                    return Err(format!("poison, attempt {}", ctx.attempt()));
                }
                seen.lock()
                    .unwrap()
                    .push((d.partition.unwrap(), d.offset.unwrap(), body));
                Ok(Outcome::Done)
            }
        }
    };
    let token = CancellationToken::new();
    let worker = tokio::spawn(
        fast(Worker::builder(&client))
            .topic_broadcast_raw("events", "nodes", "a", handler(seen_a.clone(), true))
            .topic_broadcast_raw("events", "nodes", "b", handler(seen_b.clone(), false))
            .run(token.clone()),
    );
    // While "flaky" waits for its retries (300 ms each), partition 1 goes on, and nothing
    // after "flaky" in partition 0 is handled.
    until_handled(&seen_b, 8, "member b handles everything").await;
    eventually_async(
        Duration::from_secs(10),
        "member a handles partition 1",
        || async {
            let s = seen_a.lock().unwrap();
            (s.iter().filter(|x| x.0 == 1).count() == 5).then_some(())
        },
    )
    .await;
    assert!(
        seen_a.lock().unwrap().iter().all(|x| x.0 == 1),
        "partition 0 is held back by its failing head: {:?}",
        seen_a.lock().unwrap()
    );
    until_handled(
        &seen_a,
        7,
        "member a passes flaky, dead-letters poison, handles after",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    let report = worker.await.unwrap().unwrap();
    let a = seen_a.lock().unwrap().clone();
    let bodies: Vec<&str> = a
        .iter()
        .filter(|x| x.0 == 0)
        .map(|x| x.2.as_str())
        .collect();
    assert_eq!(
        bodies,
        ["flaky", "after"],
        "poison skipped after its attempts"
    );
    assert_eq!(report.dead_lettered, 1);
    assert_eq!(
        report.retried,
        2 + 2,
        "flaky's two failures, poison's first two"
    );

    let g = t.group("nodes").await.unwrap();
    let dead = g.member_dead_letters(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let d = &dead[0];
    assert_eq!(d.member.as_deref(), Some("a"));
    assert_eq!((d.partition, d.offset), (Some(0), Some(1)));
    assert_eq!(d.body, b"poison");
    assert_eq!(d.attempts, 3);
    let errors: Vec<&str> = d.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(
        errors,
        [
            "poison, attempt 1",
            "poison, attempt 2",
            "poison, attempt 3"
        ]
    );
    assert!(
        g.member_dead_letters(Some("b"), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The trace names the member for which the record died.
    let trace = t.trace(d.id).await.unwrap().unwrap();
    let group = trace.groups.iter().find(|x| x.group == "nodes").unwrap();
    assert_eq!(group.dead_for, ["a"], "{group:?}");
    assert_eq!(
        g.purge_member_dead_letters(Some("a"), None).await.unwrap(),
        1
    );
    assert!(g.member_dead_letters(None, 10).await.unwrap().is_empty());
    db.drop().await;
}

pub(crate) async fn a_restarted_member_resumes_from_its_checkpoint_and_a_job_transaction_moves_it_with_its_writes<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    db.exec(
        "CREATE TABLE effects (part INT NOT NULL, off BIGINT NOT NULL, PRIMARY KEY (part, off))",
        &[],
    )
    .await;
    let t = topic(&client, 2).await;
    t.create_group("views", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let run = |n: u64| {
        let handler = |d: Delivery, ctx: JobContext<B>| async move {
            let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
            B::execute(
                &mut *tx,
                "INSERT INTO effects (part, off) VALUES (?, ?)",
                &[
                    Value::from(d.partition.unwrap() as i64),
                    Value::from(d.offset.unwrap()),
                ],
            )
            .await;
            tx.commit().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(Outcome::Done)
        };
        fast(Worker::builder(&client))
            .topic_broadcast_raw("events", "views", "one", handler)
            // Checkpoints of their own only rarely: the job transactions carry the position.
            .checkpoint_every(1000, Duration::from_secs(3600))
            .max_messages(n)
            .run(CancellationToken::new())
    };
    for i in 0..10 {
        t.publish(Record::new(format!("{i}")).partition(i % 2))
            .await
            .unwrap();
    }
    assert_eq!(run(6).await.unwrap().acked, 6);
    for i in 10..20 {
        t.publish(Record::new(format!("{i}")).partition(i % 2))
            .await
            .unwrap();
    }
    assert_eq!(run(14).await.unwrap().acked, 14, "resumes: 14 left");
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM effects").await,
        20,
        "each record's effect once"
    );
    let g = t.group("views").await.unwrap();
    let mut reader = g.reader("one").await.unwrap();
    assert_eq!(reader.positions(), [(0, 10), (1, 10)]);
    assert!(reader.poll(10).await.unwrap().is_empty());
    // A cluster group is refused, and so is a member name that is not one.
    t.create_group("work", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let refused = Worker::builder(&client)
        .topic_broadcast_raw("events", "work", "one", recorder::<B>(Handled::default()))
        .run(CancellationToken::new())
        .await;
    assert!(
        matches!(&refused, Err(sqlmq::Error::InvalidArgument(m)) if m.contains("cluster")),
        "{refused:?}"
    );
    let refused = Worker::builder(&client)
        .topic_broadcast_raw(
            "events",
            "views",
            "no spaces",
            recorder::<B>(Handled::default()),
        )
        .run(CancellationToken::new())
        .await;
    assert!(
        matches!(refused, Err(sqlmq::Error::InvalidName { .. })),
        "{refused:?}"
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [every_member_handles_every_record_once_in_offset_order_while_publishers_commit_out_of_order, a_failing_record_holds_back_only_its_partition_then_becomes_that_members_dead_letter, a_restarted_member_resumes_from_its_checkpoint_and_a_job_transaction_moves_it_with_its_writes]
);
