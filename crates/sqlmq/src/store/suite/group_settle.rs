//! `store/body/group_settle.rs`: ack (in the caller's transaction and in one of its own), the resolver of an
//! unknown COMMIT, fail on the retry ladder, extend, the releases of expired and owned leases,
//! and the history each settlement appends to (the last `GROUP_EVENTS_KEPT` events kept).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    LONG, MAX_DATE_SPAN, SuiteBackend, bury, cluster, fixture, group_ack, group_claim, group_fail,
    log_plain, micros, now_us, receipts, retry, rows_of, snooze, wait_past,
};
use crate::Client;
use crate::domain::{
    Decide, Delivery, DeliveryEvent, Error, GROUP_EVENTS_KEPT, GroupConfig, MessageId, NackOutcome,
    Receipt, Released, Settlement, json_time_of,
};
use crate::store::rows::{HistoryState, RecordRows};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// A lease that is over almost at once.
const BRIEF: Duration = Duration::from_millis(1);

/// Longest error text an event keeps, in bytes (the store body's `MAX_ERROR_BYTES`, private to
/// its module).
const MAX_ERROR_BYTES: usize = 4096;

/// Wait until every lease of `deliveries` has ended.
async fn wait_ended<B: SuiteBackend>(client: &Client<B>, deliveries: &[Delivery]) {
    let last = deliveries
        .iter()
        .map(|d| micros(d.lease_expires_at))
        .max()
        .unwrap();
    wait_past(client, last).await;
}

/// The receipt of `d` with another token.
fn with_token(d: &Delivery, token: u64) -> Receipt {
    Receipt { id: d.id, token }
}

/// Leases of the group in flight (all groups).
async fn leases<B: SuiteBackend>(db: &sqlmq_testkit::TestDb<B>) -> i64 {
    db.count("group_leases").await
}

/// The history of `rows`: `(state, attempts, outcomes)`.
fn story(rows: &RecordRows) -> (HistoryState, i32, Vec<String>) {
    let (state, attempts, events, _) = rows.history.as_ref().expect("a history row");
    let outcomes = events.iter().map(|e| e.outcome.clone()).collect();
    (*state, *attempts, outcomes)
}

/// An event as a settlement records it.
fn event(
    attempt: u32,
    member: &str,
    (claimed_us, settled_us): (i64, i64),
    outcome: &str,
    error: Option<&str>,
) -> DeliveryEvent {
    DeliveryEvent {
        attempt,
        member: Some(member.to_owned()),
        delivered_at: json_time_of(claimed_us),
        at: json_time_of(settled_us),
        outcome: outcome.to_owned(),
        error: error.map(str::to_owned),
    }
}

/// An ack of good, stale, unknown, foreign and repeated receipts acks the good ones and
/// returns exactly the others, in order; each acked record's lease goes and its history says
/// it was acked, by whom and when; an empty ack does nothing.
async fn ack_returns_exactly_the_lost<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 4).await;
    log_plain(&client, o, 0, 1).await;
    let d = group_claim(&client, t, g, 4, LONG, "m").await;
    let foreign = group_claim(&client, o, h, 1, LONG, "m").await.remove(0);
    let claimed_us = rows_of(&client, g, &d[0]).await.lease.unwrap().3;
    assert!(group_ack(&client, g, &[]).await.is_empty());

    let stale = with_token(&d[1], d[1].token + 1);
    let older = with_token(&d[2], 0);
    let unknown = Receipt {
        id: MessageId::new(),
        token: 1,
    };
    let sent = [
        d[0].receipt(),
        stale,
        unknown,
        d[3].receipt(),
        older,
        foreign.receipt(),
        d[0].receipt(),
    ];
    let lost = group_ack(&client, g, &sent).await;
    assert_eq!(
        lost,
        [stale, unknown, older, foreign.receipt(), d[0].receipt()]
    );
    assert_eq!(leases(&db).await, 3, "d[1], d[2] and the foreign one");
    for acked in [&d[0], &d[3]] {
        let rows = rows_of(&client, g, acked).await;
        assert!(rows.lease.is_none() && rows.retry.is_none() && rows.dead.is_none());
        let (state, attempts, events, settled_us) = rows.history.unwrap();
        assert_eq!((state, attempts), (HistoryState::Acked, 1));
        assert_eq!(
            events,
            [event(1, "m", (claimed_us, settled_us), "acked", None)]
        );
    }
    assert!(rows_of(&client, g, &d[1]).await.history.is_none());
    assert!(rows_of(&client, h, &foreign).await.lease.is_some());
    // Acked receipts are lost the second time.
    assert_eq!(
        group_ack(&client, g, &[d[3].receipt()]).await,
        [d[3].receipt()]
    );
    assert_eq!(db.count("group_history").await, 2);
    db.drop().await;
}

