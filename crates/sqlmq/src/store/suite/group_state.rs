//! `store/body/group_state.rs`: what lag (counts per partition, ages), trace (one record's rows in each
//! state), consume-timeout alerts (leases held too long) and liveness (the groups an owner holds
//! leases in) read.

use std::collections::HashMap;
use std::time::Duration;

use super::{
    LONG, SuiteBackend, bury, cluster, fixture, group_ack, group_claim, group_fail, lease_at,
    log_plain, micros, now_us, retry, rows_of, wait_past,
};
use crate::Client;
use crate::domain::{GroupConfig, MessageId, Receipt, json_time_of};
use crate::store::rows::{GroupTable, HistoryState, PartitionCounts, RangeRemoval};

/// `by_partition` of one table (on a reader).
async fn counts<B: SuiteBackend>(client: &Client<B>, table: GroupTable, g: i32) -> PartitionCounts {
    let mut conn = client.reader().acquire().await.unwrap();
    client
        .store()
        .by_partition(&mut conn, table, g)
        .await
        .unwrap()
}

/// `age_of` (on a reader).
async fn age<B: SuiteBackend>(client: &Client<B>, t: i32, p: i32, offset: i64) -> Option<i64> {
    let mut conn = client.reader().acquire().await.unwrap();
    client
        .store()
        .age_of(&mut conn, t, p, offset)
        .await
        .unwrap()
}

