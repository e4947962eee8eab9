//! Upgrades keep every message (the guide, "Upgrading").
//!
//! One database is filled with messages and records in every state — ready, scheduled,
//! retrying with an error history, blocked behind an ordering key, in flight under a live
//! lease, under an expired one, held by a live worker process and by a dead one, dead letters,
//! a paused queue, an idempotency key; topic records with a cluster group's cursor, retries,
//! dead letters and an in-flight record, a broadcast member's checkpoint and a member's dead
//! letter. For each schema version from 1 to the newest, a second database is built with that
//! version's released migrations (pinned by fingerprint in the backends' schema tests), given
//! the rows of every table that version has, and migrated to the newest: every row must be as
//! it was, and every message must behave as before — each ready message delivered once, each
//! scheduled one at its time, each lease honoured (or released, for the dead process), each
//! dead letter redrivable, each group resuming where it was.
//!
//! Beside it: `migrate_to` going down and back up, refusing to drop rows, and the worker across
//! an upgrade (waits for `migrate`, stops cleanly after a newer one).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sqlmq::queue::Receipt;
use sqlmq::topic::StartAt;
use sqlmq::{
    Client, Delivery, Error, GroupConfig, JobContext, Message, Outcome, QueueConfig, Record,
    TopicConfig, Worker,
};
use sqlmq_testkit::{TestBackend, TestDb, Value, check_invariants, eventually_async};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A lease that outlives the test.
const LONG: Duration = Duration::from_secs(600);

/// The delay of the scheduled message that comes due during the test.
const SOON: Duration = Duration::from_secs(4);

/// What `populate` made, to be checked on each migrated copy.
struct Populated<B: TestBackend> {
    db: TestDb<B>,
    /// The receipt of the queue message in flight under a live lease.
    live: Receipt,
    /// The receipt of the head of ordering key `K` (k2 and k3 wait behind it).
    key_head: Receipt,
    /// When "soon" comes due (test clock, a little before the database's).
    soon_due: Instant,
    /// The owner id of the worker process that will be declared dead.
    gone_owner: String,
    /// The receipt of the cluster group's record in flight.
    group_live: Receipt,
    /// The offsets cluster group `g` handed out before the upgrade (never again after).
    group_seen: Vec<(u32, i64)>,
    /// Broadcast member `m1`'s checkpoint.
    positions: Vec<(u32, i64)>,
}

/// A worker on `queue` whose handler never returns: its message stays in flight, held by its
/// process, until the task is aborted. Returns the task and the process's owner id.
async fn holding_worker<B: TestBackend>(db: &TestDb<B>, queue: &str) -> (JoinHandle<()>, String) {
    let client = Client::<B>::open(&db.url).await.unwrap();
    let owner = client.owner_id().to_owned();
    let worker = Worker::builder(&client)
        .lease(LONG)
        .heartbeat_interval(LONG)
        .queue_raw(queue, |_d: Delivery, _ctx: JobContext<B>| async move {
            std::future::pending::<()>().await;
            Ok::<_, String>(Outcome::Done)
        });
    let task = tokio::spawn(async move {
        let _ = worker.run(CancellationToken::new()).await;
    });
    let q = client.queue(queue).await.unwrap();
    eventually_async(
        Duration::from_secs(10),
        "the worker holds its message",
        || {
            let q = q.clone();
            async move { (q.stats().await.unwrap().in_flight == 1).then_some(()) }
        },
    )
    .await;
    (task, owner)
}

