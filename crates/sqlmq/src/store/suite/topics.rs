//! `store/body/topics.rs`, `Publish`, `store/body/stream.rs` and `store/body/retention.rs`: topic rows and partitions, publishing and
//! sequencing, reading the log and members' positions, removing old records.
//!
//! Where a backend gives offsets at publish (`Publish::OFFSETS_AT_PUBLISH`) nothing is ever
//! pending; elsewhere records wait for sequencing steps. The scenarios hold either to its
//! contract and, once sequenced, both to the same log.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use super::{SuiteBackend, fixture, now_us};
use crate::Client;
use crate::domain::{GroupConfig, MessageId, StartAt, TopicConfig, time_from_micros};
use crate::store::rows::{PartitionRow, PendingBatch, PendingRow, RangeRemoval};
use crate::store::statements::{MAX_LIST, run_within};

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// A statement budget no test reaches.
const ROOMY: usize = 1 << 24;

/// Whether backend `B` gives offsets at publish.
fn offsets_at_publish<B: SuiteBackend>() -> bool {
    <B as crate::store::Publish>::OFFSETS_AT_PUBLISH
}

/// A record to publish: partition, key, headers (JSON), body.
type Rec<'a> = (i32, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// Create topic `name` with `partitions`; its id.
async fn topic<B: SuiteBackend>(client: &Client<B>, name: &str, partitions: u32) -> i32 {
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .upsert_topic(
            &mut conn,
            name,
            &TopicConfig::default().partitions(partitions),
        )
        .await
        .unwrap()
        .id
}

/// Publish `recs` in one committed transaction, in statements of at most `budget` bytes;
/// their ids.
async fn publish<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    recs: &[Rec<'_>],
    budget: usize,
) -> Vec<MessageId> {
    let ids: Vec<MessageId> = recs.iter().map(|_| MessageId::new()).collect();
    let rows: Vec<PendingRow<'_>> = recs
        .iter()
        .zip(&ids)
        .map(|(&(partition, key, headers, body), &id)| PendingRow {
            partition,
            id,
            key: key.map(str::as_bytes),
            headers: headers.map(str::to_owned),
            body,
        })
        .collect();
    let mut tx = client.begin().await.unwrap();
    // As the engine does: one statement's rows at a time.
    let mut start = 0;
    while start < rows.len() {
        let end = run_within(start, rows.len(), MAX_LIST, budget, |i| rows[i].bytes());
        let batch = PendingBatch {
            topic_id,
            rows: &rows[start..end],
        };
        <B as crate::store::Publish>::insert_pending(client.store(), &mut tx, &batch)
            .await
            .unwrap();
        start = end;
    }
    tx.commit().await.unwrap();
    ids
}

/// Run sequencing steps of up to `limit` records on each of `partitions` until none finds
/// anything; returns how many each consumed, in order.
async fn sequence_all<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    partitions: i32,
    limit: usize,
) -> Vec<usize> {
    let mut steps = Vec::new();
    for p in 0..partitions {
        loop {
            let mut tx = client.begin().await.unwrap();
            let n = <B as crate::store::Publish>::sequence_step(
                client.store(),
                &mut tx,
                topic_id,
                &[p],
                limit,
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
            assert!(n <= limit, "{n} > {limit}");
            if n == 0 {
                break;
            }
            steps.push(n);
        }
    }
    steps
}

/// The counters of the topic's partitions (on a reader).
async fn partitions<B: SuiteBackend>(client: &Client<B>, topic_id: i32) -> Vec<PartitionRow> {
    let mut conn = client.reader().acquire().await.unwrap();
    client
        .store()
        .partitions(&mut conn, topic_id)
        .await
        .unwrap()
}

/// A partition's counters.
fn part(partition: i32, next_offset: i64, low_offset: i64, bytes: i64) -> PartitionRow {
    PartitionRow {
        partition,
        next_offset,
        low_offset,
        bytes,
    }
}

/// Up to `limit` records of one partition from `offset` (on a reader): `(offset, id)`.
async fn read<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    partition: i32,
    offset: i64,
    limit: usize,
) -> Vec<(i64, MessageId)> {
    let mut conn = client.reader().acquire().await.unwrap();
    client
        .store()
        .read_from(&mut conn, topic_id, partition, offset, limit)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r.partition, partition as u32);
            (r.offset, r.id)
        })
        .collect()
}