/// Lag's counts: per partition, how many records the group has in flight, waiting to retry
/// and dead, and the smallest offset of each; none for another group. A record's age is the
/// time since it was published, while it is retained.
async fn counts_and_ages<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 3, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 4).await;
    log_plain(&client, t, 1, 2).await;
    log_plain(&client, t, 2, 1).await;
    for table in [GroupTable::Leases, GroupTable::Retries, GroupTable::Dead] {
        assert!(counts(&client, table, g).await.is_empty(), "{table:?}");
    }
    let d = lease_at(
        &client,
        (t, g),
        &[(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (2, 0)],
        LONG,
        "m",
    )
    .await;
    // (0, 0) dead; (0, 2) and (1, 1) waiting; (0, 3) acked; the others in flight.
    group_fail(&client, g, &d[0].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    for x in [&d[2], &d[5]] {
        group_fail(&client, g, &x.receipt(), &|n| retry(n, LONG, "later"))
            .await
            .unwrap();
    }
    assert!(group_ack(&client, g, &[d[3].receipt()]).await.is_empty());
    assert_eq!(
        counts(&client, GroupTable::Leases, g).await,
        HashMap::from([(0, (1, 1)), (1, (1, 0)), (2, (1, 0))])
    );
    assert_eq!(
        counts(&client, GroupTable::Retries, g).await,
        HashMap::from([(0, (1, 2)), (1, (1, 1))])
    );
    assert_eq!(
        counts(&client, GroupTable::Dead, g).await,
        HashMap::from([(0, (1, 0))])
    );
    // Two more in flight in partition 2 (a second offset there: the count grows).
    log_plain(&client, t, 2, 1).await;
    lease_at(&client, (t, g), &[(2, 1)], LONG, "m").await;
    assert_eq!(counts(&client, GroupTable::Leases, g).await[&2], (2, 0));
    for table in [GroupTable::Leases, GroupTable::Retries, GroupTable::Dead] {
        assert!(counts(&client, table, i32::MAX).await.is_empty());
    }

    let published = micros(d[4].enqueued_at);
    let before = now_us(&client).await;
    let got = age(&client, t, 1, 0).await.unwrap();
    let after = now_us(&client).await;
    assert!(
        got >= before - published - 1_000 && got <= after - published + 1_000,
        "{got}"
    );
    assert!(got >= 0);
    assert_eq!(age(&client, t, 1, 2).await, None, "past the end");
    assert_eq!(age(&client, t, 5, 0).await, None);
    assert_eq!(age(&client, i32::MAX, 1, 0).await, None);
    let mut tx = client.begin().await.unwrap();
    let removal = RangeRemoval {
        topic_id: t,
        partition: 1,
        from: 0,
        to: 1,
        group_ids: &[g],
    };
    client
        .store()
        .remove_range(&mut tx, &removal)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(age(&client, t, 1, 0).await, None, "removed");
    assert!(age(&client, t, 1, 1).await.is_some());
    db.drop().await;
}

/// One record's rows in a group, in each state it can be in: handed out to no one yet; in
/// flight (token, attempts, owner, claimed, lease end); waiting to retry (attempts, due, and
/// its history); dead (attempts, when, history); acked (history only, its state and events);
/// a state a newer build wrote; nothing in another group or at another position.
async fn record_rows_in_each_state<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let ids = log_plain(&client, t, 0, 3).await;
    let none = rows_of(&client, g, &placeholder(ids[0])).await;
    assert!(none.lease.is_none() && none.retry.is_none() && none.dead.is_none());
    assert!(none.history.is_none());

    let d = group_claim(&client, t, g, 3, LONG, "owner").await;
    let rows = rows_of(&client, g, &d[0]).await;
    let (token, attempts, owner, claimed, until) = rows.lease.clone().unwrap();
    assert_eq!((token, attempts, owner.as_deref()), (1, 1, Some("owner")));
    assert_eq!(until, micros(d[0].lease_expires_at));
    assert_eq!(until - claimed, LONG.as_micros() as i64);
    assert!(rows.retry.is_none() && rows.dead.is_none() && rows.history.is_none());

    // d[0] waits to retry, d[1] is dead, d[2] acked.
    let before = now_us(&client).await;
    group_fail(&client, g, &d[0].receipt(), &|n| retry(n, LONG, "later"))
        .await
        .unwrap();
    group_fail(&client, g, &d[1].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    assert!(group_ack(&client, g, &[d[2].receipt()]).await.is_empty());
    let after = now_us(&client).await;
    let within = |us: i64| us >= before - 1_000 && us <= after + 1_000;

    let waiting = rows_of(&client, g, &d[0]).await;
    assert!(waiting.lease.is_none() && waiting.dead.is_none());
    let (attempts, due) = waiting.retry.unwrap();
    assert_eq!(attempts, 1);
    assert!(within(due - LONG.as_micros() as i64));
    let (state, attempts, events, settled) = waiting.history.unwrap();
    assert_eq!(
        (state, attempts, events.len()),
        (HistoryState::Retrying, 1, 1)
    );
    assert!(within(settled));
    assert_eq!(events[0].delivered_at, json_time_of(claimed));
    assert_eq!(events[0].at, json_time_of(settled));

    let dead = rows_of(&client, g, &d[1]).await;
    assert!(dead.lease.is_none() && dead.retry.is_none());
    let (attempts, died) = dead.dead.unwrap();
    assert_eq!(attempts, 1);
    let (state, _, events, settled) = dead.history.unwrap();
    assert_eq!((state, died), (HistoryState::Dead, settled));
    assert_eq!(events[0].error.as_deref(), Some("dead"));

    let acked = rows_of(&client, g, &d[2]).await;
    assert!(acked.lease.is_none() && acked.retry.is_none() && acked.dead.is_none());
    let (state, attempts, events, settled) = acked.history.unwrap();
    assert_eq!((state, attempts), (HistoryState::Acked, 1));
    assert_eq!(events[0].outcome, "acked");
    assert!(within(settled));

    // Another group; another position; a state this build does not know.
    let mut conn = client.reader().acquire().await.unwrap();
    let store = client.store();
    let other = store
        .record_rows(&mut conn, i32::MAX, d[1].id, (0, 1))
        .await
        .unwrap();
    assert!(other.lease.is_none() && other.dead.is_none() && other.history.is_none());
    let elsewhere = store
        .record_rows(&mut conn, g, d[1].id, (0, 2))
        .await
        .unwrap();
    assert!(elsewhere.dead.is_some(), "found by id");
    assert_eq!(
        elsewhere.history.map(|h| h.0),
        Some(HistoryState::Acked),
        "the history of the position asked"
    );
    drop(conn);
    db.exec(
        "UPDATE sqlmq_group_history SET state = 9 WHERE msg_offset = 2",
        &[],
    )
    .await;
    let newer = rows_of(&client, g, &d[2]).await;
    assert_eq!(newer.history.unwrap().0, HistoryState::Other);
    db.drop().await;
}

/// A delivery of nothing at offset 0 of partition 0, to ask for `id`'s rows.
fn placeholder(id: MessageId) -> crate::domain::Delivery {
    crate::domain::Delivery {
        id,
        token: 0,
        attempt: 0,
        priority: 0,
        ordering_key: None,
        concurrency_key: None,
        idempotency_key: None,
        headers: Default::default(),
        body: Vec::new(),
        enqueued_at: std::time::SystemTime::UNIX_EPOCH,
        lease_expires_at: std::time::SystemTime::UNIX_EPOCH,
        deadline: None,
        run_timeout: None,
        partition: Some(0),
        offset: Some(0),
        tracked: false,
        claimed_at: std::time::SystemTime::UNIX_EPOCH,
    }
}

/// The leases held longer than a limit: with their receipts, positions, owners and how long
/// they have been held; none past `Duration::MAX` (capped: no error), none of another group.
async fn held_too_long<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 1).await;
    log_plain(&client, t, 1, 1).await;
    let old = lease_at(&client, (t, g), &[(1, 0)], LONG, "old")
        .await
        .remove(0);
    let old_claimed = rows_of(&client, g, &old).await.lease.unwrap().3;
    let gap = Duration::from_millis(300);
    wait_past(&client, old_claimed + gap.as_micros() as i64).await;
    let new = lease_at(&client, (t, g), &[(0, 0)], LONG, "new")
        .await
        .remove(0);
    let new_claimed = rows_of(&client, g, &new).await.lease.unwrap().3;
    wait_past(&client, new_claimed).await;
    let held = |group: i32, limit: Duration| {
        let client = client.clone();
        async move {
            let mut conn = client.reader().acquire().await.unwrap();
            let before = now_us(&client).await;
            let mut got = client
                .store()
                .held_too_long(&mut conn, group, limit)
                .await
                .unwrap();
            let after = now_us(&client).await;
            got.sort_by_key(|h| h.partition);
            (got, before, after)
        }
    };
    let (got, before, after) = held(g, gap).await;
    assert_eq!(got.len(), 1);
    let h = &got[0];
    assert_eq!(
        (h.receipt, h.partition, h.offset, h.owner.as_deref()),
        (old.receipt(), 1, 0, Some("old"))
    );
    let held_us = h.held.as_micros() as i64;
    assert!(
        held_us >= before - old_claimed - 1_000 && held_us <= after - old_claimed + 1_000,
        "{:?}",
        h.held
    );
    let (all, _, _) = held(g, Duration::ZERO).await;
    let receipts: Vec<Receipt> = all.iter().map(|h| h.receipt).collect();
    assert_eq!(receipts, [new.receipt(), old.receipt()]);
    assert!(held(g, LONG).await.0.is_empty());
    assert!(held(g, Duration::MAX).await.0.is_empty());
    assert!(held(i32::MAX, Duration::ZERO).await.0.is_empty());
    // Settled: no longer held.
    assert!(group_ack(&client, g, &[old.receipt()]).await.is_empty());
    let (left, _, _) = held(g, Duration::ZERO).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].receipt, new.receipt());
    db.drop().await;
}