/// A receipt whose lease ended holds nothing: the ack (in any transaction) returns it, fail
/// says `LeaseLost` without asking the decision, extend says false; the lease stays for the
/// release, with no history.
async fn an_ended_lease_settles_nothing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 1).await;
    let d = group_claim(&client, t, g, 1, BRIEF, "m").await.remove(0);
    wait_ended(&client, std::slice::from_ref(&d)).await;
    assert_eq!(group_ack(&client, g, &[d.receipt()]).await, [d.receipt()]);
    let own = Mutex::new(vec![d.receipt()]);
    let mut conn = client.pool().acquire().await.unwrap();
    let lost = store
        .ack_group_own(&mut conn, g, &[d.receipt()], &own, "suite.group_ack_own")
        .await
        .unwrap();
    assert_eq!(lost, [d.receipt()]);
    assert!(own.lock().unwrap().is_empty());
    assert!(
        !store
            .extend_group(&mut conn, g, &d.receipt(), LONG)
            .await
            .unwrap()
    );
    drop(conn);
    let asked = AtomicBool::new(false);
    let decide = |n| {
        asked.store(true, Ordering::SeqCst);
        retry(n, Duration::ZERO, "x")
    };
    match group_fail(&client, g, &d.receipt(), &decide).await {
        Err(Error::LeaseLost { id, token }) => assert_eq!((id, token), (d.id, d.token)),
        other => panic!("{other:?}"),
    }
    assert!(!asked.load(Ordering::SeqCst));
    assert_eq!(leases(&db).await, 1);
    assert_eq!(db.count("group_history").await, 0);
    db.drop().await;
}

/// The ack in a transaction of its own returns the lost receipts and puts the acked ones (only
/// those) in its `Mutex`; it committed.
async fn ack_in_own_transaction<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 3).await;
    let d = group_claim(&client, t, g, 3, LONG, "m").await;
    let unknown = Receipt {
        id: MessageId::new(),
        token: 7,
    };
    let mut conn = client.pool().acquire().await.unwrap();
    let none = Mutex::new(vec![unknown]);
    let lost = store
        .ack_group_own(&mut conn, g, &[], &none, "suite.group_ack_own")
        .await
        .unwrap();
    assert!(lost.is_empty());
    assert!(none.lock().unwrap().is_empty());
    let acked = Mutex::new(vec![unknown]);
    let sent = [d[0].receipt(), unknown, d[2].receipt()];
    let lost = store
        .ack_group_own(&mut conn, g, &sent, &acked, "suite.group_ack_own")
        .await
        .unwrap();
    drop(conn);
    assert_eq!(lost, [unknown]);
    assert_eq!(*acked.lock().unwrap(), [d[0].receipt(), d[2].receipt()]);
    assert_eq!(leases(&db).await, 1);
    assert_eq!(db.count("group_history").await, 2);
    db.drop().await;
}