/// A topic is stored with its configuration and partitions; an upsert updates the
/// configuration, and its partitions only grow; topics are found by name and id, listed by
/// name, and not found when they do not exist.
async fn topic_rows_and_partitions<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(store.all_topics(&mut conn).await.unwrap().is_empty());
    let config = TopicConfig::default()
        .partitions(3)
        .retention(Duration::from_millis(3_600_001))
        .retention_bytes(u64::from(u32::MAX) * 4)
        .retention_keeps_unconsumed(true)
        .strict_order(true);
    let b = store.upsert_topic(&mut conn, "b", &config).await.unwrap();
    assert_eq!((b.name.as_str(), &b.config), ("b", &config));
    let a = store
        .upsert_topic(&mut conn, "a", &TopicConfig::default())
        .await
        .unwrap();
    assert_eq!(a.config, TopicConfig::default());
    drop(conn);
    assert_eq!(
        partitions(&client, b.id).await,
        (0..3).map(|p| part(p, 0, 0, 0)).collect::<Vec<_>>()
    );
    assert_eq!(partitions(&client, a.id).await, [part(0, 0, 0, 0)]);
    assert!(partitions(&client, i32::MAX).await.is_empty());

    let mut conn = client.pool().acquire().await.unwrap();
    let grown = store
        .upsert_topic(&mut conn, "b", &TopicConfig::default().partitions(5))
        .await
        .unwrap();
    assert_eq!(grown.id, b.id);
    assert_eq!(grown.config, TopicConfig::default().partitions(5));
    let kept = store
        .upsert_topic(&mut conn, "b", &TopicConfig::default().partitions(2))
        .await
        .unwrap();
    assert_eq!(kept.config.partitions, 5, "partitions only grow");
    let by_name = store.topic_by_name(&mut conn, "b").await.unwrap().unwrap();
    let by_id = store.topic_by_id(&mut conn, b.id).await.unwrap().unwrap();
    assert_eq!((by_name.id, by_id.name.as_str()), (b.id, "b"));
    assert_eq!(by_id.config.partitions, 5);
    assert!(store.topic_by_name(&mut conn, "c").await.unwrap().is_none());
    assert!(
        store
            .topic_by_id(&mut conn, i32::MAX)
            .await
            .unwrap()
            .is_none()
    );
    let names: Vec<String> = store
        .all_topics(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    drop(conn);
    assert_eq!(partitions(&client, b.id).await.len(), 5);
    assert_eq!(db.count("topic_partitions").await, 6);
    db.drop().await;
}