/// The groups in which an owner holds leases (owners compared exactly), each once; none once
/// its leases are released.
async fn groups_of_owner<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let mut conn = client.pool().acquire().await.unwrap();
    let (h, _) = store
        .create_group(&mut conn, t, "h", &GroupConfig::default())
        .await
        .unwrap();
    let (k, _) = store
        .create_group(&mut conn, t, "k", &GroupConfig::default())
        .await
        .unwrap();
    drop(conn);
    let (h, k) = (h.id, k.id);
    log_plain(&client, t, 0, 3).await;
    lease_at(&client, (t, g), &[(0, 0), (0, 1)], LONG, "a").await;
    lease_at(&client, (t, g), &[(0, 2)], LONG, "b").await;
    lease_at(&client, (t, h), &[(0, 0)], LONG, "a").await;
    lease_at(&client, (t, k), &[(0, 0)], LONG, "b").await;
    let of = |owner: &'static str| {
        let client = client.clone();
        async move {
            let mut conn = client.reader().acquire().await.unwrap();
            let mut got = client
                .store()
                .groups_of_owner(&mut conn, owner)
                .await
                .unwrap();
            got.sort_unstable();
            got
        }
    };
    assert_eq!(of("a").await, [g, h]);
    assert_eq!(of("b").await, [g, k]);
    assert!(of("A").await.is_empty());
    assert!(of("a ").await.is_empty());
    assert!(of("").await.is_empty());
    let mut tx = client.begin().await.unwrap();
    store
        .release_group_owned(&mut tx, g, "a", 10, &|n| retry(n, Duration::ZERO, "left"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(of("a").await, [h]);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    counts_and_ages,
    record_rows_in_each_state,
    held_too_long,
    groups_of_owner,
]);
