//! `store/body/member_dead.rs`: broadcast members' dead letters — recorded (a repeat replaces), listed with
//! their records, per record, and deleted.

use std::collections::BTreeMap;

use super::{SuiteBackend, fixture, now_us, wait_past};
use crate::Client;
use crate::domain::{AttemptError, DeadLetter, MessageId, TopicConfig, encode_errors};
use crate::store::rows::{MemberDeadRow, PendingBatch, PendingRow, RangeRemoval};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// The group whose members' dead letters the scenarios record, and another one (member dead
/// letters name a group by id only).
const GROUP: i32 = 7;
const OTHER: i32 = 8;

/// A topic of one partition with two sequenced records: offset 0 (key "k", a header, body
/// "zero") and offset 1; the topic id and the records' ids.
async fn topic_with_two<B: SuiteBackend>(client: &Client<B>) -> (i32, [MessageId; 2]) {
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let t = store
        .upsert_topic(&mut conn, "t", &TopicConfig::default())
        .await
        .unwrap()
        .id;
    drop(conn);
    let ids = [MessageId::new(), MessageId::new()];
    let rows = [
        PendingRow {
            partition: 0,
            id: ids[0],
            key: Some(b"k"),
            headers: Some("{\"h\":\"v\"}".to_owned()),
            body: b"zero",
        },
        PendingRow {
            partition: 0,
            id: ids[1],
            key: None,
            headers: None,
            body: b"one",
        },
    ];
    let mut tx = client.begin().await.unwrap();
    let batch = PendingBatch {
        topic_id: t,
        rows: &rows,
    };
    <B as crate::store::Publish>::insert_pending(store, &mut tx, &batch)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = client.begin().await.unwrap();
    <B as crate::store::Publish>::sequence_step(store, &mut tx, t, &[0], 10)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    (t, ids)
}

/// An error history of one entry.
fn history(error: &str) -> Vec<u8> {
    encode_errors(&[AttemptError {
        attempt: 1,
        at: "2026-01-01T00:00:00.000Z".to_owned(),
        error: error.to_owned(),
    }])
}

/// Record a member's dead letter.
async fn insert<B: SuiteBackend>(
    client: &Client<B>,
    group_id: i32,
    member: &str,
    (id, offset): (MessageId, i64),
    attempts: i32,
    errors: &[u8],
) {
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .insert_member_dead(
            &mut conn,
            &MemberDeadRow {
                group_id,
                member,
                id,
                partition: 0,
                offset,
                attempts,
                errors,
            },
        )
        .await
        .unwrap();
}

/// The member dead letters of `GROUP` (of `member`, or all), up to `limit`.
async fn list<B: SuiteBackend>(
    client: &Client<B>,
    topic_id: i32,
    member: Option<&str>,
    limit: usize,
) -> Vec<DeadLetter> {
    let mut conn = client.reader().acquire().await.unwrap();
    client
        .store()
        .member_dead_letters(&mut conn, topic_id, GROUP, member, limit)
        .await
        .unwrap()
}

/// `(member, id)` of each dead letter.
fn who(letters: &[DeadLetter]) -> Vec<(String, MessageId)> {
    letters
        .iter()
        .map(|d| (d.member.clone().unwrap_or_default(), d.id))
        .collect()
}

/// Wait for the database clock to move on (dead letters are ordered by when they died).
async fn tick<B: SuiteBackend>(client: &Client<B>) {
    let now = now_us(client).await;
    wait_past(client, now + 2_000).await;
}

