//! `store/body/groups.rs`: group rows (create or update, find, list), cursors, deleting a group step by step.

use std::time::Duration;

use sqlmq_testkit::{TestDb, Value};

use super::{
    LONG, SuiteBackend, bury, cluster, fixture, group_ack, group_claim, group_fail, log_plain,
    retry,
};
use crate::Client;
use crate::domain::{Backoff, GroupConfig, GroupMode, MessageId, TopicConfig};
use crate::store::rows::MemberDeadRow;
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// Create topic `name` with `partitions` through the store; its id.
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

/// The `(partition, next offset, high offset)` of every cursor of group `g`, by partition.
async fn cursor_rows<B: SuiteBackend>(db: &TestDb<B>, g: i32) -> Vec<(i64, i64, i64)> {
    db.query(
        "SELECT partition_no, next_offset, high_offset FROM sqlmq_group_cursors \
         WHERE group_id = ? ORDER BY partition_no",
        &[Value::from(g)],
    )
    .await
    .iter()
    .map(|r| (r[0].int(), r[1].int(), r[2].int()))
    .collect()
}

/// A group is created with its configuration; creating it again updates its retry settings
/// but never its mode; groups are found by name (within their topic) and id, listed by name
/// per topic, and not found when they do not exist.
async fn create_find_and_list<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, other) = (topic(&client, "t", 2).await, topic(&client, "o", 1).await);
    let first = GroupConfig::default()
        .max_attempts(5)
        .backoff(Backoff::Ladder(vec![
            Duration::from_secs(1),
            Duration::from_millis(2500),
        ]))
        .consume_timeout(Duration::from_millis(1500));
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        store
            .groups_of_topic(&mut conn, t)
            .await
            .unwrap()
            .is_empty()
    );
    let (g, created) = store.create_group(&mut conn, t, "g", &first).await.unwrap();
    assert!(created);
    assert_eq!((g.topic_id, g.name.as_str(), &g.config), (t, "g", &first));

    // Again, as a broadcast group with other retry settings: the mode stays.
    let again = GroupConfig::broadcast().max_attempts(7);
    let (updated, created) = store.create_group(&mut conn, t, "g", &again).await.unwrap();
    assert!(!created);
    assert_eq!(updated.id, g.id);
    let expected = GroupConfig::default().max_attempts(7);
    assert_eq!(updated.config, expected);
    assert_eq!(updated.config.consume_timeout, None);

    let (b, created) = store
        .create_group(&mut conn, t, "b", &GroupConfig::broadcast())
        .await
        .unwrap();
    assert!(created);
    assert_eq!(b.config.mode, GroupMode::Broadcast);
    // The same name in another topic is another group.
    let (o, created) = store
        .create_group(&mut conn, other, "g", &GroupConfig::default())
        .await
        .unwrap();
    assert!(created);
    assert_ne!(o.id, g.id);

    let by_name = store
        .group_by_name(&mut conn, t, "g")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((by_name.id, &by_name.config), (g.id, &expected));
    let by_id = store.group_by_id(&mut conn, b.id).await.unwrap().unwrap();
    assert_eq!((by_id.topic_id, by_id.name.as_str()), (t, "b"));
    assert_eq!(by_id.config, GroupConfig::broadcast());
    assert!(
        store
            .group_by_name(&mut conn, t, "none")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .group_by_name(&mut conn, other, "b")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .group_by_name(&mut conn, i32::MAX, "g")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .group_by_id(&mut conn, i32::MAX)
            .await
            .unwrap()
            .is_none()
    );
    let names = |rows: Vec<crate::store::rows::GroupRow>| -> Vec<(i32, String)> {
        rows.into_iter().map(|r| (r.id, r.name)).collect()
    };
    assert_eq!(
        names(store.groups_of_topic(&mut conn, t).await.unwrap()),
        [(b.id, "b".to_owned()), (g.id, "g".to_owned())]
    );
    assert_eq!(
        names(store.groups_of_topic(&mut conn, other).await.unwrap()),
        [(o.id, "g".to_owned())]
    );
    assert!(
        store
            .groups_of_topic(&mut conn, i32::MAX)
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    assert_eq!(db.count("consumer_groups").await, 3);
    // Creating a group row makes no cursors: the engine places them.
    assert_eq!(db.count("group_cursors").await, 0);
    db.drop().await;
}