/// Fill a database at the newest schema with messages and records in every state.
async fn populate<B: TestBackend>() -> Populated<B> {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("q", QueueConfig::default().max_attempts(5))
        .await
        .unwrap();
    // One at a time, so that each receive takes the message meant: in flight under a live
    // lease, under one that ends in a second, and failed once with a retry in an hour.
    q.send(Message::new("live")).await.unwrap();
    let live = q.receive(1, LONG).await.unwrap()[0].receipt();
    q.send(Message::new("expired")).await.unwrap();
    q.receive(1, Duration::from_secs(1)).await.unwrap();
    q.send(Message::new("retrying")).await.unwrap();
    let retrying = q.receive(1, LONG).await.unwrap()[0].receipt();
    q.nack(retrying, Some(Duration::from_secs(3600)), "first failure")
        .await
        .unwrap();
    for body in ["k1", "k2", "k3"] {
        q.send(Message::new(body).ordering_key("K")).await.unwrap();
    }
    let head = q.receive(1, LONG).await.unwrap();
    assert_eq!(head[0].body, b"k1");
    let key_head = head[0].receipt();
    q.send(Message::new("far").delay(Duration::from_secs(3600)))
        .await
        .unwrap();
    // In a queue of its own, so that it cannot come between the others' checks.
    let soon = client
        .create_queue("qsoon", QueueConfig::default())
        .await
        .unwrap();
    soon.send(Message::new("soon").delay(SOON)).await.unwrap();
    let soon_due = Instant::now() + SOON - Duration::from_millis(500);
    for i in 0..5 {
        q.send(Message::new(format!("r{i}")).header("n", i.to_string()))
            .await
            .unwrap();
    }
    q.send(Message::new("r-high").priority(10)).await.unwrap();
    q.send(Message::new("idem").idempotency_key("idem-1"))
        .await
        .unwrap();

    let dead = client
        .create_queue("qdead", QueueConfig::default().max_attempts(1))
        .await
        .unwrap();
    dead.send(Message::new("poison")).await.unwrap();
    let d = dead.receive(1, LONG).await.unwrap()[0].receipt();
    dead.nack(d, None, "boom").await.unwrap();

    let paused = client
        .create_queue("qpaused", QueueConfig::default())
        .await
        .unwrap();
    paused.send(Message::new("paused-msg")).await.unwrap();
    paused.pause().await.unwrap();

    for name in ["qgone", "qlive"] {
        let held = client
            .create_queue(name, QueueConfig::default())
            .await
            .unwrap();
        held.send(Message::new(format!("held-{name}")))
            .await
            .unwrap();
    }
    let (gone, gone_owner) = holding_worker(&db, "qgone").await;
    let (alive, _) = holding_worker(&db, "qlive").await;

    let t = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    for i in 0..10 {
        t.publish(Record::new(format!("e{i}")).key(format!("key{}", i % 3)))
            .await
            .unwrap();
    }
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let mut group_seen = Vec::new();
    let first = g.receive(3, LONG).await.unwrap();
    for d in &first {
        group_seen.push((d.partition.unwrap(), d.offset.unwrap()));
    }
    g.ack(first[0].receipt()).await.unwrap();
    g.ack(first[1].receipt()).await.unwrap();
    g.nack(
        first[2].receipt(),
        Some(Duration::from_secs(3600)),
        "group failure",
    )
    .await
    .unwrap();
    let in_flight = g.receive(1, LONG).await.unwrap();
    group_seen.push((
        in_flight[0].partition.unwrap(),
        in_flight[0].offset.unwrap(),
    ));
    let group_live = in_flight[0].receipt();
    let gd = t
        .create_group(
            "gd",
            GroupConfig::default().max_attempts(1),
            StartAt::Earliest,
        )
        .await
        .unwrap();
    let doomed = gd.receive(1, LONG).await.unwrap()[0].receipt();
    gd.nack(doomed, None, "group boom").await.unwrap();
    let b = t
        .create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let mut reader = b.reader("m1").await.unwrap();
    assert_eq!(reader.poll(4).await.unwrap().len(), 4);
    reader.checkpoint().await.unwrap();
    let positions = reader.positions();

    // A broadcast member's dead letter: member "a" fails "e0" once, and once is its limit.
    t.create_group(
        "bd",
        GroupConfig::broadcast().max_attempts(1),
        StartAt::Earliest,
    )
    .await
    .unwrap();
    let stop = CancellationToken::new();
    let member = Worker::builder(&client)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .topic_broadcast_raw(
            "t",
            "bd",
            "a",
            |d: Delivery, _ctx: JobContext<B>| async move {
                if d.body == b"e0" {
                    return Err("member boom".to_owned());
                }
                Ok(Outcome::Done)
            },
        )
        .run(stop.clone());
    let member = tokio::spawn(member);
    let bd = t.group("bd").await.unwrap();
    eventually_async(Duration::from_secs(10), "a member dead letter", || {
        let bd = bd.clone();
        async move {
            let dead = bd.member_dead_letters(None, 10).await.unwrap();
            (dead.len() == 1).then_some(())
        }
    })
    .await;
    stop.cancel();
    member.await.unwrap().unwrap();

    // Freeze: the holding workers' tasks end without deregistering (their rows and leases
    // stay, as a crash would leave them), and nothing else runs on this database.
    gone.abort();
    alive.abort();
    let _ = (gone.await, alive.await);
    client.pool().close().await;
    Populated {
        db,
        live,
        key_head,
        soon_due,
        gone_owner,
        group_live,
        group_seen,
        positions,
    }
}

