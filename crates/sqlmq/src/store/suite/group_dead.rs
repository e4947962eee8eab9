//! `store/body/group_dead.rs`: a cluster group's dead letters (list, redrive, oldest, delete), its waiting
//! retries (list, retry now), and replays of offset ranges.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlmq_testkit::{TestDb, Value};

use super::{
    LONG, SuiteBackend, bury, cluster, fixture, group_ack, group_claim, group_fail, id_of,
    log_plain, log_records, micros, now_us, retry, sorted, wait_past,
};
use crate::Client;
use crate::domain::{GroupConfig, MessageId, Released, Settlement, json_time_of};
use crate::store::rows::RangeRemoval;
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// The group's dead letters (on a reader).
async fn letters<B: SuiteBackend>(
    client: &Client<B>,
    (t, g): (i32, i32),
    limit: usize,
) -> Vec<crate::domain::DeadLetter> {
    let mut conn = client.reader().acquire().await.unwrap();
    client
        .store()
        .group_dead_letters(&mut conn, t, g, limit)
        .await
        .unwrap()
}

/// `(id, partition, offset, attempts, token)` of every retry of group `g`, by offset.
async fn retry_rows<B: SuiteBackend>(
    db: &TestDb<B>,
    g: i32,
) -> Vec<(MessageId, i64, i64, i64, i64)> {
    db.query(
        "SELECT id, partition_no, msg_offset, attempts, token FROM sqlmq_group_retries \
         WHERE group_id = ? ORDER BY partition_no, msg_offset",
        &[Value::from(g)],
    )
    .await
    .iter()
    .map(|r| (id_of(&r[0]), r[1].int(), r[2].int(), r[3].int(), r[4].int()))
    .collect()
}

