//! Consumer groups: cluster and broadcast delivery, late committers, reset, replay, the retry
//! ladder and dead letters, strict order, trace and lag.

use std::time::{Duration, SystemTime};

use sqlmq::inspect::TraceState;
use sqlmq::queue::NackOutcome;
use sqlmq::topic::StartAt;
use sqlmq::{Client, Group, GroupConfig, MessageId, Record, Topic, TopicConfig};
use sqlmq_testkit::{TestBackend, TestDb, eventually_async};

use crate::late_committer::{finishes_while_a_is_open, publish_in_task};

const LEASE: Duration = Duration::from_secs(30);

async fn topic<B: TestBackend>(client: &Client<B>, partitions: u32) -> Topic<B> {
    client
        .create_topic("t", TopicConfig::default().partitions(partitions))
        .await
        .unwrap()
}

/// Receive and ack everything there is now (records sequenced), as (partition, offset, body).
async fn drain<B: TestBackend>(g: &Group<B>) -> Vec<(u32, i64, String)> {
    let mut out = Vec::new();
    loop {
        let batch = g.receive(100, LEASE).await.unwrap();
        if batch.is_empty() {
            return out;
        }
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        for d in batch {
            out.push((
                d.partition.unwrap(),
                d.offset.unwrap(),
                String::from_utf8(d.body).unwrap(),
            ));
        }
        assert_eq!(g.ack_batch(&receipts).await.unwrap().acked, receipts.len());
    }
}

async fn publish_n<B: TestBackend>(t: &Topic<B>, range: std::ops::Range<usize>) {
    let batch = range.map(|i| Record::new(format!("m{i}"))).collect();
    t.publish_batch(batch).await.unwrap();
    t.sequence().await.unwrap();
}

fn bodies(v: &[(u32, i64, String)]) -> Vec<String> {
    let mut b: Vec<String> = v.iter().map(|r| r.2.clone()).collect();
    b.sort();
    b
}

