//! Recurring schedules: each fire time is sent exactly once whatever the number of clients
//! firing, including one whose fire dies before its commit; missed fire times follow the
//! catch-up policy; the rows are created, replaced, paused, resumed and deleted as documented.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlmq::schedule::{
    CatchUp, FIRE_TIME_HEADER, SCHEDULE_HEADER, ScheduleConfig, ScheduleTarget, Timing,
};
use sqlmq::worker::CancellationToken;
use sqlmq::{Backend, Client, Error, Queue, QueueConfig, TopicConfig};
use sqlmq_testkit::{TestBackend, TestDb, queue};

const LEASE: Duration = Duration::from_secs(60);

fn every_second(queue: &str) -> ScheduleConfig {
    ScheduleConfig::new(
        Timing::Every(Duration::from_secs(1)),
        ScheduleTarget::Queue(queue.into()),
    )
}

fn micros(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_micros() as i64
}

/// Every message of `q`, taken: fire time (µs) → how many times it came, for schedule `name`.
async fn fire_times<B: Backend>(q: &Queue<B>, name: &str) -> BTreeMap<i64, usize> {
    let mut seen = BTreeMap::new();
    loop {
        let batch = q.receive(100, LEASE).await.unwrap();
        if batch.is_empty() {
            return seen;
        }
        for d in &batch {
            assert_eq!(d.headers[SCHEDULE_HEADER], name, "{d:?}");
            let at = humantime::parse_rfc3339(&d.headers[FIRE_TIME_HEADER]).unwrap();
            *seen.entry(micros(at)).or_default() += 1;
        }
        q.ack_batch(&batch.iter().map(|d| d.receipt()).collect::<Vec<_>>())
            .await
            .unwrap();
    }
}

/// The fire times of a 1-second schedule from the first to the last: each once, none missing.
fn once_each_without_gaps(seen: &BTreeMap<i64, usize>) {
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "fired more than once: {twice:?}");
    let times: Vec<i64> = seen.keys().copied().collect();
    for pair in times.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            1_000_000,
            "a fire time is missing: {times:?}"
        );
    }
    assert!(times.iter().all(|t| t % 1_000_000 == 0), "{times:?}");
}

pub(crate) async fn schedules_are_created_replaced_paused_resumed_and_deleted<B: TestBackend>() {
    let (db, client, _q) = queue::<B>(QueueConfig::default()).await;
    assert!(client.schedules().await.unwrap().is_empty());
    let config = ScheduleConfig::new(
        Timing::cron("0 3 * * *", "Europe/Paris"),
        ScheduleTarget::Queue("q".into()),
    )
    .body("nightly")
    .header("kind", "report")
    .key("reports")
    .priority(-2)
    .catch_up(CatchUp::One);
    let created = client
        .create_schedule("nightly", config.clone())
        .await
        .unwrap();
    assert_eq!(created.name, "nightly");
    assert_eq!(created.config, config);
    assert!(!created.paused && created.fired == 0 && created.last_fired.is_none());
    let next = created.next_fire.expect("a next fire time");
    assert!(
        next > SystemTime::now() && next < SystemTime::now() + Duration::from_secs(86_400 + 3600)
    );
    assert_eq!(client.schedule("nightly").await.unwrap(), created);

    // Replaced with the same timing: the next fire time stays; with another, it moves.
    let same = client
        .create_schedule("nightly", config.clone().body("changed"))
        .await
        .unwrap();
    assert_eq!(
        (same.next_fire, same.config.body.as_slice()),
        (Some(next), &b"changed"[..])
    );
    let hourly = ScheduleConfig::new(
        Timing::Every(Duration::from_secs(3600)),
        ScheduleTarget::Queue("q".into()),
    );
    let moved = client.create_schedule("nightly", hourly).await.unwrap();
    let moved_next = micros(moved.next_fire.unwrap());
    assert_eq!(moved_next % 3_600_000_000, 0);
    assert!(moved.next_fire.unwrap() <= SystemTime::now() + Duration::from_secs(3600));

    // Paused, it is never due; resumed, it fires next at its first fire time from now.
    let paused = client.pause_schedule("nightly").await.unwrap();
    assert!(paused.paused);
    assert!(client.pause_schedule("nightly").await.unwrap().paused);
    let resumed = client.resume_schedule("nightly").await.unwrap();
    assert!(!resumed.paused);
    assert_eq!(resumed.next_fire, moved.next_fire);

    client
        .create_schedule("another", every_second("q"))
        .await
        .unwrap();
    let names: Vec<String> = client
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["another", "nightly"]);
    client.delete_schedule("nightly").await.unwrap();
    for r in [
        client.schedule("nightly").await.map(drop),
        client.delete_schedule("nightly").await,
        client.pause_schedule("nightly").await.map(drop),
        client.resume_schedule("nightly").await.map(drop),
    ] {
        assert!(
            matches!(r, Err(Error::UnknownSchedule(ref n)) if n == "nightly"),
            "{r:?}"
        );
    }
    db.drop().await;
}

