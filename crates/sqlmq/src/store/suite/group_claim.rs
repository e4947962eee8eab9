//! `store/body/group_claim.rs`: the reads and writes of a cluster group's claim — due retries, what is in
//! flight, records by position and by range, the cursor walk (`lock_cursors`, `busy_cursor`,
//! `wait_cursor`), occupied partitions, past tokens, lease rows.
//!
//! On a backend with one writer at a time (`Server::ONE_WRITER`) a claim's transaction has the
//! database to itself: no other claim can hold a cursor, so the waits are not exercised there.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::{
    LONG, MAX_DATE_SPAN, SuiteBackend, bury, cluster, fixture, group_ack, group_claim, group_fail,
    lease_at, log_plain, log_records, micros, now_us, one_writer, retry, rows_of, wait_past,
};
use crate::Client;
use crate::domain::{Delivery, GroupConfig, MessageId};
use crate::store::rows::{Cursor, CursorScan, DueRetry, LoggedRow, RangeRemoval};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// `take_due_retries` in a committed transaction: `(id, partition, offset, attempts, token)`.
async fn take<B: SuiteBackend>(
    client: &Client<B>,
    g: i32,
    n: usize,
) -> Vec<(MessageId, i32, i64, i32, i64)> {
    let before = now_us(client).await;
    let mut tx = client.begin().await.unwrap();
    let taken: Vec<DueRetry> = client
        .store()
        .take_due_retries(&mut tx, g, n)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let after = now_us(client).await;
    taken
        .iter()
        .map(|r| {
            assert!(r.now_us >= before - 1_000 && r.now_us <= after + 1_000);
            (r.id, r.partition, r.offset, r.attempts, r.token)
        })
        .collect()
}

/// `lock_cursors` over partitions `[from, to)`, at most `limit`, in a committed transaction:
/// `(partition, next, high, end, low)`.
async fn lock<B: SuiteBackend>(
    client: &Client<B>,
    (t, g): (i32, i32),
    from: i32,
    to: i32,
    limit: i64,
) -> Vec<(i32, i64, i64, i64, i64)> {
    let before = now_us(client).await;
    let mut tx = client.begin().await.unwrap();
    let scan = CursorScan {
        group_id: g,
        topic_id: t,
        from,
        to,
        limit,
    };
    let cursors = client.store().lock_cursors(&mut tx, &scan).await.unwrap();
    tx.commit().await.unwrap();
    let after = now_us(client).await;
    cursors.iter().map(|c| fields(c, before, after)).collect()
}

/// A cursor's `(partition, next, high, end, low)`, its clock checked to be within
/// `[before, after]`.
fn fields(c: &Cursor, before: i64, after: i64) -> (i32, i64, i64, i64, i64) {
    assert!(
        c.now_us >= before - 1_000 && c.now_us <= after + 1_000,
        "{c:?}"
    );
    (c.partition, c.next, c.high, c.end, c.low)
}

/// `(partition, offset, id)` of logged rows, sorted.
fn places(rows: &[LoggedRow]) -> Vec<(i32, i64, MessageId)> {
    let mut out: Vec<_> = rows.iter().map(|r| (r.partition, r.offset, r.id)).collect();
    out.sort();
    out
}

/// A delivery's `(partition, offset)`.
fn place(d: &Delivery) -> (i32, i64) {
    (d.partition.unwrap() as i32, d.offset.unwrap())
}