/// The ack in a transaction of its own writes the receipts it acks into its `Mutex` before it
/// commits: held at its commit, the `Mutex` has them while every other connection still sees
/// the leases; the resolver, asked meanwhile, answers once the commit is done.
async fn ack_own_fills_its_mutex_before_committing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 2).await;
    let d = group_claim(&client, t, g, 2, LONG, "m").await;
    let stale = with_token(&d[1], 99);
    let acked = Arc::new(Mutex::new(Vec::new()));
    // A name of its own: failpoints are process-wide, and the tests of every backend run at
    // once in this process.
    let op: &'static str = format!("suite.group_ack_own.{}", db.name).leak();
    let held = crate::failpoints::pause(format!("{op}.before_commit").leak());
    let task = tokio::spawn({
        let (client, acked) = (client.clone(), acked.clone());
        let sent = [d[0].receipt(), stale];
        async move {
            let mut conn = client.pool().acquire().await.unwrap();
            client
                .store()
                .ack_group_own(&mut conn, g, &sent, &acked, op)
                .await
                .unwrap()
        }
    });
    held.reached().await;
    assert_eq!(*acked.lock().unwrap(), [d[0].receipt()]);
    assert_eq!(leases(&db).await, 2, "not committed yet");
    assert_eq!(db.count("group_history").await, 0, "not committed yet");
    let resolver = tokio::spawn({
        let client = client.clone();
        let acked = vec![d[0].receipt()];
        async move {
            let mut conn = client.pool().acquire().await.unwrap();
            client
                .store()
                .group_acks_committed(&mut conn, g, &acked)
                .await
                .unwrap()
        }
    });
    held.release();
    assert_eq!(task.await.unwrap(), [stale]);
    assert!(
        resolver.await.unwrap(),
        "the resolver waited for the commit"
    );
    assert_eq!(leases(&db).await, 1);
    db.drop().await;
}

/// The resolver of an unknown COMMIT: false while the acked leases are there (before the ack,
/// after a rolled-back one, for part of them), true once the ack committed — also when a
/// later claim holds the record again — and true for nothing acked.
async fn acks_committed_after_the_commit_only<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, MANY).await;
    let d = group_claim(&client, t, g, MANY, LONG, "m").await;
    let all = receipts(&d);
    let committed = |acked: Vec<Receipt>, group: i32| {
        let client = client.clone();
        async move {
            let mut conn = client.pool().acquire().await.unwrap();
            client
                .store()
                .group_acks_committed(&mut conn, group, &acked)
                .await
                .unwrap()
        }
    };
    assert!(committed(Vec::new(), g).await);
    assert!(!committed(all.clone(), g).await);
    assert!(!committed(vec![all[MANY - 1]], g).await);

    let mut tx = client.begin().await.unwrap();
    assert!(store.ack_group(&mut tx, g, &all).await.unwrap().is_empty());
    tx.rollback().await.unwrap();
    assert!(!committed(all.clone(), g).await, "rolled back");
    assert_eq!(leases(&db).await, MANY as i64);

    assert!(group_ack(&client, g, &all[..MANY / 2]).await.is_empty());
    assert!(committed(all[..MANY / 2].to_vec(), g).await);
    assert!(!committed(all.clone(), g).await);
    assert!(group_ack(&client, g, &all[MANY / 2..]).await.is_empty());
    assert!(committed(all.clone(), g).await);
    assert_eq!(leases(&db).await, 0);

    // Offset 0 delivered again: a later claim's lease does not make the ack uncommitted.
    let mut tx = client.begin().await.unwrap();
    assert_eq!(store.replay_range(&mut tx, t, g, 0, 0..1).await.unwrap(), 1);
    tx.commit().await.unwrap();
    let again = group_claim(&client, t, g, 1, LONG, "m").await;
    assert_eq!((again[0].id, again[0].token), (d[0].id, 2));
    assert!(committed(vec![all[0]], g).await);
    assert!(!committed(vec![again[0].receipt()], g).await);
    db.drop().await;
}