/// A consume timeout of any length, up to `Duration::MAX`, is kept as a long one: read back,
/// it is at least a thousand years, never shorter than what was given up to that, and never
/// zero (which would report every record as held too long).
async fn huge_consume_timeouts_are_capped_not_wrapped<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let t = topic(&client, "t", 1).await;
    let year = Duration::from_secs(366 * 24 * 3600);
    let mut conn = client.pool().acquire().await.unwrap();
    for (name, timeout) in [("year", year), ("max", Duration::MAX)] {
        let config = GroupConfig::default().consume_timeout(timeout);
        let (row, _) = store
            .create_group(&mut conn, t, name, &config)
            .await
            .unwrap();
        let kept = row.config.consume_timeout.unwrap();
        assert!(
            kept >= timeout.min(super::MAX_DATE_SPAN),
            "{name}: {timeout:?} read back as {kept:?}"
        );
    }
    drop(conn);
    db.drop().await;
}

/// Cursors are created and moved to the targets given; each remembers the furthest it ever
/// was; an empty list changes nothing; more partitions than one statement's list are set at
/// once; other groups keep theirs.
async fn cursors_move_and_remember_the_furthest<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let t = topic(&client, "t", 1).await;
    let mut conn = client.pool().acquire().await.unwrap();
    let (g, _) = store
        .create_group(&mut conn, t, "g", &GroupConfig::default())
        .await
        .unwrap();
    let (h, _) = store
        .create_group(&mut conn, t, "h", &GroupConfig::default())
        .await
        .unwrap();
    let (g, h) = (g.id, h.id);
    assert!(store.cursors(&mut conn, g).await.unwrap().is_empty());
    store.set_cursors(&mut conn, g, &[]).await.unwrap();
    assert!(store.cursors(&mut conn, g).await.unwrap().is_empty());
    store
        .set_cursors(&mut conn, g, &[(1, 3), (0, 5)])
        .await
        .unwrap();
    store.set_cursors(&mut conn, h, &[(0, 9)]).await.unwrap();
    assert_eq!(store.cursors(&mut conn, g).await.unwrap(), [(0, 5), (1, 3)]);
    // Back, then forward but not as far as before, then past it.
    store.set_cursors(&mut conn, g, &[(0, 2)]).await.unwrap();
    drop(conn);
    assert_eq!(cursor_rows(&db, g).await, [(0, 2, 5), (1, 3, 3)]);
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .set_cursors(&mut conn, g, &[(0, 4), (1, 8)])
        .await
        .unwrap();
    drop(conn);
    assert_eq!(cursor_rows(&db, g).await, [(0, 4, 5), (1, 8, 8)]);
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .set_cursors(&mut conn, g, &[(0, i64::MAX)])
        .await
        .unwrap();
    drop(conn);
    assert_eq!(
        cursor_rows(&db, g).await,
        [(0, i64::MAX, i64::MAX), (1, 8, 8)]
    );
    assert_eq!(cursor_rows(&db, h).await, [(0, 9, 9)]);

    let many: Vec<(i32, i64)> = (0..MANY as i32).map(|p| (p, i64::from(p) + 1)).collect();
    let mut conn = client.pool().acquire().await.unwrap();
    store.set_cursors(&mut conn, h, &many).await.unwrap();
    assert_eq!(store.cursors(&mut conn, h).await.unwrap(), many);
    assert!(store.cursors(&mut conn, i32::MAX).await.unwrap().is_empty());
    drop(conn);
    assert_eq!(db.count("group_cursors").await, 2 + MANY as i64);
    db.drop().await;
}