/// Due retries are taken soonest first (then by id), at most `n`, with their attempts and
/// last tokens, and deleted; retries not due yet, and other groups', stay.
async fn take_due_retries_soonest_first<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let mut conn = client.pool().acquire().await.unwrap();
    let store = client.store();
    let (h, _) = store
        .create_group(&mut conn, t, "h", &GroupConfig::default())
        .await
        .unwrap();
    store.set_cursors(&mut conn, h.id, &[(0, 0)]).await.unwrap();
    drop(conn);
    let h = h.id;
    log_plain(&client, t, 0, 3).await;
    log_plain(&client, t, 1, 1).await;
    let d = group_claim(&client, t, g, 4, LONG, "m").await;
    assert_eq!(d.len(), 4);
    let other = group_claim(&client, t, h, 1, LONG, "m").await;
    assert!(take(&client, g, 10).await.is_empty(), "nothing failed yet");

    // d[3] first; then, once the clock has moved on, d[0] and d[2] (in id order if their
    // times tie); d[1] not due for an hour.
    let now = |n| retry(n, Duration::ZERO, "again");
    group_fail(&client, g, &d[3].receipt(), &now).await.unwrap();
    wait_past(&client, now_us(&client).await).await;
    group_fail(&client, g, &d[0].receipt(), &now).await.unwrap();
    group_fail(&client, g, &d[2].receipt(), &now).await.unwrap();
    group_fail(&client, g, &d[1].receipt(), &|n| retry(n, LONG, "later"))
        .await
        .unwrap();
    group_fail(&client, h, &other[0].receipt(), &now)
        .await
        .unwrap();
    let row = |d: &Delivery| (d.id, place(d).0, place(d).1, 1, 1);
    assert_eq!(take(&client, g, 2).await, [row(&d[3]), row(&d[0])]);
    assert_eq!(db.count("group_retries").await, 3);
    assert_eq!(take(&client, g, 10).await, [row(&d[2])]);
    assert!(take(&client, g, 10).await.is_empty());
    assert!(take(&client, i32::MAX, 10).await.is_empty());
    assert_eq!(take(&client, h, 10).await, [row(&other[0])]);
    assert_eq!(db.count("group_retries").await, 1, "the one not due");
    db.drop().await;
}

/// `held` names exactly the ids the group has leases on (more than one statement's list of
/// them); the lease rows are written as given, `Duration::MAX` leases included (capped at a
/// thousand years).
async fn held_and_the_lease_rows<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (_, other) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    let ids = log_plain(&client, t, 0, MANY + 1).await;
    let d = group_claim(&client, t, g, MANY, Duration::MAX, "member").await;
    assert_eq!(d.len(), MANY);
    assert_eq!(db.count("group_leases").await, MANY as i64);

    let mut asked = ids.clone();
    asked.push(MessageId::new());
    let mut tx = client.begin().await.unwrap();
    let held = store.held(&mut tx, g, &asked).await.unwrap();
    assert_eq!(held, ids[..MANY].iter().copied().collect::<HashSet<_>>());
    assert!(store.held(&mut tx, g, &[]).await.unwrap().is_empty());
    assert!(store.held(&mut tx, other, &ids).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    // The lease rows: token, attempt, owner, claimed, lease end a thousand years on.
    let rows = rows_of(&client, g, &d[7]).await;
    let (token, attempts, owner, claimed_us, until_us) = rows.lease.unwrap();
    assert_eq!((token, attempts, owner.as_deref()), (1, 1, Some("member")));
    assert_eq!(until_us, micros(d[7].lease_expires_at));
    assert_eq!(until_us - claimed_us, MAX_DATE_SPAN.as_micros() as i64);

    // Acked: no longer held.
    assert!(
        group_ack(&client, g, &super::receipts(&d[..MANY / 2]))
            .await
            .is_empty()
    );
    let mut tx = client.begin().await.unwrap();
    let held = store.held(&mut tx, g, &ids).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(held, ids[MANY / 2..MANY].iter().copied().collect());
    db.drop().await;
}