pub(crate) async fn a_late_committer_reaches_a_running_group_and_broadcast_reader_in_offset_order<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 1).await;
    let group = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let bcast = t
        .create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    // Both consumers run throughout, polling.
    let stop = sqlmq::worker::CancellationToken::new();
    let (g2, s2) = (group.clone(), stop.clone());
    let cluster = tokio::spawn(async move {
        let mut seen = Vec::new();
        while !s2.is_cancelled() {
            for d in g2.receive(10, LEASE).await.unwrap() {
                seen.push((
                    d.offset.unwrap(),
                    String::from_utf8(d.body.clone()).unwrap(),
                ));
                g2.ack(d.receipt()).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        seen
    });
    let mut reader = bcast.reader("r1").await.unwrap();
    let s3 = stop.clone();
    let broadcast = tokio::spawn(async move {
        let mut seen = Vec::new();
        while !s3.is_cancelled() {
            for r in reader.poll(10).await.unwrap() {
                seen.push((r.offset, String::from_utf8(r.body).unwrap()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        seen
    });
    let mut a = client.begin().await.unwrap();
    t.publish_in(&mut a, Record::new("A")).await.unwrap();
    // B publishes and commits in a task of its own: while A is open where writers run
    // concurrently; after A's commit where there is one writer at a time.
    let mut b = publish_in_task(&client, &t, "B");
    let concurrent = finishes_while_a_is_open::<B>(&mut b).await;
    if concurrent {
        // B is delivered while A is still open.
        eventually_async(Duration::from_secs(10), "B consumed", || async {
            (group.lag().await.unwrap().unconsumed == 0
                && t.stats(Duration::from_secs(60)).await.unwrap().total == 1)
                .then_some(())
        })
        .await;
    } else {
        // Nothing is visible before A commits.
        assert_eq!(t.stats(Duration::from_secs(60)).await.unwrap().total, 0);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.commit().await.unwrap();
    if !concurrent {
        b.await.unwrap();
    }
    eventually_async(Duration::from_secs(10), "A consumed", || async {
        (t.stats(Duration::from_secs(60)).await.unwrap().total == 2
            && group.lag().await.unwrap().unconsumed == 0)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.cancel();
    // Offsets in commit order, delivered in offset order.
    let expected = if concurrent {
        vec![(0, "B".to_owned()), (1, "A".to_owned())]
    } else {
        vec![(0, "A".to_owned()), (1, "B".to_owned())]
    };
    assert_eq!(cluster.await.unwrap(), expected, "cluster group");
    assert_eq!(broadcast.await.unwrap(), expected, "broadcast reader");
    db.drop().await;
}

pub(crate) async fn two_groups_each_get_everything_and_a_latest_group_nothing_older<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 3).await;
    let g1 = t
        .create_group("one", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let g2 = t
        .create_group("two", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    publish_n(&t, 0..50).await;
    let late = t
        .create_group("late", GroupConfig::default(), StartAt::Latest)
        .await
        .unwrap();
    publish_n(&t, 50..60).await;
    let all: Vec<String> = {
        let mut v: Vec<String> = (0..60).map(|i| format!("m{i}")).collect();
        v.sort();
        v
    };
    assert_eq!(bodies(&drain(&g1).await), all);
    assert_eq!(bodies(&drain(&g2).await), all);
    let mut newer: Vec<String> = (50..60).map(|i| format!("m{i}")).collect();
    newer.sort();
    assert_eq!(bodies(&drain(&late).await), newer);
    // An existing group keeps its position when declared again.
    let again = t
        .create_group("one", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    assert!(drain(&again).await.is_empty());
    assert!(matches!(
        t.create_group("one", GroupConfig::broadcast(), StartAt::Earliest)
            .await,
        Err(sqlmq::Error::InvalidArgument(_))
    ));
    db.drop().await;
}

pub(crate) async fn reset_to_a_time_redelivers_from_there_and_replay_redelivers_exactly_a_range<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 2).await;
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    publish_n(&t, 0..20).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let cut = SystemTime::now();
    tokio::time::sleep(Duration::from_millis(50)).await;
    publish_n(&t, 20..30).await;
    assert_eq!(drain(&g).await.len(), 30);
    let moved = g.reset(StartAt::Time(cut)).await.unwrap();
    assert_eq!(moved.len(), 2);
    let mut again = bodies(&drain(&g).await);
    let mut expected: Vec<String> = (20..30).map(|i| format!("m{i}")).collect();
    expected.sort();
    again.sort();
    assert_eq!(
        again, expected,
        "reset to the cut redelivers what came after it"
    );

    // Replay offsets 2..5 of partition 0 (all consumed): exactly those come back.
    let p0: Vec<(i64, String)> = t
        .query_offsets(0, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, String::from_utf8(r.body).unwrap()))
        .collect();
    assert!(p0.len() >= 5, "{p0:?}");
    assert_eq!(g.replay_partition(0, 2..5).await.unwrap(), 3);
    let replayed = drain(&g).await;
    let mut got: Vec<(u32, i64)> = replayed.iter().map(|r| (r.0, r.1)).collect();
    got.sort();
    assert_eq!(got, vec![(0, 2), (0, 3), (0, 4)]);
    // Replay by offsets across partitions.
    assert_eq!(
        g.replay(StartAt::Offset(0), StartAt::Offset(1))
            .await
            .unwrap(),
        2
    );
    let mut got: Vec<(u32, i64)> = drain(&g).await.iter().map(|r| (r.0, r.1)).collect();
    got.sort();
    assert_eq!(got, vec![(0, 0), (1, 0)]);
    // Reset to latest: nothing more.
    g.reset(StartAt::Latest).await.unwrap();
    assert!(drain(&g).await.is_empty());
    db.drop().await;
}

/// The ladder with a controllable clock: each failure's retry is due exactly one ladder step
/// after it (read from the retry and the failure event), and `retry_now` moves the clock.
pub(crate) async fn failures_climb_the_ladder_then_dead_letter_and_redrive<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 1).await;
    let g = t
        .create_group(
            "g",
            GroupConfig::default().max_attempts(3),
            StartAt::Earliest,
        )
        .await
        .unwrap();
    let id = t.publish(Record::new("poison")).await.unwrap().id;
    t.sequence().await.unwrap();
    let ladder = [10u64, 30];
    for (attempt, step) in ladder.iter().enumerate() {
        let d = g.receive(1, LEASE).await.unwrap().pop().expect("delivered");
        assert_eq!((d.id, d.attempt), (id, attempt as u32 + 1));
        let outcome = g
            .nack(d.receipt(), None, &format!("boom {}", attempt + 1))
            .await
            .unwrap();
        assert_eq!(
            outcome,
            NackOutcome::Retry {
                after: Duration::from_secs(*step)
            }
        );
        assert!(
            g.receive(1, LEASE).await.unwrap().is_empty(),
            "not before its step"
        );
        let retry = g.retries(10).await.unwrap().pop().unwrap();
        let trace = t.trace(id).await.unwrap().unwrap();
        let event = trace.groups[0].events.last().unwrap().clone();
        assert_eq!(event.outcome, "failed");
        assert_eq!(
            event.error.as_deref(),
            Some(format!("boom {}", attempt + 1).as_str())
        );
        // The event's time reads back in JSON's form, to the millisecond (truncated): the
        // retry is due one ladder step after the failure, within that millisecond.
        let failed_at = humantime::parse_rfc3339(&event.at).unwrap();
        let due_after = retry.run_at.duration_since(failed_at).unwrap();
        let step = Duration::from_secs(*step);
        assert!(
            due_after >= step && due_after < step + Duration::from_millis(1),
            "due one ladder step after the failure: {due_after:?} after {}",
            event.at
        );
        assert_eq!(g.retry_now(&[id]).await.unwrap(), 1);
    }
    let d = g.receive(1, LEASE).await.unwrap().pop().unwrap();
    assert_eq!(d.attempt, 3);
    assert_eq!(
        g.nack(d.receipt(), None, "boom 3").await.unwrap(),
        NackOutcome::DeadLettered
    );
    let dead = g.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempts, 3);
    assert_eq!(
        dead[0]
            .errors
            .iter()
            .map(|e| e.error.as_str())
            .collect::<Vec<_>>(),
        ["boom 1", "boom 2", "boom 3"]
    );
    assert_eq!(dead[0].body, b"poison");
    let trace = t.trace(id).await.unwrap().unwrap();
    assert!(matches!(trace.groups[0].state, TraceState::Dead { .. }));
    assert_eq!(trace.groups[0].attempts, 3);
    assert_eq!(g.lag().await.unwrap().dead, 1);
    // Redrive: delivered again with fresh attempts and a larger token.
    assert_eq!(g.redrive(&[id, MessageId::new()]).await.unwrap(), vec![id]);
    let again = g.receive(1, LEASE).await.unwrap().pop().unwrap();
    assert_eq!(again.attempt, 1);
    assert!(again.token > d.token);
    // The old receipt is fenced.
    assert!(matches!(
        g.ack(d.receipt()).await,
        Err(sqlmq::Error::LeaseLost { .. })
    ));
    g.ack(again.receipt()).await.unwrap();
    let trace = t.trace(id).await.unwrap().unwrap();
    assert!(matches!(trace.groups[0].state, TraceState::Acked { .. }));
    assert_eq!(
        trace.groups[0]
            .events
            .iter()
            .map(|e| e.outcome.as_str())
            .collect::<Vec<_>>(),
        ["failed", "failed", "dead", "acked"]
    );
    assert!(g.dead_letters(10).await.unwrap().is_empty());
    db.drop().await;
}

pub(crate) async fn a_slow_record_does_not_hold_up_its_partition_unless_order_is_strict<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 1).await;
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    publish_n(&t, 0..3).await;
    let first = g.receive(1, LEASE).await.unwrap().pop().unwrap();
    // Another member gets the next records while the first is held.
    assert_eq!(g.receive(10, LEASE).await.unwrap().len(), 2);
    drop(first);

    let strict = client
        .create_topic("s", TopicConfig::default().strict_order(true))
        .await
        .unwrap();
    let sg = strict
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    publish_n(&strict, 0..3).await;
    let d0 = sg.receive(10, LEASE).await.unwrap();
    assert_eq!(d0.len(), 1, "one record of the partition in flight");
    assert!(sg.receive(10, LEASE).await.unwrap().is_empty());
    sg.nack(d0[0].receipt(), Some(Duration::ZERO), "again")
        .await
        .unwrap();
    let d0b = sg.receive(10, LEASE).await.unwrap();
    assert_eq!(
        (d0b.len(), d0b[0].offset, d0b[0].attempt),
        (1, Some(0), 2),
        "the head again"
    );
    sg.ack(d0b[0].receipt()).await.unwrap();
    let d1 = sg.receive(10, LEASE).await.unwrap();
    assert_eq!((d1.len(), d1[0].offset), (1, Some(1)));
    db.drop().await;
}

pub(crate) async fn lag_and_trace_report_what_happened<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 1).await;
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let b = t
        .create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let ids: Vec<MessageId> = {
        let batch = (0..5)
            .map(|i| Record::new(format!("m{i}")).key("k"))
            .collect();
        t.publish_batch(batch)
            .await
            .unwrap()
            .iter()
            .map(|p| p.id)
            .collect()
    };
    t.sequence().await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let lag = g.lag().await.unwrap();
    assert_eq!((lag.unconsumed, lag.backlog, lag.in_flight), (5, 5, 0));
    assert!(lag.oldest_unconsumed_age.unwrap() >= Duration::from_millis(30));
    let got = g.receive(3, LEASE).await.unwrap();
    g.ack(got[0].receipt()).await.unwrap();
    g.nack(got[1].receipt(), Some(Duration::from_secs(60)), "later")
        .await
        .unwrap();
    let lag = g.lag().await.unwrap();
    assert_eq!(
        (
            lag.unconsumed,
            lag.backlog,
            lag.in_flight,
            lag.retrying,
            lag.dead
        ),
        (4, 2, 1, 1, 0)
    );
    assert_eq!(lag.partitions[0].position, 3);
    let mut reader = b.reader("m1").await.unwrap();
    assert_eq!(reader.poll(2).await.unwrap().len(), 2);
    reader.checkpoint().await.unwrap();
    let blag = b.lag().await.unwrap();
    assert_eq!(blag.members.len(), 1);
    assert_eq!(
        (blag.members[0].member.as_str(), blag.members[0].behind),
        ("m1", 3)
    );

    let state = |i: usize| {
        let t = t.clone();
        let id = ids[i];
        async move {
            let tr = t.trace(id).await.unwrap().unwrap();
            assert_eq!(tr.offset, Some(i as i64));
            assert_eq!(tr.record.as_ref().unwrap().key.as_deref(), Some("k"));
            tr.groups
        }
    };
    let g0 = state(0).await;
    let cluster = g0.iter().find(|x| x.group == "g").unwrap();
    assert!(matches!(cluster.state, TraceState::Acked { .. }));
    assert_eq!(cluster.events[0].member.as_deref(), Some(client.owner_id()));
    let bc = g0.iter().find(|x| x.group == "b").unwrap();
    assert_eq!(bc.read_by, vec!["m1".to_owned()]);
    let g1 = state(1).await;
    assert!(
        matches!(g1[1].state, TraceState::WaitingRetry { .. })
            || matches!(g1[0].state, TraceState::WaitingRetry { .. })
    );
    let g2 = state(2).await;
    let in_flight = g2.iter().find(|x| x.group == "g").unwrap();
    match &in_flight.state {
        TraceState::InFlight { member, .. } => {
            assert_eq!(member.as_deref(), Some(client.owner_id()))
        }
        other => panic!("{other:?}"),
    }
    let g4 = state(4).await;
    assert_eq!(
        g4.iter().find(|x| x.group == "g").unwrap().state,
        TraceState::NotDelivered
    );
    assert!(
        g4.iter()
            .find(|x| x.group == "b")
            .unwrap()
            .read_by
            .is_empty()
    );
    assert!(t.trace(MessageId::new()).await.unwrap().is_none());
    // Queries.
    assert_eq!(t.query_key("k", 10).await.unwrap().len(), 5);
    assert_eq!(t.query_offsets(0, 3, 10).await.unwrap().len(), 2);
    let now = SystemTime::now();
    assert_eq!(
        t.query_time(
            now - Duration::from_secs(60),
            now + Duration::from_secs(60),
            100
        )
        .await
        .unwrap()
        .len(),
        5
    );
    db.drop().await;
}