/// Members' dead letters are listed oldest first, of one member or all, with their records,
/// attempts and error histories; a repeat replaces the earlier one; a record retention
/// removed is listed without its body.
async fn record_and_list<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, [r0, r1]) = topic_with_two(&client).await;
    assert!(list(&client, t, None, 10).await.is_empty());
    insert(&client, GROUP, "a", (r0, 0), 3, &history("boom")).await;
    tick(&client).await;
    insert(&client, GROUP, "b", (r0, 0), 4, &history("bang")).await;
    tick(&client).await;
    insert(&client, GROUP, "a", (r1, 1), 1, b"").await;
    insert(&client, OTHER, "a", (r0, 0), 1, b"").await;

    let all = list(&client, t, None, 10).await;
    assert_eq!(
        who(&all),
        [("a".into(), r0), ("b".into(), r0), ("a".into(), r1)]
    );
    let d = &all[0];
    assert_eq!((d.partition, d.offset, d.attempts), (Some(0), Some(0), 3));
    assert_eq!(
        (d.body.as_slice(), d.ordering_key.as_deref()),
        (&b"zero"[..], Some("k"))
    );
    assert_eq!(d.headers, BTreeMap::from([("h".into(), "v".into())]));
    assert_eq!(d.errors.len(), 1);
    assert_eq!(
        (d.errors[0].attempt, d.errors[0].error.as_str()),
        (1, "boom")
    );
    assert!(d.enqueued_at <= d.died_at);
    assert_eq!(all[1].errors[0].error, "bang");
    assert!(all[2].errors.is_empty());
    assert_eq!(all[2].offset, Some(1));

    assert_eq!(
        who(&list(&client, t, Some("a"), 10).await),
        [("a".into(), r0), ("a".into(), r1)]
    );
    assert_eq!(who(&list(&client, t, None, 1).await), [("a".into(), r0)]);
    assert!(list(&client, t, None, 0).await.is_empty());
    assert!(list(&client, t, Some("nobody"), 10).await.is_empty());

    // A repeat replaces: one row, its new attempts, errors and time.
    tick(&client).await;
    insert(&client, GROUP, "a", (r0, 0), 9, &history("again")).await;
    let all = list(&client, t, None, 10).await;
    assert_eq!(
        who(&all),
        [("b".into(), r0), ("a".into(), r1), ("a".into(), r0)]
    );
    assert_eq!(
        (all[2].attempts, all[2].errors[0].error.as_str()),
        (9, "again")
    );
    assert_eq!(db.count("member_dead").await, 4);

    // Retention removed the record: listed without it.
    let mut tx = client.begin().await.unwrap();
    let range = RangeRemoval {
        topic_id: t,
        partition: 0,
        from: 0,
        to: 1,
        group_ids: &[],
    };
    client.store().remove_range(&mut tx, &range).await.unwrap();
    tx.commit().await.unwrap();
    let all = list(&client, t, Some("b"), 10).await;
    assert_eq!(who(&all), [("b".into(), r0)]);
    let d = &all[0];
    assert!(d.body.is_empty() && d.headers.is_empty() && d.ordering_key.is_none());
    assert_eq!(d.enqueued_at, d.died_at);
    assert_eq!((d.offset, d.attempts), (Some(0), 4));
    db.drop().await;
}

/// The members for which a record is a dead letter, by member, with their attempts and times.
async fn deaths_of_a_record<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (_, [r0, r1]) = topic_with_two(&client).await;
    let before = now_us(&client).await;
    insert(&client, GROUP, "b", (r0, 0), 4, b"").await;
    insert(&client, GROUP, "a", (r0, 0), 3, b"").await;
    insert(&client, OTHER, "c", (r0, 0), 1, b"").await;
    let after = now_us(&client).await;
    let mut conn = client.reader().acquire().await.unwrap();
    let store = client.store();
    let deaths = store.member_deaths(&mut conn, GROUP, r0).await.unwrap();
    let seen: Vec<(&str, i32)> = deaths
        .iter()
        .map(|d| (d.member.as_str(), d.attempts))
        .collect();
    assert_eq!(seen, [("a", 3), ("b", 4)]);
    for d in &deaths {
        assert!(d.died_us >= before - 1_000 && d.died_us <= after + 1_000);
    }
    assert!(
        store
            .member_deaths(&mut conn, GROUP, r1)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .member_deaths(&mut conn, GROUP, MessageId::new())
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    db.drop().await;
}

/// Deleting member dead letters: by member and ids, by ids for every member, all of a member,
/// all of the group; an empty id list and unknown ids delete nothing; other groups keep theirs.
async fn delete_member_dead_letters<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (_, [r0, r1]) = topic_with_two(&client).await;
    for member in ["a", "b", "c"] {
        insert(&client, GROUP, member, (r0, 0), 1, b"").await;
        insert(&client, GROUP, member, (r1, 1), 1, b"").await;
    }
    insert(&client, OTHER, "a", (r0, 0), 1, b"").await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let unknown = MessageId::new();
    for (member, ids, deleted) in [
        (Some("a"), Some(&[][..]), 0),
        (Some("a"), Some(&[unknown][..]), 0),
        (Some("a"), Some(&[r0][..]), 1),
        (None, Some(&[r1, unknown][..]), 3),
        (Some("nobody"), None, 0),
        (Some("b"), None, 1),
        (None, None, 1),
        (None, None, 0),
    ] {
        assert_eq!(
            store
                .delete_member_dead(&mut conn, GROUP, member, ids)
                .await
                .unwrap(),
            deleted,
            "{member:?} {ids:?}"
        );
    }
    drop(conn);
    assert_eq!(db.count("member_dead").await, 1, "the other group's");
    db.drop().await;
}

/// More ids than one statement's list, deleted at once.
async fn delete_many<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (_, [r0, _]) = topic_with_two(&client).await;
    let ids: Vec<MessageId> = (0..MANY).map(|_| MessageId::new()).collect();
    for id in &ids {
        insert(&client, GROUP, "m", (*id, 0), 1, b"").await;
    }
    insert(&client, GROUP, "m", (r0, 0), 1, b"").await;
    let mut conn = client.pool().acquire().await.unwrap();
    let deleted = client
        .store()
        .delete_member_dead(&mut conn, GROUP, Some("m"), Some(&ids))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(deleted, MANY as u64);
    assert_eq!(db.count("member_dead").await, 1);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    record_and_list,
    deaths_of_a_record,
    delete_member_dead_letters,
    delete_many,
]);