/// Growing a topic gives its groups cursors in the new partitions (from the start); the
/// cursors are listed with their groups' modes.
async fn growing_a_topic_extends_its_groups<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let t = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let mut conn = client.reader().acquire().await.unwrap();
    assert!(
        client
            .store()
            .cursors_of_topic(&mut conn, t.id())
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    let cluster = t
        .create_group("c", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let broadcast = t
        .create_group("b", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .upsert_topic(&mut conn, "t", &TopicConfig::default().partitions(4))
        .await
        .unwrap();
    let mut cursors: Vec<(i32, bool, i32, i64)> = client
        .store()
        .cursors_of_topic(&mut conn, t.id())
        .await
        .unwrap()
        .iter()
        .map(|c| (c.group_id, c.broadcast, c.partition, c.next_offset))
        .collect();
    drop(conn);
    cursors.sort();
    let mut expected: Vec<(i32, bool, i32, i64)> = (0..4)
        .flat_map(|p| [(cluster.id(), false, p, 0), (broadcast.id(), true, p, 0)])
        .collect();
    expected.sort();
    assert_eq!(cursors, expected);
    db.drop().await;
}

/// Deleting a topic step by step: each step deletes at most a thousand rows of one table, the
/// last one the topic row, and past it there is no step; another topic keeps its rows.
async fn delete_a_topic_step_by_step<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (a, b) = (topic(&client, "a", 2).await, topic(&client, "b", 1).await);
    let recs: Vec<Rec<'_>> = (0..MANY)
        .map(|i| ((i % 2) as i32, None, None, &b"x"[..]))
        .collect();
    publish(&client, a, &recs, ROOMY).await;
    publish(&client, b, &[(0, None, None, b"y")], ROOMY).await;
    sequence_all(&client, a, 2, MAX_LIST).await;
    sequence_all(&client, b, 1, MAX_LIST).await;

    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        store
            .delete_topic_rows(&mut conn, i32::MAX, 0)
            .await
            .unwrap(),
        Some(0)
    );
    let first = store.delete_topic_rows(&mut conn, a, 0).await.unwrap();
    assert_eq!(first, Some(1000));
    drop(conn);
    let mut total = 1000;
    let mut step = 0;
    loop {
        let mut tx = client.begin().await.unwrap();
        let deleted = store.delete_topic_rows(&mut tx, a, step).await.unwrap();
        tx.commit().await.unwrap();
        match deleted {
            None => break,
            Some(0) => step += 1,
            Some(n) => {
                assert!(n <= 1000, "step {step}: {n}");
                total += n;
            }
        }
    }
    assert_eq!(total, MANY as u64 + 2 + 1, "records, partitions, the topic");
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        store.delete_topic_rows(&mut conn, a, step).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .delete_topic_rows(&mut conn, a, usize::MAX)
            .await
            .unwrap(),
        None
    );
    assert!(store.topic_by_id(&mut conn, a).await.unwrap().is_none());
    drop(conn);
    assert!(partitions(&client, a).await.is_empty());
    assert!(read(&client, a, 0, 0, 10).await.is_empty());
    assert_eq!(partitions(&client, b).await, [part(0, 1, 0, 1)]);
    assert_eq!(read(&client, b, 0, 0, 10).await.len(), 1);
    assert_eq!(db.count("topic_log").await, 1);
    db.drop().await;
}

/// Published records are known at once; where offsets come later they are pending, by
/// partition, until sequencing steps (at most their limit each) give them dense offsets in
/// publish order; then the partitions' counters say where they end and how many bytes they
/// hold.
async fn publish_then_sequence<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let t = topic(&client, "t", 2).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        <B as crate::store::Publish>::known_topic_ids(store, &mut conn, &[])
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    let ids = publish(
        &client,
        t,
        &[
            (0, Some("k"), Some("{\"h\":\"v\"}"), b"first"),
            (0, None, None, b""),
            (1, Some("k"), None, b"third"),
            (0, None, None, b"fourth"),
        ],
        ROOMY,
    )
    .await;
    let unknown = MessageId::new();
    let mut asked = ids.clone();
    asked.push(unknown);
    let mut conn = client.pool().acquire().await.unwrap();
    let known = <B as crate::store::Publish>::known_topic_ids(store, &mut conn, &asked)
        .await
        .unwrap();
    assert_eq!(known, ids.iter().copied().collect::<HashSet<_>>());
    let pending = <B as crate::store::Publish>::pending_partitions(store, &mut conn, t)
        .await
        .unwrap();
    let by_id = <B as crate::store::Publish>::pending_by_id(store, &mut conn, ids[2])
        .await
        .unwrap();
    drop(conn);
    if offsets_at_publish::<B>() {
        assert!(pending.is_empty());
        assert_eq!(by_id, None);
    } else {
        assert_eq!(pending, BTreeMap::from([(0, 3), (1, 1)]));
        assert_eq!(by_id, Some((t, 1)));
    }

    let steps = sequence_all(&client, t, 2, 2).await;
    if offsets_at_publish::<B>() {
        assert!(steps.is_empty());
    } else {
        assert_eq!(steps, [2, 1, 1]);
    }
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        <B as crate::store::Publish>::pending_partitions(store, &mut conn, t)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        <B as crate::store::Publish>::pending_by_id(store, &mut conn, ids[0])
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        <B as crate::store::Publish>::pending_by_id(store, &mut conn, unknown)
            .await
            .unwrap(),
        None
    );
    drop(conn);
    let mut tx = client.begin().await.unwrap();
    // Nothing to do on an empty partition, nor on one that does not exist.
    assert_eq!(
        <B as crate::store::Publish>::sequence_step(store, &mut tx, t, &[1], 10)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        <B as crate::store::Publish>::sequence_step(store, &mut tx, t, &[7], 10)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        <B as crate::store::Publish>::sequence_step(store, &mut tx, i32::MAX, &[0], 10)
            .await
            .unwrap(),
        0
    );
    tx.commit().await.unwrap();

    assert_eq!(
        read(&client, t, 0, 0, 10).await,
        [(0, ids[0]), (1, ids[1]), (2, ids[3])]
    );
    assert_eq!(read(&client, t, 1, 0, 10).await, [(0, ids[2])]);
    assert_eq!(
        partitions(&client, t).await,
        [part(0, 3, 0, 11), part(1, 1, 0, 5)]
    );
    // A later publish continues where the partition ended.
    let later = publish(&client, t, &[(0, None, None, b"fifth")], ROOMY).await;
    sequence_all(&client, t, 2, 10).await;
    assert_eq!(read(&client, t, 0, 3, 10).await, [(3, later[0])]);
    assert_eq!(db.count("topic_log").await, 5);
    db.drop().await;
}