/// The database of `source` rebuilt at schema `version`: that version's migrations, then the
/// rows of every table it has.
async fn rebuilt_at<B: TestBackend>(source: &TestDb<B>, version: i64) -> TestDb<B> {
    let db = TestDb::<B>::new().await;
    let admin = Client::<B>::open(&db.admin_url).await.unwrap();
    assert_eq!(admin.migrate_to(version).await.unwrap().to_version, version);
    admin.pool().close().await;
    for table in db.tables().await {
        // The migrations' own rows (versions, the probe's fixed row) are there already.
        if db.scalar(&format!("SELECT COUNT(*) FROM {table}")).await == 0 {
            db.copy_from(source, &table).await;
        }
    }
    db
}

/// Receive from `q` until `expected` bodies came (each once), for up to ten seconds.
async fn receive_all<B: TestBackend>(q: &sqlmq::Queue<B>, expected: usize) -> Vec<Delivery> {
    let mut got: Vec<Delivery> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < expected && Instant::now() < deadline {
        let batch = q.receive(100, LONG).await.unwrap();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        got.extend(batch);
    }
    got
}

fn bodies(deliveries: &[Delivery]) -> Vec<String> {
    let mut b: Vec<String> = deliveries
        .iter()
        .map(|d| String::from_utf8(d.body.clone()).unwrap())
        .collect();
    b.sort();
    b
}

