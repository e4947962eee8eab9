//! `store/body/settle.rs`: ack (in the caller's transaction and in one of its own), the resolver of an
//! unknown COMMIT, fail, extend, and the releases of expired and orphaned leases.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sqlmq_testkit::{TestDb, Value};

use super::{
    DEADLINE, LONG, SuiteBackend, bury, claim, claim_as, delivered, entry, fixture, ids, ids_in,
    insert_rows, messages, put, queue, receipts, retry, row_of, sorted,
};
use crate::Client;
use crate::domain::{
    Error, MAX_ERROR_HISTORY, Message, MessageId, NackOutcome, Receipt, Released, Settlement,
    parse_errors,
};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// Longest error text an error history keeps per attempt, in bytes (the domain's
/// `MAX_ERROR_BYTES`, private to its module).
const MAX_ERROR_BYTES: usize = 4096;

/// A lease that is over almost at once.
const BRIEF: Duration = Duration::from_millis(1);

/// The error history column of message `id` (empty when NULL).
async fn history<B: SuiteBackend>(db: &TestDb<B>, id: MessageId) -> String {
    let rows = db
        .query(
            "SELECT errors FROM sqlmq_messages WHERE id = ?",
            &[Value::from(id.bytes())],
        )
        .await;
    match &rows[0][0] {
        Value::Null => String::new(),
        v => v.text(),
    }
}

/// Wait until queue `q` has an ended lease.
async fn wait_expired<B: SuiteBackend>(client: &Client<B>, q: i32) {
    sqlmq_testkit::eventually_async(DEADLINE, "an ended lease", || async move {
        let mut conn = client.reader().acquire().await.unwrap();
        client
            .store()
            .any_expired(&mut conn, q)
            .await
            .unwrap()
            .then_some(())
    })
    .await;
}

/// Ack in the caller's transaction, committed.
async fn ack<B: SuiteBackend>(client: &Client<B>, q: i32, receipts: &[Receipt]) -> Vec<Receipt> {
    let mut tx = client.begin().await.unwrap();
    let lost = client
        .store()
        .ack_queue(&mut tx, q, receipts)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    lost
}

/// `fail_queue` in a connection of its own.
async fn fail<B: SuiteBackend>(
    client: &Client<B>,
    q: i32,
    receipt: &Receipt,
    decide: &crate::domain::Decide<'_>,
) -> crate::domain::Result<NackOutcome> {
    let mut conn = client.pool().acquire().await.unwrap();
    client
        .store()
        .fail_queue(&mut conn, q, receipt, decide)
        .await
}

/// An ack of good, stale, unknown, foreign and repeated receipts acks the good ones and
/// returns exactly the others, in order; an empty ack does nothing.
async fn ack_returns_exactly_the_lost<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let msgs = messages("m", 4);
    put(&client, q, &msgs).await;
    put(&client, other, &messages("o", 1)).await;
    let d = claim(&client, q, 4, LONG).await;
    let foreign = claim(&client, other, 1, LONG).await.remove(0).receipt();
    assert!(ack(&client, q, &[]).await.is_empty());

    let stale = Receipt {
        id: d[1].id,
        token: d[1].token + 1,
    };
    let older = Receipt {
        id: d[2].id,
        token: 0,
    };
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
        foreign,
        d[0].receipt(),
    ];
    let lost = ack(&client, q, &sent).await;
    assert_eq!(lost, [stale, unknown, older, foreign, d[0].receipt()]);
    assert_eq!(
        ids_in(&db, "messages").await,
        sorted(vec![d[1].id, d[2].id, foreign.id])
    );
    assert_eq!(
        ids_in(&db, "leases").await,
        sorted(vec![d[1].id, d[2].id, foreign.id])
    );
    // Acked receipts are lost the second time.
    assert_eq!(ack(&client, q, &[d[3].receipt()]).await, [d[3].receipt()]);
    db.drop().await;
}