/// More receipts than one statement's list, acked at once in the caller's transaction and in
/// one of its own; then, delivered again, acked again: each history row has both events.
async fn the_largest_ack<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 2, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, MANY).await;
    log_plain(&client, t, 1, MANY).await;
    let d = group_claim(&client, t, g, 2 * MANY, LONG, "m").await;
    assert!(
        group_ack(&client, g, &receipts(&d[..MANY]))
            .await
            .is_empty()
    );
    let acked = Mutex::new(Vec::new());
    let mut conn = client.pool().acquire().await.unwrap();
    let lost = store
        .ack_group_own(
            &mut conn,
            g,
            &receipts(&d[MANY..]),
            &acked,
            "suite.group_ack_own",
        )
        .await
        .unwrap();
    drop(conn);
    assert!(lost.is_empty());
    assert_eq!(*acked.lock().unwrap(), receipts(&d[MANY..]));
    assert_eq!(leases(&db).await, 0);
    assert_eq!(db.count("group_history").await, 2 * MANY as i64);

    let mut tx = client.begin().await.unwrap();
    assert_eq!(
        store
            .replay_range(&mut tx, t, g, 1, 0..MANY as i64)
            .await
            .unwrap(),
        MANY as u64
    );
    tx.commit().await.unwrap();
    let again = group_claim(&client, t, g, MANY, LONG, "n").await;
    assert_eq!(again.len(), MANY);
    assert!(again.iter().all(|a| a.token == 2 && a.attempt == 1));
    assert!(group_ack(&client, g, &receipts(&again)).await.is_empty());
    for a in [&again[0], &again[MANY / 2], &again[MANY - 1]] {
        let rows = rows_of(&client, g, a).await;
        let (_, _, events, _) = rows.history.as_ref().unwrap();
        let members: Vec<Option<&str>> = events.iter().map(|e| e.member.as_deref()).collect();
        assert_eq!(members, [Some("m"), Some("n")]);
        assert_eq!(
            story(&rows),
            (HistoryState::Acked, 1, vec!["acked".into(), "acked".into()])
        );
    }
    assert_eq!(db.count("group_history").await, 2 * MANY as i64);
    db.drop().await;
}

/// Failures on the retry ladder, as the decision settles each: given the attempts of the
/// lease, it retries (after its wait), snoozes (the attempt given back) and at last
/// dead-letters; each answer, the retry and dead rows (attempts, tokens), and the history
/// (one event per settlement, with its error) follow the decision.
async fn fail_follows_the_decision<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 1).await;
    let given = Mutex::new(Vec::new());
    let ladder = |n: u32| {
        given.lock().unwrap().push(n);
        if n < 3 {
            retry(n, Duration::ZERO, "boom")
        } else {
            bury(n, "last")
        }
    };
    let claim = || group_claim(&client, t, g, 1, LONG, "m");

    let d = claim().await.remove(0);
    assert_eq!((d.attempt, d.token), (1, 1));
    let outcome = group_fail(&client, g, &d.receipt(), &ladder).await.unwrap();
    assert_eq!(
        outcome,
        NackOutcome::Retry {
            after: Duration::ZERO
        }
    );
    let rows = rows_of(&client, g, &d).await;
    assert!(rows.lease.is_none() && rows.dead.is_none());
    assert_eq!(rows.retry.unwrap().0, 1);
    assert_eq!(
        story(&rows),
        (HistoryState::Retrying, 1, vec!["failed".into()])
    );

    // Delivered again: attempt 2, snoozed (its attempt given back).
    let d = claim().await.remove(0);
    assert_eq!((d.attempt, d.token), (2, 2));
    let outcome = group_fail(&client, g, &d.receipt(), &|n| {
        given.lock().unwrap().push(n);
        snooze(n, Duration::ZERO)
    })
    .await
    .unwrap();
    assert_eq!(
        outcome,
        NackOutcome::Retry {
            after: Duration::ZERO
        }
    );
    assert_eq!(rows_of(&client, g, &d).await.retry.unwrap().0, 1);

    // Attempt 2 again, failed; then attempt 3, the last: dead.
    let d = claim().await.remove(0);
    assert_eq!((d.attempt, d.token), (2, 3));
    group_fail(&client, g, &d.receipt(), &ladder).await.unwrap();
    let d = claim().await.remove(0);
    assert_eq!((d.attempt, d.token), (3, 4));
    let outcome = group_fail(&client, g, &d.receipt(), &ladder).await.unwrap();
    assert_eq!(outcome, NackOutcome::DeadLettered);
    assert_eq!(*given.lock().unwrap(), [1, 2, 2, 3]);

    let rows = rows_of(&client, g, &d).await;
    assert!(rows.lease.is_none() && rows.retry.is_none());
    assert_eq!(rows.dead.unwrap().0, 3);
    let (state, attempts, events, _) = rows.history.unwrap();
    assert_eq!((state, attempts), (HistoryState::Dead, 3));
    let summary: Vec<(u32, &str, Option<&str>)> = events
        .iter()
        .map(|e| (e.attempt, e.outcome.as_str(), e.error.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            (1, "failed", Some("boom")),
            (2, "snoozed", None),
            (2, "failed", Some("boom")),
            (3, "dead", Some("last")),
        ]
    );
    let tokens = db
        .query("SELECT token FROM sqlmq_group_dead", &[])
        .await
        .iter()
        .map(|r| r[0].int())
        .collect::<Vec<_>>();
    assert_eq!(tokens, [4], "the dead letter keeps the last token");
    assert!(claim().await.is_empty());
    db.drop().await;
}