/// Records by position: those logged, with what they carry and no token; positions that
/// hold nothing (past the end, removed by retention, in another topic) give nothing; more
/// positions than one statement's list.
async fn records_at_positions<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let (o, _) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    let before = now_us(&client).await;
    let ids = log_records(
        &client,
        t,
        &[
            (0, Some("k"), Some("{\"h\":\"v\"}"), b"a"),
            (0, None, None, b""),
            (1, None, None, b"c"),
        ],
    )
    .await;
    log_plain(&client, o, 0, 1).await;
    let after = now_us(&client).await;
    let mut tx = client.begin().await.unwrap();
    assert!(store.records_at(&mut tx, t, &[]).await.unwrap().is_empty());
    let rows = store
        .records_at(&mut tx, t, &[(1, 0), (0, 7), (0, 0), (5, 0), (0, -1)])
        .await
        .unwrap();
    assert_eq!(places(&rows), [(0, 0, ids[0]), (1, 0, ids[2])]);
    let first = rows.iter().find(|r| r.id == ids[0]).unwrap();
    assert_eq!(first.key.as_deref(), Some("k"));
    assert_eq!(
        first.headers,
        [("h".to_owned(), "v".to_owned())].into_iter().collect()
    );
    assert_eq!(first.body, b"a");
    assert_eq!(first.token, 0);
    assert!(first.published_us >= before - 1_000 && first.published_us <= after + 1_000);
    let plain = store.records_at(&mut tx, t, &[(0, 1)]).await.unwrap();
    assert_eq!(plain.len(), 1);
    assert_eq!((plain[0].key.as_ref(), plain[0].headers.len()), (None, 0));
    assert!(plain[0].body.is_empty());
    assert!(
        store
            .records_at(&mut tx, i32::MAX, &[(0, 0)])
            .await
            .unwrap()
            .is_empty()
    );
    // Retention removed offset 0 of partition 0.
    let removal = RangeRemoval {
        topic_id: t,
        partition: 0,
        from: 0,
        to: 1,
        group_ids: &[g],
    };
    store.remove_range(&mut tx, &removal).await.unwrap();
    let rows = store
        .records_at(&mut tx, t, &[(0, 0), (0, 1)])
        .await
        .unwrap();
    assert_eq!(places(&rows), [(0, 1, ids[1])]);
    tx.commit().await.unwrap();

    let (big, _) = cluster(&client, "big", 1, false, GroupConfig::default()).await;
    let many = log_plain(&client, big, 0, MANY).await;
    let positions: Vec<(i32, i64)> = (0..MANY as i64).rev().map(|o| (0, o)).collect();
    let mut tx = client.begin().await.unwrap();
    let rows = store.records_at(&mut tx, big, &positions).await.unwrap();
    tx.commit().await.unwrap();
    let expected: Vec<(i32, i64, MessageId)> = many
        .iter()
        .enumerate()
        .map(|(o, &id)| (0, o as i64, id))
        .collect();
    assert_eq!(places(&rows), expected);
    db.drop().await;
}

/// A position asked for twice is one record, found once.
async fn records_at_a_repeated_position<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, _) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let ids = log_plain(&client, t, 0, 2).await;
    let mut tx = client.begin().await.unwrap();
    let rows = client
        .store()
        .records_at(&mut tx, t, &[(0, 1), (0, 1), (0, 0), (0, 1)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(places(&rows), [(0, 0, ids[0]), (0, 1, ids[1])]);
    db.drop().await;
}

/// A partition's records by offset range, in offset order; the last token each offset had in
/// the group, for offsets settled before (and only those).
async fn log_range_and_past_tokens<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    let (o, _) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    let ids = log_plain(&client, t, 0, 5).await;
    log_plain(&client, t, 1, 1).await;
    log_plain(&client, o, 0, 5).await;
    let range = |p: i32, from: i64, to: i64| {
        let client = client.clone();
        async move {
            let mut tx = client.begin().await.unwrap();
            let rows = client
                .store()
                .log_range(&mut tx, t, p, from, to)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            rows.iter().map(|r| (r.offset, r.id)).collect::<Vec<_>>()
        }
    };
    assert_eq!(range(0, 1, 3).await, [(1, ids[1]), (2, ids[2])]);
    assert_eq!(range(0, -3, 1).await, [(0, ids[0])]);
    assert_eq!(range(0, 4, i64::MAX).await, [(4, ids[4])]);
    assert!(range(0, 3, 3).await.is_empty());
    assert!(range(0, 3, 2).await.is_empty());
    assert!(range(0, 5, 10).await.is_empty());
    assert!(range(3, 0, 10).await.is_empty());
    let mut tx = client.begin().await.unwrap();
    let rows = store.log_range(&mut tx, t, 0, 0, 5).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rows[2].body, b"0.2");
    assert!(rows.iter().all(|r| r.token == 0 && r.key.is_none()));

    // Offset 0 acked with token 1; offset 1 failed with token 1, claimed again (token 2) and
    // buried; offset 2 in flight (no history).
    let d = group_claim(&client, t, g, 3, LONG, "m").await;
    assert_eq!(d.len(), 3);
    assert!(group_ack(&client, g, &[d[0].receipt()]).await.is_empty());
    group_fail(&client, g, &d[1].receipt(), &|n| {
        retry(n, Duration::ZERO, "again")
    })
    .await
    .unwrap();
    let again = group_claim(&client, t, g, 1, LONG, "m").await;
    assert_eq!((again[0].id, again[0].token), (ids[1], 2));
    group_fail(&client, g, &again[0].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    let tokens = |p: i32, group: i32, from: i64, to: i64| {
        let client = client.clone();
        async move {
            let mut tx = client.begin().await.unwrap();
            let tokens = client
                .store()
                .past_tokens(&mut tx, group, p, from, to)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            tokens
        }
    };
    assert_eq!(tokens(0, g, 0, 5).await, HashMap::from([(0, 1), (1, 2)]));
    assert_eq!(tokens(0, g, 1, 2).await, HashMap::from([(1, 2)]));
    assert!(tokens(0, g, 2, 5).await.is_empty());
    assert!(tokens(0, g, 1, 1).await.is_empty());
    assert!(tokens(1, g, 0, 5).await.is_empty());
    assert!(tokens(0, i32::MAX, 0, 5).await.is_empty());
    db.drop().await;
}