/// A receipt whose lease ended is lost, and its message stays.
async fn an_ended_lease_cannot_be_acked<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", 1)).await;
    let d = claim(&client, q, 1, BRIEF).await.remove(0);
    wait_expired(&client, q).await;
    assert_eq!(ack(&client, q, &[d.receipt()]).await, [d.receipt()]);
    let mut conn = client.pool().acquire().await.unwrap();
    let own = Mutex::new(Vec::new());
    let lost = <B as crate::store::body::Dialect>::ack_queue_own(
        client.store(),
        &mut conn,
        q,
        &[d.receipt()],
        &own,
        "suite.ack_own",
    )
    .await
    .unwrap();
    assert_eq!(lost, [d.receipt()]);
    assert!(own.lock().unwrap().is_empty());
    drop(conn);
    assert_eq!(db.count("messages").await, 1);
    assert_eq!(db.count("leases").await, 1);
    db.drop().await;
}

/// The ack in a transaction of its own returns the lost receipts and puts the acked ones in
/// its `Mutex`; it committed (the rows are gone for every connection).
async fn ack_in_own_transaction<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let msgs = messages("m", 3).into_iter().collect::<Vec<_>>();
    let keyed = vec![
        Message::new("k0").ordering_key("k"),
        Message::new("k1").ordering_key("k"),
    ];
    put(&client, q, &msgs).await;
    put(&client, q, &keyed).await;
    let d = claim(&client, q, 10, LONG).await;
    assert_eq!(d.len(), 4);
    let unknown = Receipt {
        id: MessageId::new(),
        token: 7,
    };
    let sent = [d[0].receipt(), unknown, d[2].receipt(), d[3].receipt()];
    let acked = Mutex::new(vec![unknown]);
    let mut conn = client.pool().acquire().await.unwrap();
    let store = client.store();
    assert!(
        <B as crate::store::body::Dialect>::ack_queue_own(
            store,
            &mut conn,
            q,
            &[],
            &Mutex::new(Vec::new()),
            "suite.ack_own"
        )
        .await
        .unwrap()
        .is_empty()
    );
    let lost = <B as crate::store::body::Dialect>::ack_queue_own(
        store,
        &mut conn,
        q,
        &sent,
        &acked,
        "suite.ack_own",
    )
    .await
    .unwrap();
    drop(conn);
    assert_eq!(lost, [unknown]);
    assert_eq!(
        *acked.lock().unwrap(),
        [d[0].receipt(), d[2].receipt(), d[3].receipt()]
    );
    // d[3] is the keyed head: its successor is ready now.
    assert_eq!(d[3].id, keyed[0].id());
    assert_eq!(ids_in(&db, "ready").await, [keyed[1].id()]);
    assert_eq!(
        ids_in(&db, "messages").await,
        sorted(vec![d[1].id, keyed[1].id()])
    );
    db.drop().await;
}