/// More records than one statement's list, published at once (in statements of any budget,
/// down to one record each), are known, and sequenced densely in publish order.
async fn publish_many<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let t = topic(&client, "t", 1).await;
    let recs: Vec<Rec<'_>> = (0..MANY).map(|_| (0, None, None, &b"body"[..])).collect();
    let mut ids = publish(&client, t, &recs, ROOMY).await;
    ids.extend(publish(&client, t, &recs[..20], 1).await);
    let mut conn = client.pool().acquire().await.unwrap();
    let known = <B as crate::store::Publish>::known_topic_ids(client.store(), &mut conn, &ids)
        .await
        .unwrap();
    drop(conn);
    assert_eq!(known.len(), MANY + 20);
    let steps = sequence_all(&client, t, 1, MAX_LIST).await;
    assert_eq!(
        steps.iter().sum::<usize>(),
        if offsets_at_publish::<B>() {
            0
        } else {
            MANY + 20
        }
    );
    let log = read(&client, t, 0, 0, 2 * MANY).await;
    let expected: Vec<(i64, MessageId)> = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| (i as i64, id))
        .collect();
    assert_eq!(log, expected);
    assert_eq!(
        partitions(&client, t).await,
        [part(0, (MANY + 20) as i64, 0, 4 * (MANY + 20) as i64)]
    );
    db.drop().await;
}

