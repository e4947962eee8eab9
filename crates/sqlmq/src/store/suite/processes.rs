//! `store/body/processes.rs`: registration, heartbeats, finding the dead.

use std::time::Duration;

use super::{SuiteBackend, fixture};
use crate::store::rows::ProcessRegistration;

fn registration<'a>(id: &'a str, silence: Duration) -> ProcessRegistration<'a> {
    ProcessRegistration {
        id,
        kind: "worker",
        host: "host",
        pid: 42,
        queue_ids: &[1, 2],
        silence,
    }
}

/// A process is listed with what it registered; a heartbeat keeps it alive; a deregistered one
/// is gone, and its heartbeat says so.
async fn register_heartbeat_deregister<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .register_process(&mut conn, &registration("a", Duration::from_secs(60)))
        .await
        .unwrap();
    let all = store.processes(&mut conn).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].id.as_str(), all[0].pid), ("a", 42));
    assert_eq!(all[0].queue_ids, [1, 2]);
    assert!(all[0].silent_for < Duration::from_secs(60));
    assert!(
        store
            .heartbeat(&mut conn, "a", Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(store.dead_processes(&mut conn).await.unwrap().is_empty());
    store.deregister_process(&mut conn, "a").await.unwrap();
    assert!(
        !store
            .heartbeat(&mut conn, "a", Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(store.processes(&mut conn).await.unwrap().is_empty());
    drop(conn);
    db.drop().await;
}

/// The one cap on durations given to the database's date arithmetic: a process that allows
/// itself any silence, up to `Duration::MAX`, registers and heartbeats, and is never taken
/// for dead. (MySQL converted the silence with a bare `as i64`, which wrapped, and gave the
/// server a date past its range.)
async fn huge_silences_are_capped_not_wrapped<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    for (id, silence) in [
        ("year", Duration::from_secs(366 * 24 * 3600)),
        (
            "ten thousand years",
            Duration::from_secs(10_000 * 366 * 24 * 3600),
        ),
        ("max", Duration::MAX),
    ] {
        store
            .register_process(&mut conn, &registration(id, silence))
            .await
            .unwrap_or_else(|e| panic!("register {id}: {e}"));
        assert!(
            store.heartbeat(&mut conn, id, silence).await.unwrap(),
            "heartbeat {id}"
        );
    }
    assert!(store.dead_processes(&mut conn).await.unwrap().is_empty());
    assert!(!store.prune_process(&mut conn, "max").await.unwrap());
    drop(conn);
    db.drop().await;
}

/// A silent process is listed as dead, and exactly one of two reapers removes it.
async fn a_silent_process_is_pruned_once<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .register_process(&mut conn, &registration("gone", Duration::from_millis(1)))
        .await
        .unwrap();
    sqlmq_testkit::eventually_async(Duration::from_secs(5), "silent", || {
        let client = client.clone();
        async move {
            // A reader: on SQLite the one writer connection is the test's.
            let mut conn = client.reader().acquire().await.unwrap();
            let dead = client.store().dead_processes(&mut conn).await.unwrap();
            (dead.len() == 1).then_some(dead)
        }
    })
    .await;
    assert!(store.prune_process(&mut conn, "gone").await.unwrap());
    assert!(!store.prune_process(&mut conn, "gone").await.unwrap());
    drop(conn);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    register_heartbeat_deregister,
    huge_silences_are_capped_not_wrapped,
    a_silent_process_is_pruned_once,
]);