/// The queue messages behave as before the upgrade.
async fn check_queues<B: TestBackend>(p: &Populated<B>, client: &Client<B>) {
    let q = client.queue("q").await.unwrap();
    let mut expected: Vec<String> = ["r0", "r1", "r2", "r3", "r4", "r-high", "idem", "expired"]
        .map(str::to_owned)
        .to_vec();
    expected.sort();
    let got = receive_all(&q, expected.len()).await;
    assert_eq!(
        bodies(&got),
        expected,
        "each ready message once, nothing held"
    );
    let by_body: BTreeMap<String, &Delivery> = got
        .iter()
        .map(|d| (String::from_utf8(d.body.clone()).unwrap(), d))
        .collect();
    assert_eq!(by_body["expired"].attempt, 2, "the expired lease came back");
    assert_eq!(by_body["r0"].attempt, 1);
    assert_eq!(
        by_body["r3"].headers.get("n").map(String::as_str),
        Some("3")
    );
    let highest = got.iter().max_by_key(|d| d.priority).unwrap();
    assert_eq!(highest.body, b"r-high");
    let receipts: Vec<Receipt> = got.iter().map(Delivery::receipt).collect();
    q.ack_batch(&receipts).await.unwrap();

    // The live lease and the key's head are still held by their receipts.
    q.ack(p.live).await.unwrap();
    q.ack(p.key_head).await.unwrap();
    for next in ["k2", "k3"] {
        let got = receive_all(&q, 1).await;
        assert_eq!(bodies(&got), [next], "key order");
        q.ack(got[0].receipt()).await.unwrap();
    }
    // "soon" at its time, once.
    let soon = client.queue("qsoon").await.unwrap();
    let early = soon.receive(1, LONG).await.unwrap();
    assert!(
        early.is_empty() || Instant::now() >= p.soon_due,
        "a scheduled message came before its time"
    );
    if early.is_empty() {
        let wait = p.soon_due.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
        tokio::time::sleep(wait).await;
        let got = receive_all(&soon, 1).await;
        assert_eq!(bodies(&got), ["soon"]);
    }
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.scheduled, stats.in_flight, stats.blocked),
        (0, 2, 0, 0),
        "far and retrying wait for their hour"
    );
    let again = q
        .send(Message::new("idem again").idempotency_key("idem-1"))
        .await
        .unwrap();
    assert!(again.duplicate, "the idempotency key is remembered");

    let dead = client.queue("qdead").await.unwrap();
    let letters = dead.dead_letters(10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].errors.len(), 1);
    assert_eq!(letters[0].errors[0].error, "boom");
    dead.redrive(&[letters[0].id]).await.unwrap();
    assert_eq!(bodies(&receive_all(&dead, 1).await), ["poison"]);

    let paused = client.queue("qpaused").await.unwrap();
    assert!(paused.receive(10, LONG).await.unwrap().is_empty());
    paused.resume().await.unwrap();
    assert_eq!(bodies(&receive_all(&paused, 1).await), ["paused-msg"]);
}

/// A worker on the copy releases the dead process's message (and handles it), never the live
/// one's.
async fn check_processes<B: TestBackend>(client: &Client<B>) {
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = handled.clone();
    let stop = CancellationToken::new();
    let worker = Worker::builder(client)
        .heartbeat_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .queue_raw("qgone", {
            let seen = seen.clone();
            move |d: Delivery, _ctx: JobContext<B>| {
                let seen = seen.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .push((String::from_utf8(d.body).unwrap(), d.attempt));
                    Ok::<_, String>(Outcome::Done)
                }
            }
        })
        .queue_raw("qlive", move |d: Delivery, _ctx: JobContext<B>| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push((String::from_utf8(d.body).unwrap(), d.attempt));
                Ok::<_, String>(Outcome::Done)
            }
        })
        .run(stop.clone());
    let worker = tokio::spawn(worker);
    let watched = handled.clone();
    eventually_async(
        Duration::from_secs(15),
        "the dead process's message is released and handled",
        || {
            let watched = watched.clone();
            async move { (!watched.lock().unwrap().is_empty()).then_some(()) }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_eq!(
        *handled.lock().unwrap(),
        [("held-qgone".to_owned(), 2)],
        "the live process keeps its message"
    );
}

/// The topic's groups resume where they were.
async fn check_topics<B: TestBackend>(p: &Populated<B>, client: &Client<B>, version: i64) {
    let t = client.topic("t").await.unwrap();
    let g = t.group("g").await.unwrap();
    let mut rest = Vec::new();
    loop {
        let batch = g.receive(100, LONG).await.unwrap();
        if batch.is_empty() {
            break;
        }
        rest.extend(batch);
    }
    let offsets: Vec<(u32, i64)> = rest
        .iter()
        .map(|d| (d.partition.unwrap(), d.offset.unwrap()))
        .collect();
    assert_eq!(offsets.len(), 10 - p.group_seen.len(), "{offsets:?}");
    assert!(offsets.iter().all(|o| !p.group_seen.contains(o)));
    let retries = g.retries(10).await.unwrap();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].attempts, 1);
    g.ack(p.group_live).await.unwrap();

    let gd = t.group("gd").await.unwrap();
    let dead = gd.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].errors[0].error, "group boom");
    gd.redrive(&[dead[0].id]).await.unwrap();

    let b = t.group("b").await.unwrap();
    let mut reader = b.reader("m1").await.unwrap();
    assert_eq!(reader.positions(), p.positions, "the member's checkpoint");
    assert_eq!(reader.poll(100).await.unwrap().len(), 6);

    if version >= 4 {
        let bd = t.group("bd").await.unwrap();
        let dead = bd.member_dead_letters(None, 10).await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].body, b"e0");
        assert_eq!(dead[0].member.as_deref(), Some("a"));
    }
}