/// Deleting a group step by step: each step deletes at most a thousand rows of one table
/// (member dead letters, leases, retries, dead letters, history, positions, cursors, rate
/// deliveries, the rate limit), the last one the group row; past it there is no step; another group of the topic keeps its rows.
async fn delete_a_group_step_by_step<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let rate = "5/1s".parse().unwrap();
    let (t, g) = cluster(
        &client,
        "t",
        1,
        false,
        GroupConfig::default().rate_limit(Some(rate)),
    )
    .await;
    let mut conn = client.pool().acquire().await.unwrap();
    // A rate limit and two recorded deliveries.
    store
        .record_group_deliveries(&mut conn, g, 1, 2)
        .await
        .unwrap();
    store
        .record_group_deliveries(&mut conn, g, 2, 1)
        .await
        .unwrap();
    let (h, _) = store
        .create_group(&mut conn, t, "h", &GroupConfig::default())
        .await
        .unwrap();
    let h = h.id;
    store.set_cursors(&mut conn, h, &[(0, 0)]).await.unwrap();
    drop(conn);
    log_plain(&client, t, 0, 5).await;
    // In g: one acked, one retrying, one dead, one in flight (each but the last with its
    // history); in h: one in flight.
    let d = group_claim(&client, t, g, 4, LONG, "m").await;
    assert_eq!(d.len(), 4);
    assert!(group_ack(&client, g, &[d[0].receipt()]).await.is_empty());
    group_fail(&client, g, &d[1].receipt(), &|n| retry(n, LONG, "again"))
        .await
        .unwrap();
    group_fail(&client, g, &d[2].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    assert_eq!(group_claim(&client, t, h, 1, LONG, "m").await.len(), 1);
    // Positions and a member's dead letter (as a broadcast group's would be).
    let many: Vec<(i32, i64)> = (0..MANY as i32).map(|p| (p, 1)).collect();
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .save_positions(&mut conn, g, "m", &many)
        .await
        .unwrap();
    store
        .save_positions(&mut conn, h, "m", &[(0, 1)])
        .await
        .unwrap();
    for group_id in [g, h] {
        store
            .insert_member_dead(
                &mut conn,
                &MemberDeadRow {
                    group_id,
                    member: "m",
                    id: MessageId::new(),
                    partition: 0,
                    offset: 4,
                    attempts: 1,
                    errors: b"",
                },
            )
            .await
            .unwrap();
    }
    // A group of nothing has nothing to delete.
    assert_eq!(
        store
            .delete_group_rows(&mut conn, i32::MAX, 0)
            .await
            .unwrap(),
        Some(0)
    );
    drop(conn);

    // Rows deleted by each step, until a step deletes nothing.
    let mut steps = Vec::new();
    let mut step = 0;
    loop {
        let mut tx = client.begin().await.unwrap();
        let deleted = store.delete_group_rows(&mut tx, g, step).await.unwrap();
        tx.commit().await.unwrap();
        match deleted {
            None => break,
            Some(0) => step += 1,
            Some(n) => steps.push((step, n)),
        }
    }
    assert_eq!(
        steps,
        [
            (0, 1),    // member dead letters
            (1, 1),    // leases
            (2, 1),    // retries
            (3, 1),    // dead letters
            (4, 3),    // history
            (5, 1000), // positions
            (5, MANY as u64 - 1000),
            (6, 1), // cursors
            (7, 2), // deliveries counted for the rate limit
            (8, 1), // the rate limit
            (9, 1), // the group
        ]
    );
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        store.delete_group_rows(&mut conn, g, step).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .delete_group_rows(&mut conn, g, usize::MAX)
            .await
            .unwrap(),
        None
    );
    assert!(store.group_by_id(&mut conn, g).await.unwrap().is_none());
    assert!(store.group_by_id(&mut conn, h).await.unwrap().is_some());
    assert_eq!(store.cursors(&mut conn, h).await.unwrap(), [(0, 1)]);
    drop(conn);
    for (table, left) in [
        ("member_dead", 1),
        ("group_leases", 1),
        ("group_retries", 0),
        ("group_dead", 0),
        ("group_history", 0),
        ("group_positions", 1),
        ("group_cursors", 1),
        ("consumer_groups", 1),
    ] {
        assert_eq!(db.count(table).await, left, "{table}");
    }
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    create_find_and_list,
    huge_consume_timeouts_are_capped_not_wrapped,
    cursors_move_and_remember_the_furthest,
    delete_a_group_step_by_step,
]);
