//! `store/body/probe.rs`: the idle worker's wakeup probes — one read telling which queues have work, one
//! telling which cluster groups do.

use std::collections::HashMap;
use std::time::Duration;

use super::{
    DEADLINE, LONG, SuiteBackend, claim, fixture, group_ack, group_fail, lease_at, log_plain,
    messages, offsets_at_publish, put, queue, retry,
};
use crate::Client;
use crate::domain::{GroupConfig, Message, MessageId, QueueConfig, TopicConfig};
use crate::store::rows::{GroupSignal, PendingBatch, PendingRow, QueueSignal};
use crate::store::statements::MAX_LIST;

/// The signals of `ids`, by queue (each queue answered once), their names left out (see
/// `names_say_what_holds_each_id`).
async fn probe<B: SuiteBackend>(client: &Client<B>, ids: &[i32]) -> HashMap<i32, QueueSignal> {
    let mut conn = client.reader().acquire().await.unwrap();
    let signals = client.store().probe(&mut conn, ids).await.unwrap();
    let by_queue: HashMap<i32, QueueSignal> = signals
        .iter()
        .map(|s| {
            let flags = QueueSignal {
                name: String::new(),
                ..s.clone()
            };
            (s.queue_id, flags)
        })
        .collect();
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
        name: String::new(),
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
        HashMap::from([(ids["ready"], expected[&ids["ready"]].clone())])
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

/// The signals of group `ids`, by group (each group answered once; on a reader), their names
/// left out.
async fn probe_groups<B: SuiteBackend>(
    client: &Client<B>,
    ids: &[i32],
) -> HashMap<i32, GroupSignal> {
    let mut conn = client.reader().acquire().await.unwrap();
    let signals = client.store().probe_groups(&mut conn, ids).await.unwrap();
    let by_group: HashMap<i32, GroupSignal> = signals
        .iter()
        .map(|s| {
            let flags = GroupSignal {
                topic: String::new(),
                group: String::new(),
                ..s.clone()
            };
            (s.group_id, flags)
        })
        .collect();
    assert_eq!(
        by_group.len(),
        signals.len(),
        "one signal per group: {signals:?}"
    );
    by_group
}

/// A group signal.
fn group_signal(group_id: i32, ready: bool, expired: bool, pending: bool) -> GroupSignal {
    GroupSignal {
        group_id,
        topic: String::new(),
        group: String::new(),
        ready,
        expired,
        pending,
    }
}

/// Topic `name` (strict order or not, one partition) through the store; its id.
async fn topic<B: SuiteBackend>(client: &Client<B>, name: &str, strict: bool) -> i32 {
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .upsert_topic(
            &mut conn,
            name,
            &TopicConfig::default().strict_order(strict),
        )
        .await
        .unwrap()
        .id
}

/// Group `name` of topic `t` with its cursor at `next`; its id.
async fn group<B: SuiteBackend>(client: &Client<B>, t: i32, name: &str, next: i64) -> i32 {
    let mut conn = client.pool().acquire().await.unwrap();
    let (row, _) = client
        .store()
        .create_group(&mut conn, t, name, &GroupConfig::default())
        .await
        .unwrap();
    client
        .store()
        .set_cursors(&mut conn, row.id, &[(0, next)])
        .await
        .unwrap();
    row.id
}

/// Each flag says what its group has: records to hand out (a cursor behind its partition's
/// end — with strict order, only where nothing is in flight or waiting — or a due retry),
/// expired leases, and, where offsets come after publishing, records waiting for theirs;
/// consumed partitions, retries not due and live leases say nothing.
async fn the_group_flags<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (plain, strict) = (
        topic(&client, "plain", false).await,
        topic(&client, "strict", true).await,
    );
    log_plain(&client, plain, 0, 2).await;
    log_plain(&client, strict, 0, 2).await;
    let mut ids = HashMap::new();
    for (name, t, next) in [
        ("idle", plain, 2),
        ("ready", plain, 1),
        ("due", plain, 2),
        ("later", plain, 2),
        ("expired", plain, 2),
        ("live", plain, 2),
        ("loose", plain, 1),
        ("strict", strict, 1),
        ("strict waiting", strict, 1),
        ("strict free", strict, 1),
    ] {
        ids.insert(name, group(&client, t, name, next).await);
    }
    // Heads: in flight for "loose", "strict" and "live"; waiting for "strict waiting" and
    // "later"; due for "due"; acked for "strict free"; expired for "expired".
    let head = |name: &'static str, t: i32, lease: Duration| {
        let client = client.clone();
        let g = ids[name];
        async move {
            lease_at(&client, (t, g), &[(0, 0)], lease, "m")
                .await
                .remove(0)
        }
    };
    for (name, t) in [("loose", plain), ("strict", strict), ("live", plain)] {
        head(name, t, LONG).await;
    }
    for (name, t, wait) in [
        ("strict waiting", strict, LONG),
        ("later", plain, LONG),
        ("due", plain, Duration::ZERO),
    ] {
        let d = head(name, t, LONG).await;
        group_fail(&client, ids[name], &d.receipt(), &|n| retry(n, wait, "x"))
            .await
            .unwrap();
    }
    let d = head("strict free", strict, LONG).await;
    assert!(
        group_ack(&client, ids["strict free"], &[d.receipt()])
            .await
            .is_empty()
    );
    head("expired", plain, Duration::from_millis(1)).await;

    let all: Vec<i32> = ids.values().copied().collect();
    let expected: HashMap<i32, GroupSignal> = [
        ("idle", false, false),
        ("ready", true, false),
        ("due", true, false),
        ("later", false, false),
        ("expired", false, true),
        ("live", false, false),
        ("loose", true, false),
        ("strict", false, false),
        ("strict waiting", false, false),
        ("strict free", true, false),
    ]
    .into_iter()
    .map(|(name, ready, expired)| (ids[name], group_signal(ids[name], ready, expired, false)))
    .collect();
    let (client, all) = (&client, &all);
    let expired = ids["expired"];
    let got = sqlmq_testkit::eventually_async(DEADLINE, "the expired flag", || async move {
        let got = probe_groups(client, all).await;
        got[&expired].expired.then_some(got)
    })
    .await;
    assert_eq!(got, expected);
    // A repeated id, and ids of nothing: answered once, and not at all.
    let asked = [ids["ready"], ids["ready"], i32::MAX, -1];
    assert_eq!(
        probe_groups(client, &asked).await,
        HashMap::from([(ids["ready"], expected[&ids["ready"]].clone())])
    );

    // A record published, not sequenced yet where offsets come later: pending, nothing to
    // hand out yet; where offsets come at publish, at once to hand out.
    let body = b"p";
    let row = PendingRow {
        partition: 0,
        id: MessageId::new(),
        key: None,
        headers: None,
        body,
    };
    let mut tx = client.begin().await.unwrap();
    <B as crate::store::Publish>::insert_pending(
        client.store(),
        &mut tx,
        &PendingBatch {
            topic_id: plain,
            rows: std::slice::from_ref(&row),
        },
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let idle = ids["idle"];
    let pending = !offsets_at_publish::<B>();
    assert_eq!(
        probe_groups(client, &[idle]).await[&idle],
        group_signal(idle, !pending, false, pending)
    );
    db.drop().await;
}

