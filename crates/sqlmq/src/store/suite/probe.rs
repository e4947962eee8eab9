//! `Probe`: the idle worker's wakeup probe — one read telling which queues have work.
//! (`probe_groups` is covered for its edge lists only: the consumer groups are being
//! rewritten.)

use std::collections::HashMap;
use std::time::Duration;

use super::{DEADLINE, LONG, SuiteBackend, claim, fixture, messages, put, queue};
use crate::Client;
use crate::domain::{Message, QueueConfig};
use crate::store::rows::QueueSignal;
use crate::store::statements::MAX_LIST;
use crate::store::{Probe, Queues};

/// The signals of `ids`, by queue (each queue answered once).
async fn probe<B: SuiteBackend>(client: &Client<B>, ids: &[i32]) -> HashMap<i32, QueueSignal> {
    let mut conn = client.reader().acquire().await.unwrap();
    let signals = client.store().probe(&mut conn, ids).await.unwrap();
    let by_queue: HashMap<i32, QueueSignal> = signals.iter().map(|s| (s.queue_id, *s)).collect();
    assert_eq!(
        by_queue.len(),
        signals.len(),
        "one signal per queue: {signals:?}"
    );
    by_queue
}

/// A signal.
fn signal(queue_id: i32, ready: bool, due: bool, expired: bool) -> QueueSignal {
    QueueSignal {
        queue_id,
        ready,
        due,
        expired,
    }
}

/// Empty lists, and ids of nothing, are answered with nothing.
async fn nothing_for_nothing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let mut conn = client.reader().acquire().await.unwrap();
    let store = client.store();
    assert!(store.probe(&mut conn, &[]).await.unwrap().is_empty());
    assert!(
        store
            .probe(&mut conn, &[q + 1, i32::MAX, -1])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.probe_groups(&mut conn, &[]).await.unwrap().is_empty());
    assert!(
        store
            .probe_groups(&mut conn, &[1, i32::MAX])
            .await
            .unwrap()
            .is_empty()
    );
    drop(conn);
    db.drop().await;
}

/// Each flag says what its queue has: claimable messages (not when paused), delayed messages
/// that are due (paused or not), ended leases; future messages and live leases say nothing.
async fn the_flags<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let mut ids = HashMap::new();
    for name in [
        "ready", "paused", "due", "later", "expired", "live", "empty",
    ] {
        ids.insert(name, queue(&client, name).await);
    }
    let soon = || Message::new("soon").delay(Duration::from_millis(1));
    put(&client, ids["ready"], &messages("r", 2)).await;
    put(&client, ids["paused"], &[Message::new("p"), soon()]).await;
    put(&client, ids["due"], &[soon()]).await;
    put(&client, ids["later"], &[Message::new("l").delay(LONG)]).await;
    put(&client, ids["expired"], &messages("e", 1)).await;
    put(&client, ids["live"], &messages("l", 1)).await;
    claim(&client, ids["expired"], 1, Duration::from_millis(1)).await;
    claim(&client, ids["live"], 1, Duration::MAX).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        client
            .store()
            .set_paused(&mut conn, "paused", true)
            .await
            .unwrap()
    );
    drop(conn);

    let all: Vec<i32> = ids.values().copied().collect();
    let expected = HashMap::from([
        (ids["ready"], signal(ids["ready"], true, false, false)),
        (ids["paused"], signal(ids["paused"], false, true, false)),
        (ids["due"], signal(ids["due"], false, true, false)),
        (ids["later"], signal(ids["later"], false, false, false)),
        (ids["expired"], signal(ids["expired"], false, false, true)),
        (ids["live"], signal(ids["live"], false, false, false)),
        (ids["empty"], signal(ids["empty"], false, false, false)),
    ]);
    let (client, all) = (&client, &all);
    let (paused, due, expired) = (ids["paused"], ids["due"], ids["expired"]);
    let got = sqlmq_testkit::eventually_async(DEADLINE, "the due and ended flags", || async move {
        let got = probe(client, all).await;
        (got[&paused].due && got[&due].due && got[&expired].expired).then_some(got)
    })
    .await;
    assert_eq!(got, expected);
    // A repeated id, and an id of nothing: answered once, and not at all.
    let asked = [ids["ready"], ids["ready"], i32::MAX];
    assert_eq!(
        probe(client, &asked).await,
        HashMap::from([(ids["ready"], expected[&ids["ready"]])])
    );
    db.drop().await;
}

/// The largest probe: 1 024 queues at once, each answered.
async fn the_largest_probe<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let mut tx = client.begin().await.unwrap();
    let mut ids = Vec::with_capacity(MAX_LIST);
    for i in 0..MAX_LIST {
        let row = client
            .store()
            .upsert_queue(&mut tx, &format!("q{i}"), &QueueConfig::default())
            .await
            .unwrap();
        ids.push(row.id);
    }
    tx.commit().await.unwrap();
    let last = ids[MAX_LIST - 1];
    put(&client, last, &messages("m", 1)).await;
    let got = probe(&client, &ids).await;
    assert_eq!(got.len(), MAX_LIST);
    let ready: Vec<i32> = got
        .values()
        .filter(|s| s.ready)
        .map(|s| s.queue_id)
        .collect();
    assert_eq!(ready, [last]);
    assert!(got.values().all(|s| !s.due && !s.expired));
    // Mostly ids of nothing.
    let mut mixed: Vec<i32> = (0..MAX_LIST as i32 - 1).map(|i| -i - 1).collect();
    mixed.push(last);
    assert_eq!(
        probe(&client, &mixed).await,
        HashMap::from([(last, signal(last, true, false, false))])
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [nothing_for_nothing, the_flags, the_largest_probe]);