/// Make the leases of `n` fresh records of group `g` dead at once (a release of expired
/// leases that buries them); their ids.
async fn bury_many<B: SuiteBackend>(
    client: &Client<B>,
    (t, g): (i32, i32),
    n: usize,
) -> Vec<MessageId> {
    let d = group_claim(client, t, g, n, Duration::from_millis(1), "m").await;
    assert_eq!(d.len(), n);
    let last = d.iter().map(|d| micros(d.lease_expires_at)).max().unwrap();
    wait_past(client, last).await;
    let mut tx = client.begin().await.unwrap();
    let released = client
        .store()
        .release_group_expired(&mut tx, g, n, &|n| bury(n, "expired"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        released,
        Released {
            released: 0,
            dead_lettered: n
        }
    );
    d.iter().map(|d| d.id).collect()
}

/// Dead letters come oldest first (then by id), at most `limit`, with their records (key,
/// headers, body, publishing time, position), attempts, when they died and the errors of their
/// history; a dead letter whose record retention removed (with its history) has neither; another
/// group's, or another topic's records, are not listed.
async fn dead_letters_with_their_records<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    let ids = log_records(
        &client,
        t,
        &[
            (0, Some("k"), Some("{\"h\":\"v\"}"), b"zero"),
            (0, None, None, b"one"),
            (1, None, None, b"two"),
            (0, None, None, b"three"),
        ],
    )
    .await;
    log_plain(&client, o, 0, 1).await;
    assert!(letters(&client, (t, g), 10).await.is_empty());
    let d = group_claim(&client, t, g, 4, LONG, "m").await;
    let by_id: BTreeMap<MessageId, _> = d.iter().map(|d| (d.id, d)).collect();
    // ids[2] first; then ids[0] (failed once before) and ids[1] (without an error); ids[3]
    // retrying.
    group_fail(&client, g, &by_id[&ids[2]].receipt(), &|n| bury(n, "two"))
        .await
        .unwrap();
    wait_past(&client, now_us(&client).await).await;
    group_fail(&client, g, &by_id[&ids[0]].receipt(), &|n| {
        retry(n, Duration::ZERO, "first")
    })
    .await
    .unwrap();
    let again = group_claim(&client, t, g, 1, LONG, "m").await.remove(0);
    assert_eq!((again.id, again.attempt), (ids[0], 2));
    group_fail(&client, g, &again.receipt(), &|n| bury(n, "second"))
        .await
        .unwrap();
    let silent = |n| Settlement {
        retry_after: None,
        attempts: n,
        error: None,
        outcome: "dead",
    };
    group_fail(&client, g, &by_id[&ids[1]].receipt(), &silent)
        .await
        .unwrap();
    group_fail(&client, g, &by_id[&ids[3]].receipt(), &|n| {
        retry(n, LONG, "r")
    })
    .await
    .unwrap();
    let foreign = group_claim(&client, o, h, 1, LONG, "m").await.remove(0);
    group_fail(&client, h, &foreign.receipt(), &|n| bury(n, "foreign"))
        .await
        .unwrap();

    let all = letters(&client, (t, g), 10).await;
    let listed: Vec<MessageId> = all.iter().map(|l| l.id).collect();
    // ids[0] and ids[1] may have died in the same instant: then by id.
    assert_eq!(listed, [ids[2], ids[0], ids[1]]);
    let zero = &all[1];
    assert_eq!(zero.attempts, 2);
    assert_eq!((zero.partition, zero.offset), (Some(0), Some(0)));
    assert_eq!(zero.ordering_key.as_deref(), Some("k"));
    assert_eq!(
        zero.headers,
        BTreeMap::from([("h".to_owned(), "v".to_owned())])
    );
    assert_eq!(
        (zero.body.as_slice(), zero.member.as_ref()),
        (&b"zero"[..], None)
    );
    assert_eq!(zero.enqueued_at, by_id[&ids[0]].enqueued_at);
    let died = json_time_of(micros(zero.died_at));
    let errors: Vec<(u32, &str, &str)> = zero
        .errors
        .iter()
        .map(|e| (e.attempt, e.at.as_str(), e.error.as_str()))
        .collect();
    assert_eq!(errors.len(), 2);
    assert_eq!((errors[0].0, errors[0].2), (1, "first"));
    assert_eq!(errors[1], (2, died.as_str(), "second"));
    assert!(all[2].errors.is_empty(), "died without an error");
    assert_eq!(
        (all[0].partition, all[0].offset, all[0].body.as_slice()),
        (Some(1), Some(0), &b"two"[..])
    );
    assert!(all[0].died_at < zero.died_at);
    assert_eq!(
        letters(&client, (t, g), 2)
            .await
            .iter()
            .map(|l| l.id)
            .collect::<Vec<_>>(),
        [ids[2], ids[0]]
    );
    assert!(letters(&client, (t, i32::MAX), 10).await.is_empty());
    assert_eq!(letters(&client, (o, h), 10).await.len(), 1);

    // Asked with a topic of nothing: the records are not found.
    let elsewhere = letters(&client, (i32::MAX, g), 10).await;
    assert_eq!(elsewhere.len(), 3);
    assert!(elsewhere.iter().all(|l| l.body.is_empty()
        && l.headers.is_empty()
        && l.ordering_key.is_none()
        && l.enqueued_at == l.died_at));

    // Retention removes offsets 0 and 1 of partition 0, and the group's history of them.
    let mut tx = client.begin().await.unwrap();
    let removal = RangeRemoval {
        topic_id: t,
        partition: 0,
        from: 0,
        to: 2,
        group_ids: &[g],
    };
    client
        .store()
        .remove_range(&mut tx, &removal)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let after = letters(&client, (t, g), 10).await;
    let zero = &after[1];
    assert_eq!((zero.id, zero.attempts), (ids[0], 2));
    assert!(zero.body.is_empty() && zero.headers.is_empty() && zero.ordering_key.is_none());
    assert!(zero.errors.is_empty(), "its history went with it");
    assert_eq!(zero.enqueued_at, zero.died_at);
    assert_eq!(after[0].errors.len(), 1, "partition 1 kept its history");
    assert_eq!(db.count("group_dead").await, 4);
    db.drop().await;
}