/// The log is read by offset range, by id and by key, with what the records carry and their
/// times; reads past the end, of other topics or of nothing find nothing.
async fn read_the_log<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, other) = (
        topic(&client, "t", 2).await,
        topic(&client, "other", 1).await,
    );
    let before = now_us(&client).await;
    let ids = publish(
        &client,
        t,
        &[
            (1, Some("k"), None, b"b"),
            (0, Some("k"), Some("{\"h\":\"v\",\"x\":\"\"}"), b"a"),
            (0, Some("j"), None, b"c"),
        ],
        ROOMY,
    )
    .await;
    sequence_all(&client, t, 2, 10).await;
    let after = now_us(&client).await;

    assert!(read(&client, t, 0, 2, 10).await.is_empty());
    assert!(read(&client, t, 0, i64::MAX, 10).await.is_empty());
    assert!(read(&client, t, 0, 0, 0).await.is_empty());
    assert_eq!(read(&client, t, 0, 1, 1).await, [(1, ids[2])]);
    assert_eq!(read(&client, t, 0, -5, 1).await, [(0, ids[1])]);
    assert!(read(&client, other, 0, 0, 10).await.is_empty());
    assert!(read(&client, t, 5, 0, 10).await.is_empty());

    let mut conn = client.reader().acquire().await.unwrap();
    let r = store
        .record_by_id(&mut conn, t, ids[1])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.partition, r.offset, r.body.as_slice()),
        (0, 0, &b"a"[..])
    );
    assert_eq!(r.key.as_deref(), Some("k"));
    assert_eq!(
        r.headers,
        BTreeMap::from([("h".into(), "v".into()), ("x".into(), String::new())])
    );
    assert!(r.published_at >= time_from_micros(before - 1_000));
    assert!(r.published_at <= r.sequenced_at);
    assert!(r.sequenced_at <= time_from_micros(after + 1_000));
    let plain = store
        .record_by_id(&mut conn, t, ids[0])
        .await
        .unwrap()
        .unwrap();
    assert!(plain.headers.is_empty());
    assert!(
        store
            .record_by_id(&mut conn, other, ids[1])
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .record_by_id(&mut conn, t, MessageId::new())
            .await
            .unwrap()
            .is_none()
    );

    let by_key: Vec<(u32, i64)> = store
        .records_by_key(&mut conn, t, "k", 10)
        .await
        .unwrap()
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect();
    assert_eq!(by_key, [(0, 0), (1, 0)]);
    let one = store.records_by_key(&mut conn, t, "k", 1).await.unwrap();
    assert_eq!(one.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[1]]);
    assert!(
        store
            .records_by_key(&mut conn, t, "K", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .records_by_key(&mut conn, other, "k", 10)
            .await
            .unwrap()
            .is_empty()
    );

    let at = store
        .sequenced_at(&mut conn, t, 0, 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(time_from_micros(at), r.sequenced_at);
    assert_eq!(store.sequenced_at(&mut conn, t, 0, 2).await.unwrap(), None);
    assert_eq!(
        store.sequenced_at(&mut conn, other, 0, 0).await.unwrap(),
        None
    );
    drop(conn);
    db.drop().await;
}

/// Members' positions: saved, moved, read per member and for the group (ordered, with when
/// they were saved), their minimum per partition, and forgotten per member or all at once;
/// other groups keep theirs.
async fn member_positions<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (g, other) = (7, 8);
    let before = now_us(&client).await;
    let mut conn = client.pool().acquire().await.unwrap();
    store.save_positions(&mut conn, g, "m1", &[]).await.unwrap();
    assert!(
        store
            .positions(&mut conn, g, "m1")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.all_positions(&mut conn, g).await.unwrap().is_empty());
    assert!(store.min_positions(&mut conn, g).await.unwrap().is_empty());
    store
        .save_positions(&mut conn, g, "m1", &[(0, 5), (1, i64::MAX)])
        .await
        .unwrap();
    store
        .save_positions(&mut conn, g, "m é", &[(0, 3)])
        .await
        .unwrap();
    store
        .save_positions(&mut conn, other, "m1", &[(0, 1)])
        .await
        .unwrap();
    store
        .save_positions(&mut conn, g, "m1", &[(0, 6)])
        .await
        .unwrap();
    assert_eq!(
        store.positions(&mut conn, g, "m1").await.unwrap(),
        HashMap::from([(0, 6), (1, i64::MAX)])
    );
    assert!(
        store
            .positions(&mut conn, g, "M1")
            .await
            .unwrap()
            .is_empty()
    );
    let all = store.all_positions(&mut conn, g).await.unwrap();
    let rows: Vec<(&str, i32, i64)> = all
        .iter()
        .map(|p| (p.member.as_str(), p.partition, p.next_offset))
        .collect();
    // By member as bytes: ' ' sorts before '1'.
    assert_eq!(rows, [("m é", 0, 3), ("m1", 0, 6), ("m1", 1, i64::MAX)]);
    let after = now_us(&client).await;
    for p in &all {
        assert!(
            p.updated_us >= before - 1_000 && p.updated_us <= after + 1_000,
            "{p:?}"
        );
    }
    assert_eq!(
        store.min_positions(&mut conn, g).await.unwrap(),
        HashMap::from([(0, 3), (1, i64::MAX)])
    );
    assert_eq!(
        store
            .delete_positions(&mut conn, g, Some("nobody"))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .delete_positions(&mut conn, g, Some("m1"))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store.min_positions(&mut conn, g).await.unwrap(),
        HashMap::from([(0, 3)])
    );
    assert_eq!(store.delete_positions(&mut conn, g, None).await.unwrap(), 1);
    assert!(store.all_positions(&mut conn, g).await.unwrap().is_empty());
    assert_eq!(
        store.all_positions(&mut conn, other).await.unwrap().len(),
        1
    );

    // More partitions than one statement's list.
    let many: Vec<(i32, i64)> = (0..MANY as i32).map(|p| (p, i64::from(p) * 2)).collect();
    store
        .save_positions(&mut conn, g, "wide", &many)
        .await
        .unwrap();
    let saved = store.positions(&mut conn, g, "wide").await.unwrap();
    assert_eq!(saved, many.iter().copied().collect::<HashMap<_, _>>());
    assert_eq!(
        store.delete_positions(&mut conn, g, None).await.unwrap(),
        MANY as u64
    );
    drop(conn);
    db.drop().await;
}