/// The ack in a transaction of its own writes the receipts it acks into its `Mutex` before it
/// commits: held at its commit, the `Mutex` has them while every other connection still sees
/// the messages; the resolver, asked meanwhile, answers once the commit is done.
async fn ack_own_fills_its_mutex_before_committing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", 2)).await;
    let d = claim(&client, q, 2, LONG).await;
    let stale = Receipt {
        id: d[1].id,
        token: 99,
    };
    let acked = Arc::new(Mutex::new(Vec::new()));
    // A name of its own: failpoints are process-wide, and the tests of every backend run at
    // once in this process.
    let op: &'static str = format!("suite.ack_own.{}", db.name).leak();
    let held = crate::failpoints::pause(format!("{op}.before_commit").leak());
    let task = tokio::spawn({
        let (client, acked) = (client.clone(), acked.clone());
        let sent = [d[0].receipt(), stale];
        async move {
            let mut conn = client.pool().acquire().await.unwrap();
            <B as crate::store::body::Dialect>::ack_queue_own(
                client.store(),
                &mut conn,
                q,
                &sent,
                &acked,
                op,
            )
            .await
            .unwrap()
        }
    });
    held.reached().await;
    assert_eq!(*acked.lock().unwrap(), [d[0].receipt()]);
    assert_eq!(db.count("messages").await, 2, "not committed yet");
    let resolver = tokio::spawn({
        let client = client.clone();
        let acked = vec![d[0].receipt()];
        async move {
            let mut conn = client.pool().acquire().await.unwrap();
            client
                .store()
                .queue_acks_committed(&mut conn, &acked)
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
    assert_eq!(ids_in(&db, "messages").await, [d[1].id]);
    db.drop().await;
}

/// The resolver of an unknown COMMIT: false while the acked messages are stored (before the
/// ack, after a rolled-back one), true once the ack committed, and true for nothing acked.
async fn acks_committed_after_the_commit_only<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", MANY)).await;
    let d = claim(&client, q, MANY, LONG).await;
    let all = receipts(&d);
    let committed = |acked: Vec<Receipt>| {
        let client = client.clone();
        async move {
            let mut conn = client.pool().acquire().await.unwrap();
            client
                .store()
                .queue_acks_committed(&mut conn, &acked)
                .await
                .unwrap()
        }
    };
    assert!(committed(Vec::new()).await);
    assert!(!committed(all.clone()).await);
    assert!(!committed(vec![all[0]]).await);

    let mut tx = client.begin().await.unwrap();
    assert!(store.ack_queue(&mut tx, q, &all).await.unwrap().is_empty());
    tx.rollback().await.unwrap();
    assert!(!committed(all.clone()).await, "rolled back");

    // Half of them: not all committed.
    assert!(ack(&client, q, &all[..MANY / 2]).await.is_empty());
    assert!(committed(all[..MANY / 2].to_vec()).await);
    assert!(!committed(all.clone()).await);
    assert!(ack(&client, q, &all[MANY / 2..]).await.is_empty());
    assert!(committed(all).await);
    assert_eq!(db.count("messages").await, 0);
    assert_eq!(db.count("leases").await, 0);
    db.drop().await;
}

/// More receipts than one statement's list, acked at once, in the caller's transaction and
/// in one of its own.
async fn the_largest_ack<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (a, b) = (queue(&client, "a").await, queue(&client, "b").await);
    put(&client, a, &messages("a", MANY)).await;
    put(&client, b, &messages("b", MANY)).await;
    let da = claim(&client, a, MANY, LONG).await;
    let db_ = claim(&client, b, MANY, LONG).await;
    assert!(ack(&client, a, &receipts(&da)).await.is_empty());
    let acked = Mutex::new(Vec::new());
    let mut conn = client.pool().acquire().await.unwrap();
    let lost = <B as crate::store::body::Dialect>::ack_queue_own(
        client.store(),
        &mut conn,
        b,
        &receipts(&db_),
        &acked,
        "suite.ack_own",
    )
    .await
    .unwrap();
    drop(conn);
    assert!(lost.is_empty());
    assert_eq!(*acked.lock().unwrap(), receipts(&db_));
    assert_eq!(db.count("messages").await, 0);
    assert_eq!(db.count("leases").await, 0);
    db.drop().await;
}

/// A failure the decision retries goes back in line — after its delay in `scheduled`, at once
/// in `ready` — with the attempts the decision keeps, the token of its lease, and an entry in
/// its error history; the decision is given the attempts of the lease.
async fn fail_retries_as_decided<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let msgs = messages("m", 3);
    put(&client, q, &msgs).await;
    let d = claim(&client, q, 3, LONG).await;
    let seen = Mutex::new(Vec::new());
    let later = |n: u32| {
        seen.lock().unwrap().push(n);
        retry(n, Duration::from_secs(3600), "later")
    };
    assert_eq!(
        fail(&client, q, &d[0].receipt(), &later).await.unwrap(),
        NackOutcome::Retry {
            after: Duration::from_secs(3600)
        }
    );
    let now = |n: u32| retry(n, Duration::ZERO, "now");
    assert_eq!(
        fail(&client, q, &d[1].receipt(), &now).await.unwrap(),
        NackOutcome::Retry {
            after: Duration::ZERO
        }
    );
    // A snooze: no error recorded, the attempt given back.
    let snooze = |n: u32| Settlement {
        retry_after: Some(Duration::ZERO),
        attempts: n - 1,
        error: None,
        outcome: "snoozed",
    };
    fail(&client, q, &d[2].receipt(), &snooze).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [1]);

    assert_eq!(ids_in(&db, "scheduled").await, [d[0].id]);
    assert_eq!(ids_in(&db, "ready").await, sorted(vec![d[1].id, d[2].id]));
    assert_eq!(db.count("leases").await, 0);
    assert_eq!(
        row_of(&db, "scheduled", "attempts, token", d[0].id).await,
        Some(vec![1, 1])
    );
    assert_eq!(
        row_of(&db, "ready", "attempts, token", d[1].id).await,
        Some(vec![1, 1])
    );
    assert_eq!(
        row_of(&db, "ready", "attempts, token", d[2].id).await,
        Some(vec![0, 1])
    );
    let errors = parse_errors(Some(&history(&db, d[0].id).await));
    assert_eq!(errors.len(), 1);
    assert_eq!((errors[0].attempt, errors[0].error.as_str()), (1, "later"));
    assert_eq!(
        parse_errors(Some(&history(&db, d[1].id).await))[0].error,
        "now"
    );
    assert!(history(&db, d[2].id).await.is_empty());
    db.drop().await;
}