/// The largest group probe: 1 024 groups at once, each answered.
async fn the_largest_group_probe<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let t = topic(&client, "t", false).await;
    log_plain(&client, t, 0, 1).await;
    let mut tx = client.begin().await.unwrap();
    let mut ids = Vec::with_capacity(MAX_LIST);
    for i in 0..MAX_LIST {
        let (row, _) = client
            .store()
            .create_group(&mut tx, t, &format!("g{i}"), &GroupConfig::default())
            .await
            .unwrap();
        ids.push(row.id);
    }
    let targets: Vec<(i32, i64)> = vec![(0, 1)];
    for &g in &ids[..MAX_LIST - 1] {
        client
            .store()
            .set_cursors(&mut tx, g, &targets)
            .await
            .unwrap();
    }
    let last = ids[MAX_LIST - 1];
    client
        .store()
        .set_cursors(&mut tx, last, &[(0, 0)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let got = probe_groups(&client, &ids).await;
    assert_eq!(got.len(), MAX_LIST);
    let ready: Vec<i32> = got
        .values()
        .filter(|s| s.ready)
        .map(|s| s.group_id)
        .collect();
    assert_eq!(ready, [last]);
    assert!(got.values().all(|s| !s.expired && !s.pending));
    let mut mixed: Vec<i32> = (0..MAX_LIST as i32 - 1).map(|i| -i - 1).collect();
    mixed.push(last);
    assert_eq!(
        probe_groups(&client, &mixed).await,
        HashMap::from([(last, group_signal(last, true, false, false))])
    );
    db.drop().await;
}

/// Each signal names what holds its id now: the queue, or the group and its topic (a worker
/// whose source's name differs holds an id that went to another).
async fn names_say_what_holds_each_id<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (a, b) = (queue(&client, "a").await, queue(&client, "b").await);
    let mut conn = client.reader().acquire().await.unwrap();
    let mut names: Vec<(i32, String)> = (client.store().probe(&mut conn, &[a, b]).await)
        .unwrap()
        .into_iter()
        .map(|s| (s.queue_id, s.name))
        .collect();
    names.sort();
    assert_eq!(names, [(a, "a".to_owned()), (b, "b".to_owned())]);
    drop(conn);
    let t = topic(&client, "t", false).await;
    let g = group(&client, t, "g", 0).await;
    let mut conn = client.reader().acquire().await.unwrap();
    let signals = client.store().probe_groups(&mut conn, &[g]).await.unwrap();
    let named: Vec<(i32, &str, &str)> = signals
        .iter()
        .map(|s| (s.group_id, s.topic.as_str(), s.group.as_str()))
        .collect();
    assert_eq!(named, [(g, "t", "g")]);
    drop(conn);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    names_say_what_holds_each_id,
    nothing_for_nothing,
    the_flags,
    the_largest_probe,
    the_group_flags,
    the_largest_group_probe,
]);