/// A retry's wait is from now: an hour, or `Duration::MAX` (capped at a thousand years: no
/// error, never due); the answer gives the wait as decided.
async fn fail_with_long_waits<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 2).await;
    let d = group_claim(&client, t, g, 2, LONG, "m").await;
    for (d, wait) in [(&d[0], LONG), (&d[1], Duration::MAX)] {
        let before = now_us(&client).await;
        let outcome = group_fail(&client, g, &d.receipt(), &|n| retry(n, wait, "later"))
            .await
            .unwrap();
        let after = now_us(&client).await;
        assert_eq!(outcome, NackOutcome::Retry { after: wait });
        let (attempts, due) = rows_of(&client, g, d).await.retry.unwrap();
        let span = wait.min(MAX_DATE_SPAN).as_micros() as i64;
        assert_eq!(attempts, 1);
        assert!(
            due >= before + span - 1_000 && due <= after + span + 1_000,
            "{wait:?}: due {due}, now {before}..{after}"
        );
    }
    assert!(group_claim(&client, t, g, 2, LONG, "m").await.is_empty());
    assert_eq!(db.count("group_retries").await, 2);
    db.drop().await;
}

/// A receipt that does not hold its lease — stale, older, unknown, another group's — fails
/// with `LeaseLost`, without asking the decision, and changes nothing.
async fn fail_loses_a_lease_it_does_not_hold<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 1).await;
    log_plain(&client, o, 0, 1).await;
    let d = group_claim(&client, t, g, 1, LONG, "m").await.remove(0);
    let foreign = group_claim(&client, o, h, 1, LONG, "m").await.remove(0);
    let asked = AtomicBool::new(false);
    let decide = |n| {
        asked.store(true, Ordering::SeqCst);
        bury(n, "x")
    };
    for receipt in [
        with_token(&d, 2),
        with_token(&d, 0),
        Receipt {
            id: MessageId::new(),
            token: 1,
        },
        foreign.receipt(),
    ] {
        match group_fail(&client, g, &receipt, &decide).await {
            Err(Error::LeaseLost { id, token }) => {
                assert_eq!((id, token), (receipt.id, receipt.token));
            }
            other => panic!("{receipt}: {other:?}"),
        }
    }
    assert!(!asked.load(Ordering::SeqCst));
    assert_eq!(leases(&db).await, 2);
    for table in ["group_retries", "group_dead", "group_history"] {
        assert_eq!(db.count(table).await, 0, "{table}");
    }
    db.drop().await;
}