/// A failure the decision buries becomes a dead letter with its error history; a receipt
/// that does not hold its lease (stale, unknown, another queue's, ended) is `LeaseLost`, and
/// the decision is not asked.
async fn fail_dead_letters_or_loses_the_lease<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    put(&client, q, &messages("m", 2)).await;
    put(&client, other, &messages("o", 1)).await;
    let d = claim(&client, q, 1, LONG).await.remove(0);
    let ended = claim(&client, q, 1, BRIEF).await.remove(0);
    let foreign = claim(&client, other, 1, LONG).await.remove(0);
    wait_expired(&client, q).await;

    let asked = Mutex::new(0);
    let never = |n: u32| {
        *asked.lock().unwrap() += 1;
        bury(n, "never")
    };
    for receipt in [
        Receipt {
            id: d.id,
            token: d.token + 1,
        },
        Receipt {
            id: d.id,
            token: d.token - 1,
        },
        Receipt {
            id: MessageId::new(),
            token: 1,
        },
        foreign.receipt(),
        ended.receipt(),
    ] {
        match fail(&client, q, &receipt, &never).await {
            Err(Error::LeaseLost { id, token }) => {
                assert_eq!((id, token), (receipt.id, receipt.token));
            }
            other => panic!("{receipt}: {other:?}"),
        }
    }
    assert_eq!(*asked.lock().unwrap(), 0);
    assert_eq!(db.count("leases").await, 3);
    assert_eq!(db.count("dead").await, 0);

    let dead = |n: u32| bury(n, "gave up");
    assert_eq!(
        fail(&client, q, &d.receipt(), &dead).await.unwrap(),
        NackOutcome::DeadLettered
    );
    assert_eq!(ids_in(&db, "dead").await, [d.id]);
    assert_eq!(
        row_of(&db, "dead", "queue_id, attempts, token", d.id).await,
        Some(vec![i64::from(q), 1, 1])
    );
    let mut conn = client.pool().acquire().await.unwrap();
    let letters = client.store().dead_letters(&mut conn, q, 10).await.unwrap();
    drop(conn);
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].errors.len(), 1);
    assert_eq!(letters[0].errors[0].error, "gave up");
    assert_eq!(
        ids_in(&db, "leases").await,
        sorted(vec![ended.id, foreign.id])
    );
    db.drop().await;
}