pub(crate) async fn bad_schedules_are_refused_and_nothing_is_written<B: TestBackend>() {
    let (db, client, _q) = queue::<B>(QueueConfig::default()).await;
    let target = || ScheduleTarget::Queue("q".into());
    let bad = [
        ScheduleConfig::new(Timing::cron("61 * * * *", "UTC"), target()),
        ScheduleConfig::new(Timing::cron("* * * *", "UTC"), target()),
        ScheduleConfig::new(Timing::cron("0 0 1 1 * * 2030", "UTC"), target()),
        ScheduleConfig::new(Timing::cron("* * * * *", "Europe/Atlantis"), target()),
        ScheduleConfig::new(Timing::Every(Duration::from_millis(500)), target()),
        every_second("q").catch_up_limit(0),
    ];
    for config in bad {
        let r = client.create_schedule("s", config.clone()).await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{config:?}: {r:?}"
        );
    }
    let r = client.create_schedule("bad name", every_second("q")).await;
    assert!(matches!(r, Err(Error::InvalidName { .. })), "{r:?}");
    let r = client.create_schedule("s", every_second("nope")).await;
    assert!(matches!(r, Err(Error::UnknownQueue(_))), "{r:?}");
    let topic = ScheduleConfig::new(
        Timing::Every(Duration::from_secs(1)),
        ScheduleTarget::Topic("nope".into()),
    );
    let r = client.create_schedule("s", topic).await;
    assert!(matches!(r, Err(Error::UnknownTopic(_))), "{r:?}");
    let huge = every_second("q").body(vec![b'x'; client.max_payload_bytes() + 1]);
    let r = client.create_schedule("s", huge).await;
    assert!(matches!(r, Err(Error::PayloadTooLarge { .. })), "{r:?}");
    assert!(client.schedules().await.unwrap().is_empty());
    db.drop().await;
}

/// Every message of `q`, taken: schedule name → its fire times (µs).
async fn taken_by_schedule<B: Backend>(q: &Queue<B>) -> BTreeMap<String, BTreeSet<i64>> {
    let mut out: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    loop {
        let batch = q.receive(1000, LEASE).await.unwrap();
        if batch.is_empty() {
            return out;
        }
        for d in &batch {
            let at = micros(humantime::parse_rfc3339(&d.headers[FIRE_TIME_HEADER]).unwrap());
            let fresh = out
                .entry(d.headers[SCHEDULE_HEADER].clone())
                .or_default()
                .insert(at);
            assert!(fresh, "{d:?} came twice");
        }
    }
}

/// A client per "process", each with its own pool, firing in the background.
async fn firing<B: TestBackend>(db: &TestDb<B>, stop: &CancellationToken) -> Client<B> {
    let client = db.client().await;
    let (c, s) = (client.clone(), stop.clone());
    tokio::spawn(async move { c.run_schedules(s).await });
    client
}

pub(crate) async fn each_fire_time_is_sent_once_by_competing_clients<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let name = format!("held-{}", B::SCHEME);
    let created = client
        .create_schedule(&name, every_second("q"))
        .await
        .unwrap();
    let first = micros(created.next_fire.unwrap());

    // A client's fire held after its messages were sent, before its COMMIT, then dropped:
    // its transaction never commits, as if its process had died there.
    let point: &'static str = Box::leak(format!("schedule.{name}.sent").into_boxed_str());
    let held = sqlmq::failpoints::pause(point);
    let dying = db.client().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let fire = tokio::spawn(async move { dying.fire_schedules().await });
    held.reached().await;

    // Three more clients fire meanwhile; they wait for the held row (or the database) and
    // fire that fire time once it is given up.
    let stop = CancellationToken::new();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(firing(&db, &stop).await);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fire.abort();
    let _ = fire.await;
    drop(held);
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.cancel();
    // Let a pass under way finish.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let seen = fire_times(&q, &name).await;
    once_each_without_gaps(&seen);
    // The first fire time, the one the dropped fire had sent, was sent by another client.
    assert_eq!(seen.keys().next(), Some(&first), "{seen:?}");
    assert!(seen.len() >= 5, "{seen:?}");
    let s = client.schedule(&name).await.unwrap();
    assert_eq!(s.fired as usize, seen.len());
    assert_eq!(s.last_fired.map(micros), seen.keys().last().copied());
    for c in clients {
        c.pool().close().await;
    }
    db.drop().await;
}