pub(crate) async fn every_message_survives_the_migration_from_every_earlier_version<
    B: TestBackend,
>() {
    let p = populate::<B>().await;
    let latest = Client::<B>::open(&p.db.admin_url)
        .await
        .unwrap()
        .schema_version();
    for version in 1..=latest {
        let db = rebuilt_at(&p.db, version).await;
        let tables = db.tables().await;
        let admin = Client::<B>::open(&db.admin_url).await.unwrap();
        assert_eq!(admin.schema_version(), version);
        let report = admin.migrate().await.unwrap();
        assert_eq!(report.applied, ((version + 1)..=latest).collect::<Vec<_>>());
        admin.pool().close().await;
        for table in &tables {
            if table != "sqlmq_schema_migrations" {
                assert!(
                    db.same_rows(&p.db, table).await,
                    "v{version}: {table} changed by the migration"
                );
            }
        }
        if version >= 2 {
            let mut conn = <B::Connection as sqlx::Connection>::connect(&db.admin_url)
                .await
                .unwrap();
            B::expire_process(&mut conn, "sqlmq_processes", &p.gone_owner).await;
        }
        let client = Client::builder()
            .housekeeping_interval(Duration::from_millis(20))
            .open::<B>(&db.url)
            .await
            .unwrap();
        check_queues(&p, &client).await;
        if version >= 2 {
            check_processes(&client).await;
        } else {
            // Before processes were registered, a lease is its own authority: both stay held.
            for name in ["qgone", "qlive"] {
                let q = client.queue(name).await.unwrap();
                assert_eq!(q.stats().await.unwrap().in_flight, 1);
            }
        }
        if version >= 3 {
            check_topics(&p, &client, version).await;
        }
        client.pool().close().await;
        check_invariants(&db).await;
        db.drop().await;
    }
    p.db.drop().await;
}