/// The error history keeps the last `MAX_ERROR_HISTORY` entries, oldest first, each with
/// its attempt, a time on the database clock and its text (JSON-escaped, truncated to
/// `MAX_ERROR_BYTES` on a character boundary): the same on every backend.
async fn error_history_keeps_the_last_entries<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let m = Message::new("m");
    put(&client, q, std::slice::from_ref(&m)).await;
    let failures = MAX_ERROR_HISTORY as u32 + 5;
    let text = |attempt: u32| {
        if attempt == failures {
            "é".repeat(MAX_ERROR_BYTES)
        } else {
            format!("error {attempt}\n\"quoted\"\t\\ é")
        }
    };
    let started = SystemTime::now();
    for attempt in 1..=failures {
        let d = claim(&client, q, 1, LONG).await.remove(0);
        assert_eq!(d.attempt, attempt);
        let error = text(attempt);
        let last = attempt == failures;
        let decide = |n: u32| {
            if last {
                bury(n, &error)
            } else {
                retry(n, Duration::ZERO, &error)
            }
        };
        fail(&client, q, &d.receipt(), &decide).await.unwrap();
        let kept = parse_errors(Some(&history(&db, m.id()).await)).len();
        assert_eq!(
            kept,
            (attempt as usize).min(MAX_ERROR_HISTORY),
            "after {attempt}"
        );
    }
    let raw = history(&db, m.id()).await;
    assert!(raw.ends_with('\n'));
    assert_eq!(raw.lines().count(), MAX_ERROR_HISTORY);

    let mut conn = client.pool().acquire().await.unwrap();
    let letters = client.store().dead_letters(&mut conn, q, 10).await.unwrap();
    drop(conn);
    assert_eq!(letters.len(), 1);
    let errors = &letters[0].errors;
    assert_eq!(letters[0].attempts, failures);
    let attempts: Vec<u32> = errors.iter().map(|e| e.attempt).collect();
    let expected: Vec<u32> = (failures - MAX_ERROR_HISTORY as u32 + 1..=failures).collect();
    assert_eq!(attempts, expected);
    for e in &errors[..MAX_ERROR_HISTORY - 1] {
        assert_eq!(e.error, text(e.attempt));
    }
    // The last one is truncated: 4 096 bytes of two-byte characters.
    let last = &errors[MAX_ERROR_HISTORY - 1].error;
    assert_eq!(*last, "é".repeat(MAX_ERROR_BYTES / 2));
    let mut previous = started - Duration::from_secs(60);
    for e in errors {
        let at =
            humantime::parse_rfc3339_weak(&e.at).unwrap_or_else(|err| panic!("{:?}: {err}", e.at));
        assert!(at >= previous, "{:?} goes back", e.at);
        assert!(
            at <= SystemTime::now() + Duration::from_secs(60),
            "{:?}",
            e.at
        );
        assert!(e.at.ends_with('Z'), "{:?} is UTC", e.at);
        previous = at;
    }
    db.drop().await;
}

/// Extending a live lease answers true, and the lease ends when the extension says (zero:
/// now; `Duration::MAX`: capped, never); a receipt that does not hold the lease (stale,
/// unknown, another queue's, ended) answers false and changes nothing.
async fn extend_only_a_live_lease<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    put(&client, q, &messages("m", 2)).await;
    put(&client, other, &messages("o", 1)).await;
    let d = claim(&client, q, 2, LONG).await;
    let foreign = claim(&client, other, 1, LONG).await.remove(0);
    let mut conn = client.pool().acquire().await.unwrap();
    for lease in [Duration::from_secs(1), Duration::MAX, LONG] {
        assert!(
            store
                .extend_queue(&mut conn, q, &d[0].receipt(), lease)
                .await
                .unwrap()
        );
    }
    assert!(!store.any_expired(&mut conn, q).await.unwrap());
    for receipt in [
        Receipt {
            id: d[0].id,
            token: d[0].token + 1,
        },
        Receipt {
            id: MessageId::new(),
            token: 1,
        },
        foreign.receipt(),
    ] {
        assert!(
            !store
                .extend_queue(&mut conn, q, &receipt, Duration::ZERO)
                .await
                .unwrap(),
            "{receipt}"
        );
    }
    assert!(!store.any_expired(&mut conn, q).await.unwrap());
    assert!(!store.any_expired(&mut conn, other).await.unwrap());

    // Extended to zero: over now, and no longer extendable.
    assert!(
        store
            .extend_queue(&mut conn, q, &d[1].receipt(), Duration::ZERO)
            .await
            .unwrap()
    );
    drop(conn);
    wait_expired(&client, q).await;
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        !store
            .extend_queue(&mut conn, q, &d[1].receipt(), LONG)
            .await
            .unwrap()
    );
    drop(conn);
    assert_eq!(ack(&client, q, &receipts(&d)).await, [d[1].receipt()]);
    db.drop().await;
}