pub(crate) async fn retention_keeps_unconsumed_records_and_works_in_small_transactions<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let config = TopicConfig::default()
        .retention_bytes(10_000)
        .retention_keeps_unconsumed(true);
    let t = client.create_topic("t", config).await.unwrap();
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let body = "x".repeat(100);
    for chunk in 0..4 {
        let batch = (0..500)
            .map(|i| Record::new(format!("{body}{:05}", chunk * 500 + i)))
            .collect();
        t.publish_batch(batch).await.unwrap();
    }
    t.sequence().await.unwrap();
    // The group consumed the first 700 only.
    let mut consumed = 0;
    while consumed < 700 {
        let batch = g.receive((700 - consumed).min(100), LEASE).await.unwrap();
        consumed += batch.len();
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        g.ack_batch(&receipts).await.unwrap();
    }
    let r = t.apply_retention().await.unwrap();
    assert_eq!(r.records, 700, "{r:?}");
    assert_eq!(r.transactions, 2, "{r:?}");
    assert!(r.kept_unconsumed > 1000, "{r:?}");
    assert_eq!(t.query_offsets(0, 0, 1).await.unwrap()[0].offset, 700);
    // Everything the group still needs is there.
    assert_eq!(drain(&g).await.len(), 1300);
    let r = t.apply_retention().await.unwrap();
    let left = 2000 - 700 - r.records as i64;
    // About 10 000 bytes of 105-byte bodies are kept.
    assert!((90..=96).contains(&left), "{r:?} left {left}");
    assert!(
        r.transactions >= 3,
        "at most 500 offsets per transaction: {r:?}"
    );
    let lag = g.lag().await.unwrap();
    assert_eq!(lag.unconsumed, 0);

    // Age-based, without the keep: old records go even if unconsumed.
    let aged = client
        .create_topic(
            "aged",
            TopicConfig::default().retention(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    let ag = aged
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    publish_n(&aged, 0..10).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    publish_n(&aged, 10..15).await;
    assert_eq!(aged.apply_retention().await.unwrap().records, 10);
    let mut rest = bodies(&drain(&ag).await);
    rest.sort();
    let mut expected: Vec<String> = (10..15).map(|i| format!("m{i}")).collect();
    expected.sort();
    assert_eq!(
        rest, expected,
        "the group jumps over what retention removed"
    );
    db.drop().await;
}

pub(crate) async fn broadcast_members_resume_from_their_checkpoint<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 2).await;
    let b = t
        .create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    publish_n(&t, 0..10).await;
    let mut r1 = b.reader("one").await.unwrap();
    let mut r2 = b.reader("two").await.unwrap();
    let first = r1.poll(4).await.unwrap();
    assert_eq!(first.len(), 4);
    r1.checkpoint().await.unwrap();
    assert_eq!(
        r2.poll(100).await.unwrap().len(),
        10,
        "each member reads everything"
    );
    drop(r1);
    let mut again = b.reader("one").await.unwrap();
    let rest = again.poll(100).await.unwrap();
    assert_eq!(rest.len(), 6, "resumes after its checkpoint");
    let mut all: Vec<MessageId> = first.iter().chain(&rest).map(|r| r.id).collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 10);
    assert!(matches!(
        b.receive(1, LEASE).await,
        Err(sqlmq::Error::InvalidArgument(_))
    ));
    db.drop().await;
}