pub(crate) async fn migrate_to_goes_down_and_up_and_refuses_to_drop_rows<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let admin = Client::<B>::open(&db.admin_url).await.unwrap();
    let latest = admin.migrate().await.unwrap().to_version;
    let q = admin
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    q.send(Message::new("kept")).await.unwrap();
    assert!(matches!(
        admin.migrate_to(latest + 1).await,
        Err(Error::InvalidArgument(_))
    ));

    // Down to version 6, before the workflows' tables (7): every later version — the
    // workflows' and the durable runs' tables, the procedures — holds no rows, so they go; the
    // queue stays.
    const BEFORE_WORKFLOWS: i64 = 6;
    let later: Vec<i64> = (BEFORE_WORKFLOWS + 1..=latest).collect();
    let report = admin.migrate_to(BEFORE_WORKFLOWS).await.unwrap();
    let mut reverted = later.clone();
    reverted.reverse();
    assert_eq!(report.reverted, reverted);
    assert_eq!(admin.schema_version(), BEFORE_WORKFLOWS);
    assert!(!db.tables().await.contains(&"sqlmq_batches".to_owned()));
    assert!(matches!(
        q.receive(1, LONG).await,
        Err(Error::SchemaOutdated { .. })
    ));

    // Down to nothing: the queue's rows would be lost, so nothing is dropped.
    match admin.migrate_to(0).await {
        Err(Error::DowngradeRefused { target: 0, reason }) => {
            assert!(reason.contains("holds rows"), "{reason}")
        }
        other => panic!("expected DowngradeRefused, got {other:?}"),
    }
    assert_eq!(
        Client::<B>::open(&db.url).await.unwrap().schema_version(),
        BEFORE_WORKFLOWS
    );
    assert!(db.tables().await.contains(&"sqlmq_topics".to_owned()));

    // Up again: the message is there.
    assert_eq!(admin.migrate().await.unwrap().applied, later);
    let got = q.receive(1, LONG).await.unwrap();
    assert_eq!(got[0].body, b"kept");
    q.ack(got[0].receipt()).await.unwrap();

    // Not while a worker process runs.
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker::builder(&admin)
            .queue_raw("q", |_d: Delivery, _ctx: JobContext<B>| async move {
                Ok::<_, String>(Outcome::Done)
            })
            .run(stop.clone()),
    );
    eventually_async(Duration::from_secs(10), "the worker registered", || {
        let admin = admin.clone();
        async move { (!admin.processes().await.unwrap().is_empty()).then_some(()) }
    })
    .await;
    match admin.migrate_to(latest - 1).await {
        Err(Error::DowngradeRefused { reason, .. }) => {
            assert!(reason.contains("worker process"), "{reason}")
        }
        other => panic!("expected DowngradeRefused, got {other:?}"),
    }
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_eq!(
        admin.migrate_to(latest - 1).await.unwrap().reverted,
        [latest]
    );
    admin.pool().close().await;
    db.drop().await;
}

pub(crate) async fn a_worker_stops_cleanly_when_a_newer_sqlmq_migrates_the_schema<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    q.send(Message::new("slow")).await.unwrap();
    let started = Arc::new(tokio::sync::Notify::new());
    let handled = Arc::new(Mutex::new(Vec::new()));
    let (on_start, seen) = (started.clone(), handled.clone());
    let worker = tokio::spawn(
        Worker::builder(&client)
            .heartbeat_interval(Duration::from_millis(200))
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .queue_raw("q", move |d: Delivery, _ctx: JobContext<B>| {
                let (on_start, seen) = (on_start.clone(), seen.clone());
                async move {
                    on_start.notify_one();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8(d.body).unwrap());
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .run(CancellationToken::new()),
    );
    started.notified().await;
    // A newer sqlmq migrates while the handler runs.
    let newer = client.schema_version() + 1;
    db.exec(
        "INSERT INTO sqlmq_schema_migrations (version, description, applied_at) \
         VALUES (?, 'a newer sqlmq', '2026-01-01 00:00:00')",
        &[Value::from(newer)],
    )
    .await;
    let began = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(10), worker)
        .await
        .expect("the worker stops by itself")
        .unwrap();
    match result {
        Err(Error::SchemaTooNew { found, .. }) => assert_eq!(found, newer),
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    assert!(began.elapsed() < Duration::from_secs(5));
    assert_eq!(*handled.lock().unwrap(), ["slow"], "the handler finished");
    db.exec(
        "DELETE FROM sqlmq_schema_migrations WHERE version = ?",
        &[Value::from(newer)],
    )
    .await;
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.scheduled, stats.in_flight, stats.dead),
        (0, 0, 0, 0),
        "acked, not failed: {stats:?}"
    );
    assert!(client.processes().await.unwrap().is_empty(), "deregistered");
    db.drop().await;
}