/// A redrive makes dead letters due now with fresh attempts, keeping their tokens (more than
/// one statement's list at once), and returns the ids that were dead: not unknown ids, not
/// another group's, nothing for nothing.
async fn redrive_dead_letters<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, MANY).await;
    log_plain(&client, o, 0, 1).await;
    let dead = bury_many(&client, (t, g), MANY).await;
    let foreign = bury_many(&client, (o, h), 1).await;
    let mut tx = client.begin().await.unwrap();
    assert!(
        store
            .redrive_group(&mut tx, g, &[])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .redrive_group(&mut tx, g, &[MessageId::new(), foreign[0]])
            .await
            .unwrap()
            .is_empty()
    );
    let mut asked = dead.clone();
    asked.push(MessageId::new());
    asked.push(foreign[0]);
    let found = store.redrive_group(&mut tx, g, &asked).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(sorted(found), sorted(dead.clone()));
    assert_eq!(db.count("group_dead").await, 1, "the other group's");
    let retries = retry_rows(&db, g).await;
    assert_eq!(retries.len(), MANY);
    assert!(
        retries.iter().all(|r| r.3 == 0 && r.4 == 1),
        "{:?}",
        retries[0]
    );
    // Due now: delivered again, attempt 1, a later token.
    let again = group_claim(&client, t, g, MANY, LONG, "m").await;
    assert_eq!(again.len(), MANY);
    assert!(again.iter().all(|a| a.attempt == 1 && a.token == 2));
    let mut tx = client.begin().await.unwrap();
    assert!(
        store
            .redrive_group(&mut tx, g, &dead)
            .await
            .unwrap()
            .is_empty()
    );
    tx.commit().await.unwrap();
    db.drop().await;
}

/// The oldest dead letters' ids (oldest first, then by id, at most `limit`), and deleting dead
/// letters by id: how many went; unknown ids, another group's, and nothing delete nothing;
/// more than one statement's list at once.
async fn oldest_and_delete<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, MANY + 2).await;
    log_plain(&client, o, 0, 1).await;
    let early = bury_many(&client, (t, g), 2).await;
    wait_past(&client, now_us(&client).await).await;
    let late = bury_many(&client, (t, g), MANY).await;
    let foreign = bury_many(&client, (o, h), 1).await;
    let oldest = |group: i32, limit: usize| {
        let client = client.clone();
        async move {
            let mut conn = client.reader().acquire().await.unwrap();
            client
                .store()
                .oldest_group_dead(&mut conn, group, limit)
                .await
                .unwrap()
        }
    };
    assert_eq!(oldest(g, 2).await, sorted(early.clone()));
    let first = oldest(g, 3).await;
    assert_eq!(first[..2], sorted(early.clone()));
    assert!(late.contains(&first[2]));
    assert_eq!(oldest(g, 10 * MANY).await.len(), MANY + 2);
    assert!(oldest(g, 0).await.is_empty());
    assert!(oldest(i32::MAX, 10).await.is_empty());

    let mut tx = client.begin().await.unwrap();
    assert_eq!(store.delete_group_dead(&mut tx, g, &[]).await.unwrap(), 0);
    assert_eq!(
        store
            .delete_group_dead(&mut tx, g, &[MessageId::new(), foreign[0]])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .delete_group_dead(&mut tx, g, &[early[0], early[0]])
            .await
            .unwrap(),
        1
    );
    let mut rest = late.clone();
    rest.push(early[1]);
    rest.push(MessageId::new());
    assert_eq!(
        store.delete_group_dead(&mut tx, g, &rest).await.unwrap(),
        MANY as u64 + 1
    );
    tx.commit().await.unwrap();
    assert!(oldest(g, 10).await.is_empty());
    assert_eq!(oldest(h, 10).await, foreign);
    db.drop().await;
}