/// A claim moves a retried record from the retries to the leases and a nack moves it back:
/// a lag read while records move counts each exactly once (a lag read by statements at
/// different instants counted some in neither table and reported a busy group drained, so a
/// test that waited for the lag to reach 0 went on while records were still in flight).
pub(crate) async fn lag_counts_each_record_once_while_records_move_between_tables<
    B: TestBackend,
>() {
    const RECORDS: u64 = 20;
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let t = topic(&client, 2).await;
    let g = t
        .create_group(
            "g",
            GroupConfig::default().max_attempts(1000),
            StartAt::Earliest,
        )
        .await
        .unwrap();
    publish_n(&t, 0..RECORDS as usize).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (g, stop) = (g.clone(), stop.clone());
        tokio::spawn(async move {
            let mut moved = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for d in g.receive(RECORDS as usize, LEASE).await.unwrap() {
                    g.nack(d.receipt(), Some(Duration::ZERO), "again")
                        .await
                        .unwrap();
                    moved += 1;
                }
            }
            moved
        })
    };
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut reads = 0;
    while tokio::time::Instant::now() < until {
        let lag = g.lag().await.unwrap();
        assert_eq!(
            lag.unconsumed + lag.dead,
            RECORDS,
            "every record counted once: {lag:?}"
        );
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let moved = churn.await.unwrap();
    assert!(
        moved > 2 * RECORDS && reads > 10,
        "records moved {moved} times under {reads} lag reads: too few to prove anything"
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [a_late_committer_reaches_a_running_group_and_broadcast_reader_in_offset_order, two_groups_each_get_everything_and_a_latest_group_nothing_older, reset_to_a_time_redelivers_from_there_and_replay_redelivers_exactly_a_range, failures_climb_the_ladder_then_dead_letter_and_redrive, a_slow_record_does_not_hold_up_its_partition_unless_order_is_strict, lag_and_trace_report_what_happened, retention_keeps_unconsumed_records_and_works_in_small_transactions, broadcast_members_resume_from_their_checkpoint, lag_counts_each_record_once_while_records_move_between_tables]
);