pub(crate) async fn a_worker_of_a_newer_sqlmq_waits_for_migrate<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let latest = client.schema_version();
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    q.send(Message::new("after the upgrade")).await.unwrap();
    // The database is still at the older version when the newer worker starts.
    let admin = Client::<B>::open(&db.admin_url).await.unwrap();
    admin.migrate_to(latest - 1).await.unwrap();
    let newer = Client::builder()
        .housekeeping_interval(Duration::from_millis(20))
        .open::<B>(&db.url)
        .await
        .unwrap();
    let handled = Arc::new(Mutex::new(Vec::new()));
    let seen = handled.clone();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(
        Worker::builder(&newer)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .queue_raw("q", move |d: Delivery, _ctx: JobContext<B>| {
                let seen = seen.clone();
                async move {
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8(d.body).unwrap());
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .run(stop.clone()),
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!worker.is_finished(), "it waits rather than fails");
    assert!(handled.lock().unwrap().is_empty());
    let migrated = SystemTime::now();
    admin.migrate().await.unwrap();
    eventually_async(Duration::from_secs(10), "it starts after migrate", || {
        let handled = handled.clone();
        async move { (!handled.lock().unwrap().is_empty()).then_some(()) }
    })
    .await;
    assert!(migrated.elapsed().unwrap() < Duration::from_secs(5));
    stop.cancel();
    assert_eq!(worker.await.unwrap().unwrap().acked, 1);

    // No schema at all is not an upgrade in progress: an error at once.
    let empty = TestDb::<B>::new().await;
    let unmigrated = Client::<B>::open(&empty.admin_url).await.unwrap();
    let run = Worker::builder(&unmigrated)
        .queue_raw("q", |_d: Delivery, _ctx: JobContext<B>| async move {
            Ok::<_, String>(Outcome::Done)
        })
        .run(CancellationToken::new());
    match tokio::time::timeout(Duration::from_secs(10), run).await {
        Ok(Err(Error::SchemaOutdated { found: 0, .. })) => {}
        other => panic!("expected SchemaOutdated at once, got {other:?}"),
    }
    empty.drop().await;
    db.drop().await;
}

/// The child's side: `SQLMQ_CHILD_MIGRATE=<database>`: arm the pause point
/// `SQLMQ_CHILD_MIGRATE_POINT`, take the schema to version `SQLMQ_CHILD_MIGRATE_TO`, and write
/// `held` into the file `SQLMQ_CHILD_MIGRATE_SAID` once held there (then hang until killed), or
/// `done` when the migration never reached the point.
pub(crate) fn child_migrate<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_MIGRATE") else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap();
    let point: &'static str = Box::leak(var("SQLMQ_CHILD_MIGRATE_POINT").into_boxed_str());
    let target: i64 = var("SQLMQ_CHILD_MIGRATE_TO").parse().unwrap();
    let said = var("SQLMQ_CHILD_MIGRATE_SAID");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let held = sqlmq::failpoints::pause(point);
        let client = Client::<B>::open(&B::admin_url_of(&database))
            .await
            .unwrap();
        let migration = tokio::spawn(async move { client.migrate_to(target).await.unwrap() });
        tokio::select! {
            _ = held.reached() => {
                std::fs::write(&said, "held").unwrap();
                std::future::pending::<()>().await;
            }
            done = migration => {
                done.unwrap();
                std::fs::write(&said, "done").unwrap();
            }
        }
    });
}

/// Run [`child_migrate`] on `db` and `kill -9` it once held at `point`; false when the
/// migration finished without reaching the point.
async fn killed_at<B: TestBackend>(db: &TestDb<B>, point: &str, target: i64) -> bool {
    let said = std::env::temp_dir().join(format!("{}.migrate", db.name));
    let _ = std::fs::remove_file(&said);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &sqlmq_testkit::child_test::<B>("upgrade", "child_migrate"),
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_MIGRATE", &db.name)
        .env("SQLMQ_CHILD_MIGRATE_POINT", point)
        .env("SQLMQ_CHILD_MIGRATE_TO", target.to_string())
        .env("SQLMQ_CHILD_MIGRATE_SAID", &said)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let outcome = eventually_async(Duration::from_secs(30), "the child's migration", || async {
        std::fs::read_to_string(&said)
            .ok()
            .filter(|s| !s.is_empty())
    })
    .await;
    let _ = std::fs::remove_file(&said);
    child.kill().unwrap();
    child.wait().unwrap();
    outcome == "held"
}