/// Expired leases are released up to the limit, each as the decision settles it (back in
/// `ready`, or dead); live leases and other queues' are not; a limit of zero releases
/// nothing.
async fn release_expired_leases<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let msgs = messages("m", 4);
    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, &msgs).await;
    // The last has used nine attempts already.
    let entries: Vec<_> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut e = entry(m);
            e.attempts = if i == 3 { 9 } else { 0 };
            (e, 0)
        })
        .collect();
    store.place(&mut tx, q, &entries).await.unwrap();
    tx.commit().await.unwrap();
    put(&client, other, &messages("o", 1)).await;
    let live = claim(&client, q, 1, LONG).await.remove(0);
    let brief = claim(&client, q, 3, BRIEF).await;
    claim(&client, other, 1, BRIEF).await;
    wait_expired(&client, q).await;

    let seen = Mutex::new(Vec::new());
    let decide = |n: u32| {
        seen.lock().unwrap().push(n);
        if n >= 10 {
            bury(n, "lease expired")
        } else {
            retry(n, Duration::ZERO, "lease expired")
        }
    };
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        store
            .release_queue_expired(&mut conn, q, 0, &decide)
            .await
            .unwrap(),
        Released::default()
    );
    let first = store
        .release_queue_expired(&mut conn, q, 2, &decide)
        .await
        .unwrap();
    assert_eq!(first.released + first.dead_lettered, 2);
    let second = store
        .release_queue_expired(&mut conn, q, 100, &decide)
        .await
        .unwrap();
    assert_eq!(second.released + second.dead_lettered, 1);
    assert_eq!(
        (
            first.released + second.released,
            first.dead_lettered + second.dead_lettered
        ),
        (2, 1)
    );
    assert_eq!(
        store
            .release_queue_expired(&mut conn, q, 100, &decide)
            .await
            .unwrap(),
        Released::default()
    );
    drop(conn);
    let mut attempts = seen.lock().unwrap().clone();
    attempts.sort();
    assert_eq!(attempts, [1, 1, 10]);

    assert_eq!(delivered(&brief), ids(&msgs[1..]));
    assert_eq!(ids_in(&db, "ready").await, ids(&msgs[1..3]));
    assert_eq!(ids_in(&db, "dead").await, [msgs[3].id()]);
    assert_eq!(
        ids_in(&db, "leases").await.len(),
        2,
        "the live and the other queue's"
    );
    assert!(ids_in(&db, "leases").await.contains(&live.id));
    for m in &msgs[1..] {
        let errors = parse_errors(Some(&history(&db, m.id()).await));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].error, "lease expired");
    }
    // Released messages come back under a later token.
    let again = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&again), ids(&msgs[1..3]));
    assert!(again.iter().all(|d| d.token == 2 && d.attempt == 2));
    db.drop().await;
}

/// More expired leases than one statement's list, released at once.
async fn release_many_expired<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", MANY)).await;
    claim(&client, q, MANY, BRIEF).await;
    wait_expired(&client, q).await;
    let mut conn = client.pool().acquire().await.unwrap();
    let released = client
        .store()
        .release_queue_expired(&mut conn, q, MANY + 1, &|n| retry(n, Duration::ZERO, "x"))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(
        released,
        Released {
            released: MANY,
            dead_lettered: 0
        }
    );
    assert_eq!(db.count("ready").await, MANY as i64);
    assert_eq!(db.count("leases").await, 0);
    db.drop().await;
}

