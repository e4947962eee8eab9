//! `store/body/durable.rs`: journal rows written only under a held lease, and the
//! housekeeping's bounded look for journals whose message is gone.

use std::time::Duration;

use super::{SuiteBackend, fixture};
use crate::domain::{Message, MessageId};
use crate::store::NewStep;

fn step(seq: i32, name: &str) -> NewStep<'_> {
    NewStep {
        seq,
        name,
        kind: 0,
        state: 2,
        wake_in_us: None,
        result: Some(b"1"),
    }
}

/// A row goes in only while the receipt holds the lease; a second row at the same place
/// fails.
async fn steps_are_recorded_under_the_lease_once<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = client.create_queue("q", Default::default()).await.unwrap();
    q.send(Message::new("x")).await.unwrap();
    let d = q
        .receive(1, Duration::from_secs(60))
        .await
        .unwrap()
        .remove(0);
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let mut stale = d.receipt();
    stale.token += 1;
    assert!(
        !store
            .record_step(&mut conn, stale, &step(0, "a"))
            .await
            .unwrap()
    );
    assert!(
        store
            .record_step(&mut conn, d.receipt(), &step(0, "a"))
            .await
            .unwrap()
    );
    assert!(
        store
            .record_step(&mut conn, d.receipt(), &step(0, "b"))
            .await
            .is_err()
    );
    assert!(
        store
            .record_step(&mut conn, d.receipt(), &step(1, "a"))
            .await
            .is_err()
    );
    let rows = store.journal(&mut conn, d.id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].name.as_str(), rows[0].result.as_deref()),
        ("a", Some(&b"1"[..]))
    );
    drop(conn);
    db.drop().await;
}

/// The look pages through the journals in id order, a bounded page per call, forgetting
/// those whose message is gone and keeping the others, then starts over.
async fn gone_messages_journals_are_forgotten_a_page_at_a_time<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = client.create_queue("q", Default::default()).await.unwrap();
    let msgs: Vec<Message> = (0..5).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(msgs).await.unwrap();
    let got = q.receive(5, Duration::from_secs(60)).await.unwrap();
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    for d in &got {
        assert!(
            store
                .record_step(&mut conn, d.receipt(), &step(0, "a"))
                .await
                .unwrap()
        );
    }
    drop(conn);
    // Three acked without their journal; two still in flight.
    let mut ids: Vec<MessageId> = got.iter().map(|d| d.id).collect();
    ids.sort();
    for d in got.iter().filter(|d| ids[..3].contains(&d.id)) {
        q.ack(d.receipt()).await.unwrap();
    }
    let mut conn = client.pool().acquire().await.unwrap();
    let (_, forgotten, next) = store.prune_durable(&mut conn, None, 2).await.unwrap();
    assert_eq!((forgotten, next), (2, Some(ids[1])));
    let (_, forgotten, next) = store.prune_durable(&mut conn, next, 2).await.unwrap();
    assert_eq!((forgotten, next), (1, Some(ids[3])));
    let (_, forgotten, next) = store.prune_durable(&mut conn, next, 2).await.unwrap();
    assert_eq!(
        (forgotten, next),
        (0, None),
        "the last page, short: start over"
    );
    drop(conn);
    assert_eq!(db.count("run_steps").await, 2);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    steps_are_recorded_under_the_lease_once,
    gone_messages_journals_are_forgotten_a_page_at_a_time,
]);