/// Retention's reads and removal: body sizes by offset; removing a range deletes its
/// records, raises the partition's first offset and lowers its bytes; removing it again
/// removes nothing; other partitions keep theirs.
async fn remove_the_oldest_records<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let t = client
        .create_topic("t", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let ids = publish(
        &client,
        t.id(),
        &[
            (0, None, None, b"1"),
            (0, None, None, b"22"),
            (0, None, None, b""),
            (0, None, None, b"4444"),
            (1, None, None, b"55555"),
        ],
        ROOMY,
    )
    .await;
    sequence_all(&client, t.id(), 2, 10).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        store.body_sizes(&mut conn, t.id(), 0, 0, 10).await.unwrap(),
        [(0, 1), (1, 2), (2, 0), (3, 4)]
    );
    assert_eq!(
        store.body_sizes(&mut conn, t.id(), 0, 1, 2).await.unwrap(),
        [(1, 2), (2, 0)]
    );
    assert!(
        store
            .body_sizes(&mut conn, t.id(), 0, 4, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .body_sizes(&mut conn, t.id(), 0, 0, 0)
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);

    let range = RangeRemoval {
        topic_id: t.id(),
        partition: 0,
        from: 0,
        to: 3,
        group_ids: &[g.id()],
    };
    let mut tx = client.begin().await.unwrap();
    assert_eq!(store.remove_range(&mut tx, &range).await.unwrap(), (3, 3));
    tx.commit().await.unwrap();
    assert_eq!(read(&client, t.id(), 0, 0, 10).await, [(3, ids[3])]);
    assert_eq!(
        partitions(&client, t.id()).await,
        [part(0, 4, 3, 4), part(1, 1, 0, 5)]
    );
    let mut tx = client.begin().await.unwrap();
    assert_eq!(store.remove_range(&mut tx, &range).await.unwrap(), (0, 0));
    // A range below the first retained offset does not lower it.
    let lower = RangeRemoval { to: 1, ..range };
    assert_eq!(store.remove_range(&mut tx, &lower).await.unwrap(), (0, 0));
    tx.commit().await.unwrap();
    assert_eq!(partitions(&client, t.id()).await[0], part(0, 4, 3, 4));
    let mut conn = client.reader().acquire().await.unwrap();
    assert_eq!(
        store.sequenced_at(&mut conn, t.id(), 0, 0).await.unwrap(),
        None
    );
    assert!(
        store
            .sequenced_at(&mut conn, t.id(), 0, 3)
            .await
            .unwrap()
            .is_some()
    );
    drop(conn);
    assert_eq!(db.count("topic_log").await, 2);
    db.drop().await;
}