/// Waiting retries are listed soonest first with where they are, their attempts and when they
/// are due, at most `limit`; retry now makes the waiting ones of some ids due (counting them:
/// not unknown ids, dead letters or another group's), and the claim then takes them.
async fn retries_listed_and_made_due<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 2).await;
    log_plain(&client, t, 1, 1).await;
    log_plain(&client, o, 0, 1).await;
    let d = group_claim(&client, t, g, 3, LONG, "m").await;
    let foreign = group_claim(&client, o, h, 1, LONG, "m").await.remove(0);
    let hour = LONG;
    let waits = [hour * 2, hour, hour / 2];
    let before = now_us(&client).await;
    for (d, wait) in d.iter().zip(waits) {
        group_fail(&client, g, &d.receipt(), &|n| retry(n, wait, "later"))
            .await
            .unwrap();
    }
    group_fail(&client, h, &foreign.receipt(), &|n| retry(n, hour, "later"))
        .await
        .unwrap();
    let after = now_us(&client).await;
    let list = |limit: usize| {
        let client = client.clone();
        async move {
            let mut conn = client.reader().acquire().await.unwrap();
            client
                .store()
                .group_retries(&mut conn, g, limit)
                .await
                .unwrap()
        }
    };
    let all = list(10).await;
    let order: Vec<MessageId> = all.iter().map(|r| r.id).collect();
    assert_eq!(order, [d[2].id, d[1].id, d[0].id]);
    for (r, wait) in all.iter().zip([hour / 2, hour, hour * 2]) {
        let due = micros(r.run_at);
        let span = wait.as_micros() as i64;
        assert!(due >= before + span - 1_000 && due <= after + span + 1_000);
        assert_eq!(r.attempts, 1);
    }
    let places: Vec<(u32, i64)> = all.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(places, [(1, 0), (0, 1), (0, 0)]);
    assert_eq!(list(1).await.len(), 1);
    assert!(list(0).await.is_empty());

    let mut tx = client.begin().await.unwrap();
    assert_eq!(store.retry_now(&mut tx, g, &[]).await.unwrap(), 0);
    assert_eq!(
        store
            .retry_now(&mut tx, g, &[MessageId::new(), foreign.id])
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .retry_now(&mut tx, g, &[d[0].id, d[2].id, MessageId::new()])
            .await
            .unwrap(),
        2
    );
    tx.commit().await.unwrap();
    let due = group_claim(&client, t, g, 10, LONG, "m").await;
    let mut taken: Vec<(MessageId, u32, u64)> =
        due.iter().map(|d| (d.id, d.attempt, d.token)).collect();
    taken.sort();
    let mut expected = vec![(d[0].id, 2, 2), (d[2].id, 2, 2)];
    expected.sort();
    assert_eq!(taken, expected);
    assert_eq!(
        list(10).await.iter().map(|r| r.id).collect::<Vec<_>>(),
        [d[1].id]
    );
    assert_eq!(
        db.count("group_retries").await,
        2,
        "d[1] and the foreign one"
    );
    db.drop().await;
}