/// The cursor walk's steps: `lock_cursors` gives the cursors behind their partition's end
/// within a range of partitions, by partition, at most `limit`, with the partition's end and
/// first retained offset and the furthest the cursor went; `busy_cursor` names a partition
/// with work, none once every cursor is at its end; `wait_cursor` gives one partition's cursor
/// whatever its work, none where there is no cursor.
async fn the_cursor_walk<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 4, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 2).await;
    log_plain(&client, t, 2, 3).await;
    log_plain(&client, t, 3, 1).await;
    let tg = (t, g);
    assert_eq!(
        lock(&client, tg, 0, i32::MAX, 10).await,
        [(0, 0, 0, 2, 0), (2, 0, 0, 3, 0), (3, 0, 0, 1, 0)]
    );
    assert_eq!(lock(&client, tg, 0, i32::MAX, 1).await, [(0, 0, 0, 2, 0)]);
    assert_eq!(lock(&client, tg, 1, i32::MAX, 1).await, [(2, 0, 0, 3, 0)]);
    assert!(lock(&client, tg, 1, 2, 10).await.is_empty(), "empty");
    assert_eq!(lock(&client, tg, 3, 4, 10).await, [(3, 0, 0, 1, 0)]);
    assert!(lock(&client, tg, 4, i32::MAX, 10).await.is_empty());
    assert!(
        lock(&client, (t, i32::MAX), 0, i32::MAX, 10)
            .await
            .is_empty()
    );

    // Partition 0 consumed; partition 2 moved to 3, then back to 1; retention removed offset
    // 0 of partition 2.
    let mut tx = client.begin().await.unwrap();
    store
        .set_cursors(&mut tx, g, &[(0, 2), (2, 3)])
        .await
        .unwrap();
    store.set_cursors(&mut tx, g, &[(2, 1)]).await.unwrap();
    let removal = RangeRemoval {
        topic_id: t,
        partition: 2,
        from: 0,
        to: 1,
        group_ids: &[g],
    };
    store.remove_range(&mut tx, &removal).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        lock(&client, tg, 0, i32::MAX, 10).await,
        [(2, 1, 3, 3, 1), (3, 0, 0, 1, 0)]
    );

    let mut tx = client.begin().await.unwrap();
    let busy = store.busy_cursor(&mut tx, g, t).await.unwrap();
    assert!(matches!(busy, Some(2 | 3)), "{busy:?}");
    let before = now_us(&client).await;
    let empty = store.wait_cursor(&mut tx, g, t, 1).await.unwrap().unwrap();
    let after = now_us(&client).await;
    assert_eq!(fields(&empty, before, after), (1, 0, 0, 0, 0));
    let c = store.wait_cursor(&mut tx, g, t, 2).await.unwrap().unwrap();
    assert_eq!((c.partition, c.next, c.high, c.end, c.low), (2, 1, 3, 3, 1));
    assert!(store.wait_cursor(&mut tx, g, t, 4).await.unwrap().is_none());
    assert!(
        store
            .wait_cursor(&mut tx, i32::MAX, t, 2)
            .await
            .unwrap()
            .is_none()
    );
    store
        .set_cursors(&mut tx, g, &[(2, 3), (3, 1)])
        .await
        .unwrap();
    assert_eq!(store.busy_cursor(&mut tx, g, t).await.unwrap(), None);
    assert_eq!(store.busy_cursor(&mut tx, i32::MAX, t).await.unwrap(), None);
    tx.commit().await.unwrap();
    assert!(lock(&client, tg, 0, i32::MAX, 10).await.is_empty());
    db.drop().await;
}