/// Removing a range removes the history of its offsets in each group named (the history of
/// other offsets, other partitions and groups not named stays), and a trace then finds none.
async fn removing_a_range_removes_its_group_history<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = super::cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let mut conn = client.pool().acquire().await.unwrap();
    let (h, _) = store
        .create_group(&mut conn, t, "h", &GroupConfig::default())
        .await
        .unwrap();
    drop(conn);
    let h = h.id;
    super::log_plain(&client, t, 0, 4).await;
    super::log_plain(&client, t, 1, 2).await;
    let everywhere: Vec<(i32, i64)> = (0..4).map(|o| (0, o)).chain([(1, 0), (1, 1)]).collect();
    for group in [g, h] {
        let d = super::lease_at(&client, (t, group), &everywhere, super::LONG, "m").await;
        assert!(
            super::group_ack(&client, group, &super::receipts(&d))
                .await
                .is_empty()
        );
    }
    let history = || async {
        let rows = db
            .query(
                "SELECT group_id, partition_no, msg_offset FROM sqlmq_group_history \
                 ORDER BY group_id, partition_no, msg_offset",
                &[],
            )
            .await;
        rows.iter()
            .map(|r| (r[0].int() as i32, r[1].int() as i32, r[2].int()))
            .collect::<Vec<_>>()
    };
    assert_eq!(history().await.len(), 12);
    let remove = |partition: i32, from: i64, to: i64, group_ids: Vec<i32>| {
        let client = client.clone();
        async move {
            let mut tx = client.begin().await.unwrap();
            let range = RangeRemoval {
                topic_id: t,
                partition,
                from,
                to,
                group_ids: &group_ids,
            };
            let removed = client.store().remove_range(&mut tx, &range).await.unwrap();
            tx.commit().await.unwrap();
            removed
        }
    };
    assert_eq!(remove(0, 0, 2, vec![g]).await.0, 2);
    let expected = |g_kept: &[(i32, i64)], h_kept: &[(i32, i64)]| -> Vec<(i32, i32, i64)> {
        let mut all: Vec<(i32, i32, i64)> = g_kept
            .iter()
            .map(|&(p, o)| (g, p, o))
            .chain(h_kept.iter().map(|&(p, o)| (h, p, o)))
            .collect();
        all.sort();
        all
    };
    assert_eq!(
        history().await,
        expected(&everywhere[2..], &everywhere),
        "g's history of 0..2 in partition 0 only"
    );
    // Nothing named, nothing of the history goes (the records do).
    assert_eq!(remove(1, 0, 1, vec![]).await.0, 1);
    assert_eq!(history().await, expected(&everywhere[2..], &everywhere));
    // Both named, a range reaching past the end.
    assert_eq!(remove(0, 2, 100, vec![g, h, i32::MAX]).await.0, 2);
    assert_eq!(
        history().await,
        expected(&[(1, 0), (1, 1)], &[(0, 0), (0, 1), (1, 0), (1, 1)])
    );
    let mut conn = client.reader().acquire().await.unwrap();
    let rows = store
        .record_rows(&mut conn, g, MessageId::new(), (0, 3))
        .await
        .unwrap();
    assert!(rows.history.is_none());
    drop(conn);
    db.drop().await;
}

/// A retention of any length, up to `Duration::MAX` ("keep for ever"), is kept as a long one:
/// read back it is never shorter than what was given (up to a thousand years) and never zero,
/// which would let retention remove every record. (The conversion to milliseconds wrapped.)
async fn huge_retentions_are_capped_not_wrapped<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let thousand_years = Duration::from_secs(1000 * 366 * 24 * 3600);
    for (name, retention) in [
        ("year", Duration::from_secs(366 * 24 * 3600)),
        ("max", Duration::MAX),
    ] {
        let config = TopicConfig::default().retention(retention);
        let row = store.upsert_topic(&mut conn, name, &config).await.unwrap();
        let kept = row.config.retention.unwrap();
        assert!(
            kept >= retention.min(thousand_years),
            "{name}: {retention:?} read back as {kept:?}"
        );
    }
    drop(conn);
    db.drop().await;
}