/// More retries than one statement's list made due at once.
async fn retry_many_now<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, MANY).await;
    let d = group_claim(&client, t, g, MANY, Duration::from_millis(1), "m").await;
    let last = d.iter().map(|d| micros(d.lease_expires_at)).max().unwrap();
    wait_past(&client, last).await;
    let mut tx = client.begin().await.unwrap();
    store
        .release_group_expired(&mut tx, g, MANY, &|n| retry(n, LONG, "expired"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(group_claim(&client, t, g, MANY, LONG, "m").await.is_empty());
    let ids: Vec<MessageId> = d.iter().map(|d| d.id).collect();
    let mut tx = client.begin().await.unwrap();
    assert_eq!(
        store.retry_now(&mut tx, g, &ids).await.unwrap(),
        MANY as u64
    );
    tx.commit().await.unwrap();
    assert_eq!(
        group_claim(&client, t, g, MANY, LONG, "m").await.len(),
        MANY
    );
    assert_eq!(db.count("group_retries").await, 0);
    db.drop().await;
}

/// A replay queues every record of a partition's offset range for delivery now, attempts
/// restarting and tokens continuing (the last the record had in the group, kept by a retry
/// already waiting); its dead letters are delivered again too; a record in flight is queued
/// as well (the claim drops it while it is held). It returns the records of the range: none
/// for an empty range, past the end, in a topic of nothing, or removed by retention.
async fn replay_a_range<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let ids = log_plain(&client, t, 0, 6).await;
    log_plain(&client, t, 1, 1).await;
    // Offset 0 acked; 1 dead; 2 in flight; 3 failed twice, waiting an hour; 4 and 5 never
    // handed out (the cursor stops at 4).
    let d = group_claim(&client, t, g, 4, LONG, "m").await;
    assert!(group_ack(&client, g, &[d[0].receipt()]).await.is_empty());
    group_fail(&client, g, &d[1].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    group_fail(&client, g, &d[3].receipt(), &|n| {
        retry(n, Duration::ZERO, "again")
    })
    .await
    .unwrap();
    let again = group_claim(&client, t, g, 1, LONG, "m").await.remove(0);
    assert_eq!((again.id, again.token), (ids[3], 2));
    group_fail(&client, g, &again.receipt(), &|n| retry(n, LONG, "later"))
        .await
        .unwrap();

    let replay = |topic: i32, partition: i32, range: std::ops::Range<i64>| {
        let client = client.clone();
        async move {
            let mut tx = client.begin().await.unwrap();
            let n = client
                .store()
                .replay_range(&mut tx, topic, g, partition, range)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            n
        }
    };
    assert_eq!(replay(t, 0, 3..3).await, 0);
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 4..2;
    assert_eq!(replay(t, 0, backwards).await, 0);
    assert_eq!(replay(t, 0, 6..100).await, 0);
    assert_eq!(replay(t, 5, 0..100).await, 0);
    assert_eq!(replay(i32::MAX, 0, 0..3).await, 0, "a topic of nothing");
    assert!(retry_rows(&db, g).await.iter().all(|r| r.0 == ids[3]));

    let before = now_us(&client).await;
    assert_eq!(replay(t, 0, 0..4).await, 4);
    assert_eq!(db.count("group_dead").await, 0);
    assert_eq!(
        retry_rows(&db, g).await,
        [
            (ids[0], 0, 0, 0, 1),
            (ids[1], 0, 1, 0, 1),
            (ids[2], 0, 2, 0, 0),
            (ids[3], 0, 3, 0, 2),
        ]
    );
    let mut conn = client.reader().acquire().await.unwrap();
    let listed = store.group_retries(&mut conn, g, 10).await.unwrap();
    drop(conn);
    assert!(listed.iter().all(|r| micros(r.run_at) >= before - 1_000));
    let mut tx = client.begin().await.unwrap();
    let held = store.held(&mut tx, g, &ids).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(held, [ids[2]].into_iter().collect());

    // Retention removed offsets 0 and 1: a replay of 0..5 queues the three left.
    let mut tx = client.begin().await.unwrap();
    let removal = RangeRemoval {
        topic_id: t,
        partition: 0,
        from: 0,
        to: 2,
        group_ids: &[g],
    };
    store.remove_range(&mut tx, &removal).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(replay(t, 0, 0..5).await, 3);
    assert_eq!(
        retry_rows(&db, g)
            .await
            .iter()
            .map(|r| (r.2, r.4))
            .collect::<Vec<_>>(),
        [(0, 1), (1, 1), (2, 0), (3, 2), (4, 0)]
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    dead_letters_with_their_records,
    redrive_dead_letters,
    oldest_and_delete,
    retries_listed_and_made_due,
    retry_many_now,
    replay_a_range,
]);