/// Where another claim holds the cursors with work (not on a backend with one writer, where
/// no claim can): `lock_cursors` skips them, `busy_cursor` names one, and `wait_cursor` waits
/// for that claim to end, then gives the cursor as it left it, with the partition's end as it
/// is after the wait.
async fn a_claim_waits_for_a_held_cursor<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    if one_writer::<B>() {
        db.drop().await;
        return;
    }
    let store = client.store();
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    log_plain(&client, t, 1, 2).await;
    let scan = CursorScan {
        group_id: g,
        topic_id: t,
        from: 0,
        to: i32::MAX,
        limit: 10,
    };
    let mut first = client.begin().await.unwrap();
    let held = store.lock_cursors(&mut first, &scan).await.unwrap();
    assert_eq!(held.iter().map(|c| c.partition).collect::<Vec<_>>(), [1]);

    let mut second = client.begin().await.unwrap();
    assert!(
        store
            .lock_cursors(&mut second, &scan)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.busy_cursor(&mut second, g, t).await.unwrap(), Some(1));
    let waiting = tokio::spawn({
        let client = client.clone();
        async move {
            let c = client
                .store()
                .wait_cursor(&mut second, g, t, 1)
                .await
                .unwrap()
                .unwrap();
            second.commit().await.unwrap();
            c
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "waits for the first claim");
    // Meanwhile two more records are logged; the first claim takes the two there were.
    log_plain(&client, t, 1, 2).await;
    store.set_cursors(&mut first, g, &[(1, 2)]).await.unwrap();
    first.commit().await.unwrap();
    let c = waiting.await.unwrap();
    assert_eq!((c.partition, c.next, c.high, c.end, c.low), (1, 2, 2, 4, 0));
    db.drop().await;
}

/// With strict order, a partition whose head is in flight still has work by its cursor (the
/// engine holds it back by `occupied`): `occupied` names the partitions among those asked with
/// a record in flight or waiting to retry, however many are asked, and none of another group.
async fn occupied_partitions<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 4, true, GroupConfig::default()).await;
    for p in 0..3 {
        log_plain(&client, t, p, 2).await;
    }
    // The heads of partitions 0, 1 and 2 handed out, one at a time per partition.
    let heads = lease_at(&client, (t, g), &[(0, 0), (1, 0), (2, 0)], LONG, "m").await;
    let mut tx = client.begin().await.unwrap();
    store
        .set_cursors(&mut tx, g, &[(0, 1), (1, 1), (2, 1)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        lock(&client, (t, g), 0, i32::MAX, 10).await,
        [(0, 1, 1, 2, 0), (1, 1, 1, 2, 0), (2, 1, 1, 2, 0)]
    );
    let occupied = |parts: Vec<i32>, group: i32| {
        let client = client.clone();
        async move {
            let mut tx = client.begin().await.unwrap();
            let got = client
                .store()
                .occupied(&mut tx, group, &parts)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            got
        }
    };
    assert_eq!(
        occupied(vec![0, 1, 2, 3], g).await,
        HashSet::from([0, 1, 2])
    );
    // Partition 1's head acked, partition 2's waiting to retry.
    assert!(
        group_ack(&client, g, &[heads[1].receipt()])
            .await
            .is_empty()
    );
    group_fail(&client, g, &heads[2].receipt(), &|n| {
        retry(n, LONG, "later")
    })
    .await
    .unwrap();
    assert_eq!(occupied(vec![0, 1, 2, 3], g).await, HashSet::from([0, 2]));
    assert_eq!(occupied(vec![2, 2, 1], g).await, HashSet::from([2]));
    assert!(occupied(vec![], g).await.is_empty());
    assert!(occupied(vec![1, 3, -1], g).await.is_empty());
    assert!(occupied(vec![0, 2], i32::MAX).await.is_empty());
    let many: Vec<i32> = (0..MANY as i32).rev().collect();
    assert_eq!(occupied(many, g).await, HashSet::from([0, 2]));
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    take_due_retries_soonest_first,
    held_and_the_lease_rows,
    records_at_positions,
    records_at_a_repeated_position,
    log_range_and_past_tokens,
    the_cursor_walk,
    a_claim_waits_for_a_held_cursor,
    occupied_partitions,
]);