/// The one-round-trip publish: where the backend has it, records of new ids commit by
/// themselves, bytes and all; a batch with an id pending already, or in the log already,
/// writes nothing and says so.
async fn scripted_publish<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let t = topic(&client, "t", 2).await;
    let row = |id, partition, body: &'static [u8]| PendingRow {
        partition,
        id,
        key: Some(b"k"),
        headers: Some(r#"{"h":"v'"}"#.to_owned()),
        body,
    };
    let empty = PendingBatch {
        topic_id: t,
        rows: &[],
    };
    assert!(
        <B as crate::store::ScriptedPublish>::prepare_publish_script(store, &empty, ROOMY)
            .unwrap()
            .is_none()
    );
    let (a, b, c) = (MessageId::new(), MessageId::new(), MessageId::new());
    let rows = vec![
        row(a, 0, b"it's; DROP TABLE x; --"),
        row(b, 1, &[0, b'\'', 255]),
    ];
    let batch = PendingBatch {
        topic_id: t,
        rows: &rows,
    };
    let Some(script) =
        <B as crate::store::ScriptedPublish>::prepare_publish_script(store, &batch, ROOMY).unwrap()
    else {
        // This backend has no such path: the engine publishes in a transaction.
        db.drop().await;
        return;
    };
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        <B as crate::store::ScriptedPublish>::publish_script(store, &mut conn, &script)
            .await
            .unwrap()
    );
    let again = vec![row(c, 0, b"new"), row(a, 0, b"resent")];
    let resend = PendingBatch {
        topic_id: t,
        rows: &again,
    };
    let resend =
        <B as crate::store::ScriptedPublish>::prepare_publish_script(store, &resend, ROOMY)
            .unwrap()
            .unwrap();
    // `a` is pending: nothing is written, and the connection is usable.
    assert!(
        !<B as crate::store::ScriptedPublish>::publish_script(store, &mut conn, &resend)
            .await
            .unwrap()
    );
    assert!(
        <B as crate::store::Publish>::known_topic_ids(store, &mut conn, &[c])
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    assert_eq!(sequence_all(&client, t, 2, 10).await, [1, 1]);
    // `a` is in the log: still nothing.
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        !<B as crate::store::ScriptedPublish>::publish_script(store, &mut conn, &resend)
            .await
            .unwrap()
    );
    assert!(
        <B as crate::store::Publish>::known_topic_ids(store, &mut conn, &[c])
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    assert_eq!(read(&client, t, 0, 0, 10).await, [(0, a)]);
    assert_eq!(read(&client, t, 1, 0, 10).await, [(0, b)]);
    let mut conn = client.reader().acquire().await.unwrap();
    let logged = store.read_from(&mut conn, t, 1, 0, 10).await.unwrap();
    assert_eq!(logged[0].body, [0, b'\'', 255]);
    assert_eq!(logged[0].key.as_deref(), Some("k"));
    assert_eq!(logged[0].headers["h"], "v'");
    drop(conn);
    db.drop().await;
}

/// One step over several partitions gives each its own dense offsets, in one transaction;
/// its limit counts records over all of them (taken in partition order), and partitions with
/// nothing pending, or that do not exist, are passed over.
async fn sequence_several_partitions_at_once<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let t = topic(&client, "t", 4).await;
    let ids = publish(
        &client,
        t,
        &[
            (0, None, None, b"a"),
            (2, None, None, b"bb"),
            (0, None, None, b"ccc"),
            (3, None, None, b"d"),
            (2, None, None, b"e"),
        ],
        ROOMY,
    )
    .await;
    let mut tx = client.begin().await.unwrap();
    let first = <B as crate::store::Publish>::sequence_step(store, &mut tx, t, &[0, 1, 2, 3, 9], 3)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = client.begin().await.unwrap();
    let second =
        <B as crate::store::Publish>::sequence_step(store, &mut tx, t, &[0, 1, 2, 3, 9], 10)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    if offsets_at_publish::<B>() {
        assert_eq!((first, second), (0, 0));
    } else {
        assert_eq!((first, second), (3, 2));
    }
    assert_eq!(read(&client, t, 0, 0, 10).await, [(0, ids[0]), (1, ids[2])]);
    assert_eq!(read(&client, t, 1, 0, 10).await, []);
    assert_eq!(read(&client, t, 2, 0, 10).await, [(0, ids[1]), (1, ids[4])]);
    assert_eq!(read(&client, t, 3, 0, 10).await, [(0, ids[3])]);
    assert_eq!(
        partitions(&client, t).await,
        [
            part(0, 2, 0, 4),
            part(1, 0, 0, 0),
            part(2, 2, 0, 3),
            part(3, 1, 0, 1)
        ]
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    sequence_several_partitions_at_once,
    scripted_publish,
    huge_retentions_are_capped_not_wrapped,
    topic_rows_and_partitions,
    growing_a_topic_extends_its_groups,
    delete_a_topic_step_by_step,
    publish_then_sequence,
    publish_many,
    read_the_log,
    member_positions,
    remove_the_oldest_records,
    removing_a_range_removes_its_group_history,
]);
