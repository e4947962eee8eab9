//! The worker runtime on consumer groups: handlers of topic records run like queue handlers
//! (typed and raw, retries, exactly-once effects), and a `kill -9`'d group member's in-flight
//! records go to a live member long before their leases end (this test binary run again as a
//! child process).

use std::collections::{BTreeMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::topic::StartAt;
use sqlmq::{
    Client, Delivery, GroupConfig, JobContext, MessageId, Outcome, Record, TopicConfig, Worker,
};
use sqlmq_testkit::{Recorder, TestBackend, TestDb, Value, child_test, eventually_async};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(60);
const HEARTBEAT: Duration = Duration::from_millis(200);

#[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Eq, Hash, Clone)]
struct Click {
    user: u32,
}

impl sqlmq::Job for Click {
    const NAME: &'static str = "click";
}

/// A typed job handled: its user and the record's key.
type TypedSeen = (u32, Option<String>);

fn fast<B: TestBackend>(
    builder: sqlmq::worker::WorkerBuilder<B>,
) -> sqlmq::worker::WorkerBuilder<B> {
    builder
        .lease(LEASE)
        .heartbeat_interval(HEARTBEAT)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
}

pub(crate) async fn a_worker_runs_typed_and_raw_group_handlers_with_retries_and_exactly_once_effects<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    db.exec(
        "CREATE TABLE effects (part INT NOT NULL, off BIGINT NOT NULL, PRIMARY KEY (part, off))",
        &[],
    )
    .await;
    let t = client
        .create_topic("clicks", TopicConfig::default().partitions(4))
        .await
        .unwrap();
    for g in ["audit", "typed"] {
        t.create_group(g, GroupConfig::default(), StartAt::Earliest)
            .await
            .unwrap();
    }
    let records: Vec<Record> = (0..200)
        .map(|i| {
            Record::json(&Click { user: i })
                .unwrap()
                .key(format!("user-{}", i % 17))
        })
        .collect();
    t.publish_batch(records).await.unwrap();

    // Raw handler: fails every fifth record's first attempt, then writes its effect and acks in
    // one transaction.
    let attempts: Arc<Mutex<BTreeMap<(u32, i64), u32>>> = Arc::default();
    let typed: Arc<Mutex<Vec<TypedSeen>>> = Arc::default();
    let (a, ty) = (attempts.clone(), typed.clone());
    let token = CancellationToken::new();
    let worker = tokio::spawn(
        fast(Worker::builder(&client))
            .topic_group_raw("clicks", "audit", move |d: Delivery, ctx: JobContext<B>| {
                let a = a.clone();
                async move {
                    let (part, off) = (d.partition.unwrap(), d.offset.unwrap());
                    assert_eq!((ctx.partition(), ctx.offset()), (Some(part), Some(off)));
                    assert_eq!(ctx.source_name(), "clicks/audit");
                    assert!(ctx.queue().is_none() && ctx.group().is_some());
                    a.lock().unwrap().insert((part, off), ctx.attempt());
                    if off % 5 == 0 && ctx.attempt() == 1 {
                        return Ok(Outcome::Retry {
                            after: Duration::ZERO,
                            reason: "first try fails".into(),
                        });
                    }
                    let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
                    B::execute(
                        &mut *tx,
                        "INSERT INTO effects (part, off) VALUES (?, ?)",
                        &[Value::from(part), Value::from(off)],
                    )
                    .await;
                    tx.commit().await.map_err(|e| e.to_string())?;
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .topic_group("clicks", "typed", move |c: Click, ctx: JobContext<B>| {
                let ty = ty.clone();
                async move {
                    ty.lock()
                        .unwrap()
                        .push((c.user, ctx.ordering_key().map(str::to_owned)));
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .queue_concurrency("clicks/typed", 3)
            .run(token.clone()),
    );
    let audit = t.group("audit").await.unwrap();
    let typed_group = t.group("typed").await.unwrap();
    eventually_async(Duration::from_secs(30), "both groups done", || async {
        let done = typed.lock().unwrap().len() >= 200
            && db.count("group_leases").await == 0
            && audit.lag().await.unwrap().unconsumed == 0
            && typed_group.lag().await.unwrap().unconsumed == 0
            && audit.retries(10).await.unwrap().is_empty();
        done.then_some(())
    })
    .await;
    token.cancel();
    let report = worker.await.unwrap().unwrap();

    let effects: Vec<(i32, i64)> = db
        .query("SELECT part, off FROM effects", &[])
        .await
        .iter()
        .map(|r| (r[0].int() as i32, r[1].int()))
        .collect();
    assert_eq!(effects.len(), 200, "one effect per record, exactly");
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(attempts.len(), 200);
    for ((_, off), attempt) in attempts.iter() {
        let expected = if off % 5 == 0 { 2 } else { 1 };
        assert_eq!(*attempt, expected, "attempt of offset {off}");
    }
    let retried = attempts.keys().filter(|(_, off)| off % 5 == 0).count() as u64;
    assert_eq!(report.retried, retried);
    assert_eq!(report.acked, 400, "every record of both groups acked once");
    let typed = typed.lock().unwrap().clone();
    let users: HashSet<u32> = typed.iter().map(|(u, _)| *u).collect();
    assert_eq!(users, (0..200).collect(), "every typed job decoded once");
    assert!(
        typed
            .iter()
            .all(|(u, k)| k.as_deref() == Some(&*format!("user-{}", u % 17)))
    );
    db.drop().await;
}

pub(crate) async fn a_worker_refuses_unknown_and_broadcast_groups<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default())
        .await
        .unwrap();
    t.create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let raw = |_d: Delivery, _ctx: JobContext<B>| async { Ok::<_, String>(Outcome::Done) };
    let run = |topic: &str, group: &str| {
        Worker::builder(&client)
            .topic_group_raw(topic, group, raw)
            .run(CancellationToken::new())
    };
    assert!(matches!(
        run("t", "nope").await,
        Err(sqlmq::Error::UnknownGroup { .. })
    ));
    assert!(matches!(
        run("nope", "g").await,
        Err(sqlmq::Error::UnknownTopic(_))
    ));
    assert!(matches!(
        run("t", "b").await,
        Err(sqlmq::Error::InvalidArgument(_))
    ));
    assert!(matches!(
        run("t", "bad name").await,
        Err(sqlmq::Error::InvalidName { .. })
    ));
    assert!(client.processes().await.unwrap().is_empty());
    db.drop().await;
}

/// The child's side: `SQLMQ_CHILD_MEMBER=<database>`: claim every record of group `g` and
/// never finish; only a kill -9 ends it.
pub(crate) fn child_member<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_MEMBER") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = Client::<B>::open(&B::url_of(&database)).await.unwrap();
        fast(Worker::builder(&client))
            .concurrency(100)
            .topic_group_raw("t", "g", |_d: Delivery, _ctx: JobContext<B>| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, String>(Outcome::Done)
            })
            .run(CancellationToken::new())
            .await
            .unwrap();
    });
}