/// The leases of one owner are released whatever their expiry, up to the limit; other
/// owners' stay; an owner without leases, or a limit of zero, releases nothing.
async fn release_owned_leases<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 5);
    put(&client, q, &msgs).await;
    let gone = "host-a:4242:0123456789abcdef";
    let mine = claim_as(&client, q, 3, LONG, gone).await;
    let theirs = claim_as(&client, q, 1, Duration::MAX, "host-b:1:x").await;
    let back = |n: u32| retry(n, Duration::ZERO, "released");
    let mut conn = client.pool().acquire().await.unwrap();
    for (owner, limit) in [(gone, 0), ("nobody", 10), ("", 10)] {
        assert_eq!(
            store
                .release_queue_owned(&mut conn, q, owner, limit, &back)
                .await
                .unwrap(),
            Released::default()
        );
    }
    let first = store
        .release_queue_owned(&mut conn, q, gone, 2, &back)
        .await
        .unwrap();
    assert_eq!(
        first,
        Released {
            released: 2,
            dead_lettered: 0
        }
    );
    let dead = |n: u32| bury(n, "owner died");
    let second = store
        .release_queue_owned(&mut conn, q, gone, 10, &dead)
        .await
        .unwrap();
    assert_eq!(
        second,
        Released {
            released: 0,
            dead_lettered: 1
        }
    );
    drop(conn);
    assert_eq!(ids_in(&db, "leases").await, [theirs[0].id]);
    let dead_ids = ids_in(&db, "dead").await;
    assert_eq!(dead_ids.len(), 1);
    assert!(delivered(&mine).contains(&dead_ids[0]));
    let mut settled = ids_in(&db, "ready").await;
    settled.extend(dead_ids);
    let mut expected = delivered(&mine);
    expected.push(msgs[4].id());
    assert_eq!(sorted(settled), sorted(expected));
    db.drop().await;
}

/// A lease of `Duration::MAX` neither errors nor expires: it is extended, never released as
/// expired, and acked.
async fn the_longest_lease_never_expires<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", 1)).await;
    let d = claim(&client, q, 1, Duration::MAX).await.remove(0);
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        store
            .extend_queue(&mut conn, q, &d.receipt(), Duration::MAX)
            .await
            .unwrap()
    );
    assert!(!store.any_expired(&mut conn, q).await.unwrap());
    let never = |n: u32| bury(n, "never");
    assert_eq!(
        store
            .release_queue_expired(&mut conn, q, 10, &never)
            .await
            .unwrap(),
        Released::default()
    );
    drop(conn);
    assert!(ack(&client, q, &[d.receipt()]).await.is_empty());
    assert_eq!(db.count("messages").await, 0);
    db.drop().await;
}

/// Acking or burying a keyed head lets its key move on, in order; the last one leaves no key
/// behind.
async fn settling_a_head_moves_its_key_on<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    let keyed: Vec<Message> = (0..3)
        .map(|i| Message::new(format!("k{i}")).ordering_key("k"))
        .collect();
    put(&client, q, &keyed).await;
    let first = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&first), [keyed[0].id()]);
    assert!(ack(&client, q, &receipts(&first)).await.is_empty());
    let second = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&second), [keyed[1].id()]);
    fail(&client, q, &second[0].receipt(), &|n| bury(n, "dead"))
        .await
        .unwrap();
    let third = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&third), [keyed[2].id()]);
    // A retry keeps the key's head: nothing else of the key goes meanwhile.
    fail(&client, q, &third[0].receipt(), &|n| {
        retry(n, Duration::ZERO, "again")
    })
    .await
    .unwrap();
    let again = claim(&client, q, 10, LONG).await;
    assert_eq!(delivered(&again), [keyed[2].id()]);
    assert!(ack(&client, q, &receipts(&again)).await.is_empty());
    assert_eq!(db.count("key_heads").await, 0);
    assert_eq!(db.count("blocked").await, 0);
    assert_eq!(ids_in(&db, "messages").await, [keyed[1].id()]);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    ack_returns_exactly_the_lost,
    an_ended_lease_cannot_be_acked,
    ack_in_own_transaction,
    ack_own_fills_its_mutex_before_committing,
    acks_committed_after_the_commit_only,
    the_largest_ack,
    fail_retries_as_decided,
    fail_dead_letters_or_loses_the_lease,
    error_history_keeps_the_last_entries,
    extend_only_a_live_lease,
    release_expired_leases,
    release_many_expired,
    release_owned_leases,
    the_longest_lease_never_expires,
    settling_a_head_moves_its_key_on,
]);