/// A queue with 20 messages, sent at the newest schema.
async fn twenty_messages<B: TestBackend>(admin: &Client<B>) {
    let q = admin
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let batch = (0..20).map(|i| Message::new(format!("m{i}"))).collect();
    q.send_batch(batch).await.unwrap();
}

/// After a killed migration was run again: every version once, and the 20 messages (when
/// `messages`) each delivered once.
async fn complete_and_intact<B: TestBackend>(db: &TestDb<B>, latest: i64, messages: bool) {
    let admin = Client::<B>::open(&db.admin_url).await.unwrap();
    admin.migrate().await.unwrap();
    let versions: Vec<i64> = db.schema_versions().await;
    assert_eq!(versions, (1..=latest).collect::<Vec<_>>());
    if !messages {
        twenty_messages(&admin).await;
    }
    let q = admin.queue("q").await.unwrap();
    assert_eq!(bodies(&receive_all(&q, 20).await).len(), 20);
    assert!(q.receive(10, LONG).await.unwrap().is_empty(), "each once");
    admin.pool().close().await;
    check_invariants(db).await;
}

/// A migration, or a reverse, killed with `kill -9` at each of its statements (held there by a
/// pause point) completes when run again, and keeps every message.
pub(crate) async fn a_migration_killed_at_any_statement_completes_when_run_again<B: TestBackend>() {
    let latest = {
        let db = TestDb::<B>::new().await;
        let version = db.client().await.schema_version();
        db.drop().await;
        version
    };
    for version in 1..=latest {
        for n in 0.. {
            let db = TestDb::<B>::new().await;
            let admin = Client::<B>::open(&db.admin_url).await.unwrap();
            let messages = version > 1;
            if messages {
                admin.migrate().await.unwrap();
                twenty_messages(&admin).await;
            }
            admin.migrate_to(version - 1).await.unwrap();
            admin.pool().close().await;
            let held = killed_at(&db, &format!("migrate.{version}.{n}"), latest).await;
            complete_and_intact(&db, latest, messages).await;
            db.drop().await;
            if !held {
                // At least the point before its first statement (SQLite's migration 8 has
                // none: MySQL's stored procedure has no SQLite counterpart).
                assert!(n > 0, "migration {version}: its points were not reached");
                break;
            }
        }
        // Run again down then up, or straight up: both complete.
        for (n, down_again) in (0..).flat_map(|n| [(n, true), (n, false)]) {
            let db = TestDb::<B>::new().await;
            let admin = Client::<B>::open(&db.admin_url).await.unwrap();
            admin.migrate().await.unwrap();
            let messages = version > 1;
            if messages {
                twenty_messages(&admin).await;
            }
            admin.pool().close().await;
            let held = killed_at(&db, &format!("reverse.{version}.{n}"), version - 1).await;
            if down_again {
                let admin = Client::<B>::open(&db.admin_url).await.unwrap();
                admin.migrate_to(version - 1).await.unwrap();
                admin.pool().close().await;
            }
            complete_and_intact(&db, latest, messages).await;
            db.drop().await;
            if !held {
                // At least the point before its first drop (SQLite's reverse of migration 8
                // drops nothing).
                assert!(n > 0, "reverse {version}: its points were not reached");
                break;
            }
        }
    }
}

sqlmq_testkit::conformance!(
    async: [
        every_message_survives_the_migration_from_every_earlier_version,
        migrate_to_goes_down_and_up_and_refuses_to_drop_rows,
        a_worker_stops_cleanly_when_a_newer_sqlmq_migrates_the_schema,
        a_worker_of_a_newer_sqlmq_waits_for_migrate,
        a_migration_killed_at_any_statement_completes_when_run_again,
    ],
    sync: [child_migrate],
);