/// Extend pushes a live lease's end to now plus the duration — `Duration::MAX` capped at a
/// thousand years, never expiring — and says true; a receipt that does not hold the lease
/// (stale, unknown, another group's) gets false and changes nothing.
async fn extend_a_live_lease<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 2).await;
    log_plain(&client, o, 0, 1).await;
    let d = group_claim(&client, t, g, 2, Duration::from_secs(5), "m").await;
    let foreign = group_claim(&client, o, h, 1, LONG, "m").await.remove(0);
    let lease_end = |d: Delivery| {
        let client = client.clone();
        async move { rows_of(&client, g, &d).await.lease.unwrap().4 }
    };
    let unchanged = lease_end(d[1].clone()).await;
    for (wait, span) in [
        (LONG, LONG),
        (Duration::MAX, MAX_DATE_SPAN),
        (Duration::from_secs(10_000 * 366 * 24 * 3600), MAX_DATE_SPAN),
    ] {
        let before = now_us(&client).await;
        let mut conn = client.pool().acquire().await.unwrap();
        assert!(
            store
                .extend_group(&mut conn, g, &d[0].receipt(), wait)
                .await
                .unwrap()
        );
        drop(conn);
        let after = now_us(&client).await;
        let end = lease_end(d[0].clone()).await;
        let span = span.as_micros() as i64;
        assert!(
            end >= before + span - 1_000 && end <= after + span + 1_000,
            "{wait:?}"
        );
    }
    let mut conn = client.pool().acquire().await.unwrap();
    for (group, receipt) in [
        (g, with_token(&d[1], 2)),
        (g, with_token(&d[1], 0)),
        (
            g,
            Receipt {
                id: MessageId::new(),
                token: 1,
            },
        ),
        (g, foreign.receipt()),
        (h, d[1].receipt()),
    ] {
        assert!(
            !store
                .extend_group(&mut conn, group, &receipt, LONG)
                .await
                .unwrap(),
            "{receipt}"
        );
    }
    drop(conn);
    assert_eq!(lease_end(d[1].clone()).await, unchanged);
    // The extended lease never ends: nothing to release.
    let mut conn = client.pool().acquire().await.unwrap();
    let released = store
        .release_group_expired(&mut conn, g, 10, &|n| retry(n, Duration::ZERO, "x"))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(released, Released::default());
    assert_eq!(leases(&db).await, 3);
    db.drop().await;
}

/// The decision of the releases of expired leases below: back in line at once, dead on the
/// second attempt.
fn expired(n: u32) -> Settlement<'static> {
    Settlement {
        retry_after: (n < 2).then_some(Duration::ZERO),
        attempts: n,
        error: Some("lease expired"),
        outcome: "expired",
    }
}

/// Expired leases are released soonest expired first, at most `limit` at a time, as the
/// decision settles each (back in line, or dead on the last attempt; "expired" in the
/// history); live leases and other groups' stay.
async fn release_expired_as_decided<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 4).await;
    log_plain(&client, o, 0, 1).await;
    let release = |group: i32, limit: usize, decide: &'static Decide<'static>| {
        let client = client.clone();
        async move {
            let mut tx = client.begin().await.unwrap();
            let released = client
                .store()
                .release_group_expired(&mut tx, group, limit, decide)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            released
        }
    };
    const EXPIRED: &Decide<'static> = &expired;
    // Offset 0 on its second attempt (failed once), its lease ending last; offsets 1 and 2
    // on their first; offset 3 live.
    let first = group_claim(&client, t, g, 1, LONG, "m").await.remove(0);
    group_fail(&client, g, &first.receipt(), &|n| {
        retry(n, Duration::ZERO, "boom")
    })
    .await
    .unwrap();
    let late = group_claim(&client, t, g, 1, Duration::from_millis(500), "m").await;
    assert_eq!((late[0].id, late[0].attempt), (first.id, 2));
    assert_eq!(release(g, 10, EXPIRED).await, Released::default());
    let early = group_claim(&client, t, g, 2, BRIEF, "m").await;
    assert_eq!(early.len(), 2);
    let live = group_claim(&client, t, g, 1, LONG, "m").await;
    let foreign = group_claim(&client, o, h, 1, BRIEF, "m").await;
    wait_ended(&client, &late).await;
    wait_ended(&client, &foreign).await;

    assert_eq!(
        release(g, 2, EXPIRED).await,
        Released {
            released: 2,
            dead_lettered: 0
        }
    );
    for d in &early {
        let rows = rows_of(&client, g, d).await;
        assert!(rows.lease.is_none());
        assert_eq!(rows.retry.unwrap().0, 1);
        assert_eq!(
            story(&rows),
            (HistoryState::Retrying, 1, vec!["expired".into()])
        );
    }
    assert_eq!(
        release(g, 10, EXPIRED).await,
        Released {
            released: 0,
            dead_lettered: 1
        }
    );
    let rows = rows_of(&client, g, &late[0]).await;
    assert_eq!(rows.dead.unwrap().0, 2);
    assert_eq!(
        story(&rows),
        (
            HistoryState::Dead,
            2,
            vec!["failed".into(), "expired".into()]
        )
    );
    assert_eq!(release(g, 10, EXPIRED).await, Released::default());
    assert!(rows_of(&client, g, &live[0]).await.lease.is_some());
    assert!(rows_of(&client, h, &foreign[0]).await.lease.is_some());
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        store
            .release_group_expired(&mut conn, i32::MAX, 10, EXPIRED)
            .await
            .unwrap(),
        Released::default()
    );
    drop(conn);
    assert_eq!(leases(&db).await, 2);
    db.drop().await;
}

