//! `store/body/queues.rs`: queue rows — create and update, find, list, pause, delete.

use std::time::Duration;

use super::{SuiteBackend, fixture};
use crate::domain::{Backoff, MAX_NAME_LEN, QueueConfig};

/// A configuration far from the default, at the edges the engine accepts.
fn edge_config() -> QueueConfig {
    QueueConfig::default()
        .max_attempts(1_000_000)
        .backoff(Backoff::Ladder(vec![
            Duration::from_millis(1),
            Duration::from_secs(10),
            Duration::from_secs(7 * 24 * 3600),
        ]))
        .dedup_window(Duration::from_secs(365 * 24 * 3600))
}

/// A new queue is stored with its configuration; a second upsert of the name updates the
/// configuration of the same row and leaves its paused flag alone.
async fn upsert_creates_then_updates<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let created = store
        .upsert_queue(&mut conn, "q", &QueueConfig::default())
        .await
        .unwrap();
    assert_eq!(created.name, "q");
    assert!(!created.paused);
    assert_eq!(created.config, QueueConfig::default());

    assert!(store.set_paused(&mut conn, "q", true).await.unwrap());
    let updated = store
        .upsert_queue(&mut conn, "q", &edge_config())
        .await
        .unwrap();
    assert_eq!(updated.id, created.id);
    assert_eq!(updated.config, edge_config());
    assert!(updated.paused, "an upsert keeps the paused flag");
    assert_eq!(store.all_queues(&mut conn).await.unwrap().len(), 1);

    // The longest name, and a configuration of one attempt.
    let long = "n".repeat(MAX_NAME_LEN);
    let one = QueueConfig::default().max_attempts(1);
    let row = store.upsert_queue(&mut conn, &long, &one).await.unwrap();
    assert_eq!(
        (row.name.as_str(), row.config.max_attempts),
        (long.as_str(), 1)
    );
    assert_ne!(row.id, created.id);
    drop(conn);
    assert_eq!(db.count("queues").await, 2);
    db.drop().await;
}

/// Queues are found by name and id, and not found by names and ids that do not exist; all
/// of them are listed by name.
async fn find_and_list<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(store.all_queues(&mut conn).await.unwrap().is_empty());
    let mut made = Vec::new();
    for name in ["b", "c", "a"] {
        made.push(
            store
                .upsert_queue(&mut conn, name, &edge_config())
                .await
                .unwrap(),
        );
    }
    for q in &made {
        let by_name = store
            .queue_by_name(&mut conn, &q.name)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((by_name.id, by_name.config.clone()), (q.id, edge_config()));
        let by_id = store.queue_by_id(&mut conn, q.id).await.unwrap().unwrap();
        assert_eq!(by_id.name, q.name);
    }
    assert!(store.queue_by_name(&mut conn, "x").await.unwrap().is_none());
    // Names are exact: no case folding.
    assert!(store.queue_by_name(&mut conn, "A").await.unwrap().is_none());
    for id in [0, -1, i32::MAX, i32::MIN] {
        assert!(store.queue_by_id(&mut conn, id).await.unwrap().is_none());
    }
    let names: Vec<String> = store
        .all_queues(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    drop(conn);
    db.drop().await;
}

/// Pausing and resuming say whether the queue exists, and the flag is what was set last
/// (setting it twice is no error and still answers true).
async fn pause_and_resume<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let q = store
        .upsert_queue(&mut conn, "q", &QueueConfig::default())
        .await
        .unwrap();
    let other = store
        .upsert_queue(&mut conn, "other", &QueueConfig::default())
        .await
        .unwrap();
    for paused in [true, true, false, false, true] {
        assert!(store.set_paused(&mut conn, "q", paused).await.unwrap());
        let row = store.queue_by_id(&mut conn, q.id).await.unwrap().unwrap();
        assert_eq!(row.paused, paused);
    }
    let row = store
        .queue_by_id(&mut conn, other.id)
        .await
        .unwrap()
        .unwrap();
    assert!(!row.paused, "only the named queue");
    assert!(!store.set_paused(&mut conn, "missing", true).await.unwrap());
    assert!(!store.set_paused(&mut conn, "missing", false).await.unwrap());
    drop(conn);
    db.drop().await;
}

/// Deleting a queue row removes that row only; deleting an id that does not exist is no
/// error.
async fn delete_queue_row<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let mut conn = client.pool().acquire().await.unwrap();
    let a = store
        .upsert_queue(&mut conn, "a", &QueueConfig::default())
        .await
        .unwrap();
    let b = store
        .upsert_queue(&mut conn, "b", &QueueConfig::default())
        .await
        .unwrap();
    store.delete_queue_row(&mut conn, a.id).await.unwrap();
    assert!(store.queue_by_id(&mut conn, a.id).await.unwrap().is_none());
    assert!(store.queue_by_name(&mut conn, "a").await.unwrap().is_none());
    assert!(store.queue_by_id(&mut conn, b.id).await.unwrap().is_some());
    store.delete_queue_row(&mut conn, a.id).await.unwrap();
    store.delete_queue_row(&mut conn, i32::MAX).await.unwrap();
    // The name is free again, for a new row.
    let again = store
        .upsert_queue(&mut conn, "a", &QueueConfig::default())
        .await
        .unwrap();
    assert_ne!(again.id, b.id);
    drop(conn);
    assert_eq!(db.count("queues").await, 2);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    upsert_creates_then_updates,
    find_and_list,
    pause_and_resume,
    delete_queue_row,
]);