pub(crate) async fn missed_fire_times_follow_the_catch_up_policy<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    for policy in [CatchUp::Skip, CatchUp::One, CatchUp::All] {
        let config = every_second("q").catch_up(policy).catch_up_limit(1000);
        client
            .create_schedule(&format!("s-{policy}"), config)
            .await
            .unwrap();
    }
    // Ten minutes in which no process ran.
    let gap = 600_000_000i64;
    db.exec(
        &format!(
            "UPDATE {}schedules SET next_fire = next_fire - ?",
            client.table_prefix()
        ),
        &[gap.into()],
    )
    .await;
    let before = micros(SystemTime::now());
    client.fire_schedules().await.unwrap();
    let first = taken_by_schedule(&q).await;
    let consecutive = |set: &BTreeSet<i64>| {
        once_each_without_gaps(&set.iter().map(|t| (*t, 1)).collect());
    };
    // skip: only the last minute's fire times (late, not missed).
    let skip = &first["s-skip"];
    consecutive(skip);
    assert!((58..=62).contains(&skip.len()), "{}", skip.len());
    assert!(*skip.first().unwrap() >= before - 61_000_000, "{skip:?}");
    // one: those, and the latest missed one (nothing earlier).
    let one = &first["s-one"];
    consecutive(one);
    assert!((59..=63).contains(&one.len()), "{}", one.len());
    assert!(*one.first().unwrap() >= before - 63_000_000, "{one:?}");
    // all: every second of the gap.
    let all = &first["s-all"];
    consecutive(all);
    assert!((599..=602).contains(&all.len()), "{}", all.len());
    // Another pass fires at most what came due since, never a fire time again.
    client.fire_schedules().await.unwrap();
    let second = taken_by_schedule(&q).await;
    for policy in ["skip", "one", "all"] {
        let name = format!("s-{policy}");
        let mut every = first[&name].clone();
        for t in second.get(&name).into_iter().flatten() {
            assert!(every.insert(*t), "{name}: {t} fired twice");
        }
        consecutive(&every);
        let s = client.schedule(&name).await.unwrap();
        assert_eq!(s.fired as usize, every.len());
        assert!(s.next_fire.unwrap() > SystemTime::now() - Duration::from_secs(1));
    }
    db.drop().await;
}

pub(crate) async fn a_topic_schedule_publishes_records_with_its_key<B: TestBackend>() {
    let (db, client, _q) = queue::<B>(QueueConfig::default()).await;
    let topic = client
        .create_topic("ticks", TopicConfig::default())
        .await
        .unwrap();
    let config = ScheduleConfig::new(
        Timing::cron("* * * * * *", "UTC"),
        ScheduleTarget::Topic("ticks".into()),
    )
    .body("tick")
    .key("clock")
    .header("source", "test");
    client.create_schedule("clock", config).await.unwrap();
    let stop = CancellationToken::new();
    let _firing = firing(&db, &stop).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let records = loop {
        let records = topic.query_key("clock", 100).await.unwrap();
        if records.len() >= 3 || tokio::time::Instant::now() > deadline {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    stop.cancel();
    assert!(records.len() >= 3, "{records:?}");
    for r in &records {
        assert_eq!(
            (r.body.as_slice(), r.headers["source"].as_str()),
            (&b"tick"[..], "test")
        );
        assert_eq!(r.headers[SCHEDULE_HEADER], "clock");
        assert!(humantime::parse_rfc3339(&r.headers[FIRE_TIME_HEADER]).is_ok());
    }
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        schedules_are_created_replaced_paused_resumed_and_deleted,
        bad_schedules_are_refused_and_nothing_is_written,
        each_fire_time_is_sent_once_by_competing_clients,
        missed_fire_times_follow_the_catch_up_policy,
        a_topic_schedule_publishes_records_with_its_key,
    ]
);