fn spawn_member<B: TestBackend>(db: &TestDb<B>) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &child_test::<B>("topic_worker", "child_member")])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_MEMBER", &db.name)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

pub(crate) async fn a_killed_members_records_go_to_a_live_member_before_their_leases_expire<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let published: HashSet<MessageId> = t
        .publish_batch((0..40).map(|i| Record::new(format!("{i}"))).collect())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();

    let mut child = spawn_member(&db);
    eventually_async(
        Duration::from_secs(20),
        "the child holding every record",
        || async { (db.count("group_leases").await == 40).then_some(()) },
    )
    .await;
    child.kill().unwrap(); // SIGKILL: no deregistration, no release
    child.wait().unwrap();
    let killed_at = Instant::now();

    let handled = Recorder::default();
    let token = CancellationToken::new();
    let survivor = tokio::spawn(
        fast(Worker::builder(&client))
            .topic_group_raw("t", "g", handled.clone())
            .run(token.clone()),
    );
    eventually_async(
        Duration::from_secs(30),
        "the survivor handling all 40",
        || async { (handled.count() >= 40).then_some(()) },
    )
    .await;
    let took = killed_at.elapsed();
    token.cancel();
    let report = survivor.await.unwrap().unwrap();
    assert!(
        took < LEASE / 4,
        "took {took:?}: the records must come back long before their {LEASE:?} leases end"
    );
    let handled = handled.ids();
    assert_eq!(handled, published, "every record handled");
    assert_eq!(report.acked, 40);
    assert_eq!(g.lag().await.unwrap().unconsumed, 0);
    assert_eq!(db.count("group_leases").await, 0);
    // The trace names the dead member's release.
    let trace = t.trace(*handled.iter().next().unwrap()).await.unwrap();
    let events = format!("{trace:?}");
    assert!(events.contains("stopped heartbeating"), "{events}");
    assert!(
        client.processes().await.unwrap().is_empty(),
        "the dead process was pruned, the survivor deregistered"
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [a_worker_runs_typed_and_raw_group_handlers_with_retries_and_exactly_once_effects, a_worker_refuses_unknown_and_broadcast_groups, a_killed_members_records_go_to_a_live_member_before_their_leases_expire],
    sync: [child_member]
);