/// The leases of one owner are released whatever their expiry, at most `limit` at a time, as
/// the decision settles each; other owners' (names compared exactly) and other groups' stay.
async fn release_owned_as_decided<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, 4).await;
    log_plain(&client, o, 0, 1).await;
    let gone = group_claim(&client, t, g, 3, LONG, "a").await;
    let kept = group_claim(&client, t, g, 1, LONG, "b").await;
    let foreign = group_claim(&client, o, h, 1, LONG, "a").await;
    let given = Mutex::new(Vec::new());
    let decide = |n: u32| {
        given.lock().unwrap().push(n);
        Settlement {
            retry_after: Some(Duration::ZERO),
            attempts: n,
            error: Some("member left"),
            outcome: "released",
        }
    };
    let release = |owner: &'static str, limit: usize| {
        let (client, decide) = (client.clone(), &decide);
        async move {
            let mut tx = client.begin().await.unwrap();
            let released = client
                .store()
                .release_group_owned(&mut tx, g, owner, limit, decide)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            released
        }
    };
    let released = |n| Released {
        released: n,
        dead_lettered: 0,
    };
    assert_eq!(release("nobody", 10).await, released(0));
    assert_eq!(release("A", 10).await, released(0));
    assert_eq!(release("a", 2).await, released(2));
    assert_eq!(release("a", 10).await, released(1));
    assert_eq!(release("a", 10).await, released(0));
    assert_eq!(*given.lock().unwrap(), [1, 1, 1]);
    for d in &gone {
        let rows = rows_of(&client, g, d).await;
        assert!(rows.lease.is_none() && rows.retry.is_some());
        let (_, _, events, _) = rows.history.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].outcome.as_str(), events[0].member.as_deref()),
            ("released", Some("a"))
        );
    }
    assert!(rows_of(&client, g, &kept[0]).await.lease.is_some());
    assert!(rows_of(&client, h, &foreign[0]).await.lease.is_some());
    assert_eq!(leases(&db).await, 2);
    db.drop().await;
}

/// Settling more leases than one statement's list at once (a release of `MANY` expired ones),
/// twice: every record's history gets each event.
async fn release_many_at_once<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    log_plain(&client, t, 0, MANY).await;
    let expire = |n: u32| Settlement {
        retry_after: Some(Duration::ZERO),
        attempts: n,
        error: Some("lease expired"),
        outcome: "expired",
    };
    for round in 1..=2u32 {
        let d = group_claim(&client, t, g, MANY, BRIEF, "m").await;
        assert_eq!(d.len(), MANY);
        assert!(d.iter().all(|d| d.attempt == round));
        wait_ended(&client, &d).await;
        let mut tx = client.begin().await.unwrap();
        let released = store
            .release_group_expired(&mut tx, g, 2 * MANY, &expire)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(
            released,
            Released {
                released: MANY,
                dead_lettered: 0
            }
        );
        for x in [&d[0], &d[MAX_LIST], &d[MANY - 1]] {
            let rows = rows_of(&client, g, x).await;
            let (_, attempts, events, _) = rows.history.unwrap();
            assert_eq!(attempts, round as i32);
            let attempts: Vec<u32> = events.iter().map(|e| e.attempt).collect();
            assert_eq!(attempts, (1..=round).collect::<Vec<_>>());
        }
    }
    assert_eq!(leases(&db).await, 0);
    assert_eq!(db.count("group_retries").await, MANY as i64);
    assert_eq!(db.count("group_history").await, MANY as i64);
    db.drop().await;
}

/// A record's history keeps exactly the last `GROUP_EVENTS_KEPT` events, on every backend:
/// a record failed more often than that and then acked keeps the last ones, the ack last; a
/// record dead-lettered after as many failures lists the errors of the last ones; an error
/// longer than an event keeps is cut at a character boundary.
async fn history_keeps_the_last_events<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (t, g) = cluster(&client, "t", 1, false, GroupConfig::default()).await;
    let ids = log_plain(&client, t, 0, 2).await;
    let failures = GROUP_EVENTS_KEPT as u32 + 5;
    let long = "é".repeat(MAX_ERROR_BYTES); // twice as many bytes as kept
    let error = |attempt: u32| -> String {
        if attempt == 3 {
            long.clone()
        } else {
            format!("e{attempt}")
        }
    };
    for attempt in 1..=failures {
        let d = group_claim(&client, t, g, 2, LONG, "m").await;
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|d| d.attempt == attempt));
        let text = error(attempt);
        for x in &d {
            let last = x.id == ids[1] && attempt == failures;
            let decide = |n: u32| Settlement {
                retry_after: (!last).then_some(Duration::ZERO),
                attempts: n,
                error: Some(&text),
                outcome: if last { "dead" } else { "failed" },
            };
            group_fail(&client, g, &x.receipt(), &decide).await.unwrap();
        }
    }
    let d = group_claim(&client, t, g, 2, LONG, "m").await;
    assert_eq!(d.len(), 1, "the other is dead");
    assert_eq!((d[0].id, d[0].attempt), (ids[0], failures + 1));
    assert!(group_ack(&client, g, &[d[0].receipt()]).await.is_empty());

    let rows = rows_of(&client, g, &d[0]).await;
    let (state, attempts, events, _) = rows.history.unwrap();
    assert_eq!(
        (state, attempts, events.len()),
        (HistoryState::Acked, failures as i32 + 1, GROUP_EVENTS_KEPT)
    );
    let first = failures + 1 - GROUP_EVENTS_KEPT as u32 + 1;
    let expected: Vec<(u32, String, Option<String>)> = (first..=failures + 1)
        .map(|a| {
            if a == failures + 1 {
                (a, "acked".to_owned(), None)
            } else {
                (a, "failed".to_owned(), Some(error(a)))
            }
        })
        .collect();
    let got: Vec<(u32, String, Option<String>)> = events
        .iter()
        .map(|e| (e.attempt, e.outcome.clone(), e.error.clone()))
        .collect();
    assert_eq!(got, expected);

    let mut conn = client.reader().acquire().await.unwrap();
    let letters = client
        .store()
        .group_dead_letters(&mut conn, t, g, 10)
        .await
        .unwrap();
    drop(conn);
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].id, letters[0].attempts), (ids[1], failures));
    let errors: Vec<(u32, String)> = letters[0]
        .errors
        .iter()
        .map(|e| (e.attempt, e.error.clone()))
        .collect();
    let first = failures - GROUP_EVENTS_KEPT as u32 + 1;
    let expected: Vec<(u32, String)> = (first..=failures).map(|a| (a, error(a))).collect();
    assert_eq!(errors, expected);

    // The cut error, before it left the kept events.
    let (o, h) = cluster(&client, "o", 1, false, GroupConfig::default()).await;
    log_plain(&client, o, 0, 1).await;
    let x = group_claim(&client, o, h, 1, LONG, "m").await.remove(0);
    group_fail(&client, h, &x.receipt(), &|n| bury(n, &long))
        .await
        .unwrap();
    let (_, _, events, _) = rows_of(&client, h, &x).await.history.unwrap();
    let kept = events[0].error.as_deref().unwrap();
    assert_eq!(kept, "é".repeat(MAX_ERROR_BYTES / 2));
    assert_eq!(db.count("group_history").await, 3);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    ack_returns_exactly_the_lost,
    an_ended_lease_settles_nothing,
    ack_in_own_transaction,
    ack_own_fills_its_mutex_before_committing,
    acks_committed_after_the_commit_only,
    the_largest_ack,
    fail_follows_the_decision,
    fail_with_long_waits,
    fail_loses_a_lease_it_does_not_hold,
    extend_a_live_lease,
    release_expired_as_decided,
    release_owned_as_decided,
    release_many_at_once,
    history_keeps_the_last_events,
]);
