//! `store/body/enqueue.rs`: idempotency keys, message rows, and putting messages in line (`ready`,
//! `scheduled`, behind their ordering key); `ScriptedSend`, the one-round-trip send.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlmq_testkit::Value;

use super::{
    MAX_DATE_SPAN, SuiteBackend, entry, fixture, id_of, ids, ids_in, insert_rows, messages, queue,
    row_of, sorted,
};
use crate::domain::{Message, MessageId, micros_of};
use crate::store::rows::{Keyed, MessageRow, SendBatch};
use crate::store::statements::MAX_LIST;

/// More than one statement's worth of list elements.
const MANY: usize = MAX_LIST + 476;

/// Recorded keys are found with their message and whether their window is open; keys of
/// another queue and keys never recorded are not; an empty list asks nothing.
async fn record_and_find_keys<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let (a, b, c) = (MessageId::new(), MessageId::new(), MessageId::new());
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        store
            .recorded_keys(&mut conn, q, &[])
            .await
            .unwrap()
            .is_empty()
    );
    store
        .record_keys(
            &mut conn,
            q,
            &[("k1", a), ("k2", b)],
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    // A window of zero is over at once; the longest is capped, not an error.
    store
        .record_keys(&mut conn, q, &[("closed", c)], Duration::ZERO)
        .await
        .unwrap();
    store
        .record_keys(&mut conn, other, &[("k1", c)], Duration::MAX)
        .await
        .unwrap();
    store
        .record_keys(&mut conn, q, &[], Duration::MAX)
        .await
        .unwrap();

    let found = store
        .recorded_keys(&mut conn, q, &["k1", "k2", "closed", "never", "K1"])
        .await
        .unwrap();
    let expected: HashMap<String, (MessageId, bool)> = [
        ("k1".to_owned(), (a, true)),
        ("k2".to_owned(), (b, true)),
        ("closed".to_owned(), (c, false)),
    ]
    .into();
    assert_eq!(found, expected);
    let found = store
        .recorded_keys(&mut conn, other, &["k1"])
        .await
        .unwrap();
    assert_eq!(found, HashMap::from([("k1".to_owned(), (c, true))]));
    drop(conn);
    assert_eq!(db.count("dedup").await, 4);
    db.drop().await;
}

/// Forgetting keys removes only those whose window has passed, of that queue; unknown keys
/// and an empty list are no error.
async fn forget_only_closed_keys<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let mut conn = client.pool().acquire().await.unwrap();
    let id = MessageId::new();
    store
        .record_keys(&mut conn, q, &[("open", id)], Duration::from_secs(60))
        .await
        .unwrap();
    store
        .record_keys(&mut conn, q, &[("closed", id)], Duration::ZERO)
        .await
        .unwrap();
    store
        .record_keys(&mut conn, other, &[("closed", id)], Duration::ZERO)
        .await
        .unwrap();
    store.forget_keys(&mut conn, q, &[]).await.unwrap();
    store
        .forget_keys(&mut conn, q, &["open", "closed", "never"])
        .await
        .unwrap();
    let left = store
        .recorded_keys(&mut conn, q, &["open", "closed"])
        .await
        .unwrap();
    assert_eq!(left.keys().collect::<Vec<_>>(), ["open"]);
    let left = store
        .recorded_keys(&mut conn, other, &["closed"])
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "the other queue's key stays");
    drop(conn);
    assert_eq!(db.count("dedup").await, 2);
    db.drop().await;
}

/// More keys than one statement carries: recorded, found and forgotten in chunks.
async fn keys_in_chunks<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let names: Vec<String> = (0..MANY).map(|i| format!("key-{i}")).collect();
    let open: Vec<(&str, MessageId)> = names[..MANY / 2]
        .iter()
        .map(|k| (k.as_str(), MessageId::new()))
        .collect();
    let closed: Vec<(&str, MessageId)> = names[MANY / 2..]
        .iter()
        .map(|k| (k.as_str(), MessageId::new()))
        .collect();
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .record_keys(&mut conn, q, &open, Duration::from_secs(60))
        .await
        .unwrap();
    store
        .record_keys(&mut conn, q, &closed, Duration::ZERO)
        .await
        .unwrap();
    let found = store.recorded_keys(&mut conn, q, &all).await.unwrap();
    assert_eq!(found.len(), MANY);
    for (key, id) in &open {
        assert_eq!(found[*key], (*id, true), "{key}");
    }
    for (key, id) in &closed {
        assert_eq!(found[*key], (*id, false), "{key}");
    }
    store.forget_keys(&mut conn, q, &all).await.unwrap();
    let found = store.recorded_keys(&mut conn, q, &all).await.unwrap();
    assert_eq!(found.len(), open.len());
    assert!(found.values().all(|&(_, open)| open));
    drop(conn);
    assert_eq!(db.count("dedup").await, open.len() as i64);
    db.drop().await;
}

/// A key recorded already fails the statement that records it again with a duplicate-key
/// error, and that statement wrote nothing (not even its other keys); the transaction goes on.
async fn recording_a_recorded_key_fails_and_writes_nothing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let first = MessageId::new();
    let mut conn = client.pool().acquire().await.unwrap();
    store
        .record_keys(&mut conn, q, &[("taken", first)], Duration::from_secs(60))
        .await
        .unwrap();
    drop(conn);

    let mut tx = client.begin().await.unwrap();
    store
        .record_keys(
            &mut tx,
            q,
            &[("before", MessageId::new())],
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let err = store
        .record_keys(
            &mut tx,
            q,
            &[("fresh", MessageId::new()), ("taken", MessageId::new())],
            Duration::from_secs(60),
        )
        .await
        .unwrap_err();
    assert!(err.is_duplicate_key(), "{err}");
    let seen = store
        .recorded_keys(&mut tx, q, &["before", "fresh", "taken"])
        .await
        .unwrap();
    let mut keys: Vec<&String> = seen.keys().collect();
    keys.sort();
    assert_eq!(keys, ["before", "taken"]);
    assert_eq!(
        seen["taken"].0, first,
        "the recorded key still names its message"
    );
    tx.commit().await.unwrap();
    assert_eq!(db.count("dedup").await, 2);
    db.drop().await;
}

/// A statement inserting an id stored already fails with a duplicate-key error and inserts
/// none of its rows; what the transaction inserted before stays, and it can commit.
async fn inserting_a_stored_id_fails_and_inserts_nothing<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let stored = Message::new("stored");
    let mut tx = client.begin().await.unwrap();
    store.insert_messages(&mut tx, q, &[]).await.unwrap();
    store
        .insert_messages(&mut tx, q, &[(&stored, None)])
        .await
        .unwrap();
    let (b, c) = (Message::new("b"), Message::new("c"));
    let again = Message::new("again").with_id(stored.id());
    let rows: Vec<MessageRow<'_>> = vec![(&b, None), (&again, Some("{\"h\":\"v\"}")), (&c, None)];
    let err = store.insert_messages(&mut tx, q, &rows).await.unwrap_err();
    assert!(err.is_duplicate_key(), "{err}");
    let seen = store
        .stored_messages(&mut tx, &[stored.id(), b.id(), c.id()])
        .await
        .unwrap();
    assert_eq!(seen, HashSet::from([stored.id()]));
    tx.commit().await.unwrap();
    assert_eq!(ids_in(&db, "messages").await, [stored.id()]);
    // The stored row is the first one, untouched.
    let body = db
        .query("SELECT body FROM sqlmq_messages", &[])
        .await
        .remove(0)
        .remove(0);
    assert_eq!(body.text(), "stored");
    db.drop().await;
}

/// The largest statement (one list of `MAX_LIST` rows) inserts every row, with the columns
/// given.
async fn insert_the_largest_statement<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs: Vec<Message> = (0..MAX_LIST)
        .map(|i| {
            Message::new(vec![i as u8; i % 7])
                .priority((i % 5) as i16 - 2)
                .ordering_key(format!("o{i}"))
                .idempotency_key(format!("i{i}"))
        })
        .collect();
    let headers = "{\"k\":\"v\"}";
    let rows: Vec<MessageRow<'_>> = msgs.iter().map(|m| (m, Some(headers))).collect();
    let mut tx = client.begin().await.unwrap();
    store.insert_messages(&mut tx, q, &rows).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(db.count("messages").await, MAX_LIST as i64);
    for i in [0, 1, 513, MAX_LIST - 1] {
        let row = row_of(&db, "messages", "queue_id, priority", msgs[i].id())
            .await
            .unwrap();
        assert_eq!(row, [i64::from(q), (i % 5) as i64 - 2], "row {i}");
    }
    db.drop().await;
}

/// Which ids are stored: none of an empty list; every one of more ids than a statement
/// carries, and none of the ids that are not.
async fn stored_messages_and_their_count<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", MANY);
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        store
            .stored_messages(&mut conn, &[])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.count_stored_messages(&mut conn, &[]).await.unwrap(),
        0
    );
    drop(conn);

    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, &msgs).await;
    // The transaction sees its own rows.
    let own = store.stored_messages(&mut tx, &ids(&msgs)).await.unwrap();
    assert_eq!(own.len(), MANY);
    tx.commit().await.unwrap();

    let unknown: Vec<MessageId> = (0..10).map(|_| MessageId::new()).collect();
    let mut asked = ids(&msgs);
    asked.extend(&unknown);
    let mut conn = client.pool().acquire().await.unwrap();
    let stored = store.stored_messages(&mut conn, &asked).await.unwrap();
    assert_eq!(stored, ids(&msgs).into_iter().collect::<HashSet<_>>());
    assert_eq!(
        store
            .count_stored_messages(&mut conn, &asked)
            .await
            .unwrap(),
        MANY
    );
    assert!(
        store
            .stored_messages(&mut conn, &unknown)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .count_stored_messages(&mut conn, &unknown)
            .await
            .unwrap(),
        0
    );
    // Exactly one chunk, and one past it.
    assert_eq!(
        store
            .count_stored_messages(&mut conn, &asked[..MAX_LIST])
            .await
            .unwrap(),
        MAX_LIST
    );
    assert_eq!(
        store
            .count_stored_messages(&mut conn, &asked[..MAX_LIST + 1])
            .await
            .unwrap(),
        MAX_LIST + 1
    );
    drop(conn);
    db.drop().await;
}

/// A delay of zero or less puts a message in `ready`, a positive one in `scheduled` (the
/// longest capped, never due); attempts and token are kept; an empty list places nothing.
async fn place_by_delay<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 6);
    let delays = [
        0,
        -1,
        i64::MIN,
        1_000_000,
        3_600_000_000,
        micros_of(Duration::MAX),
    ];
    assert_eq!(delays[5], micros_of(MAX_DATE_SPAN));
    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, &msgs).await;
    store.place(&mut tx, q, &[]).await.unwrap();
    let entries: Vec<_> = msgs
        .iter()
        .zip(delays)
        .enumerate()
        .map(|(i, (m, d))| {
            let mut e = entry(m);
            e.attempts = i as i32;
            e.token = 10 + i as i64;
            (e, d)
        })
        .collect();
    store.place(&mut tx, q, &entries).await.unwrap();
    tx.commit().await.unwrap();

    assert_eq!(ids_in(&db, "ready").await, sorted(ids(&msgs[..3])));
    assert_eq!(ids_in(&db, "scheduled").await, sorted(ids(&msgs[3..])));
    for (i, m) in msgs.iter().enumerate() {
        let table = if i < 3 { "ready" } else { "scheduled" };
        let row = row_of(&db, table, "queue_id, attempts, token", m.id())
            .await
            .unwrap();
        assert_eq!(row, [i64::from(q), i as i64, 10 + i as i64], "{i}");
    }
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(!store.any_due(&mut conn, q).await.unwrap());
    assert_eq!(store.promote_due(&mut conn, q, 10).await.unwrap(), 0);
    drop(conn);
    db.drop().await;
}

/// More entries than one statement carries go where their delays say.
async fn place_many<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 2 * MANY);
    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, &msgs).await;
    let entries: Vec<_> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| (entry(m), if i % 2 == 0 { 0 } else { 60_000_000 }))
        .collect();
    store.place(&mut tx, q, &entries).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(db.count("ready").await, MANY as i64);
    assert_eq!(db.count("scheduled").await, MANY as i64);
    let even: Vec<MessageId> = msgs.iter().step_by(2).map(Message::id).collect();
    assert_eq!(ids_in(&db, "ready").await, sorted(even));
    db.drop().await;
}

/// The blocked messages of `key` in queue `q`, in their order.
async fn blocked_of<B: SuiteBackend>(
    db: &sqlmq_testkit::TestDb<B>,
    q: i32,
    key: &str,
) -> Vec<MessageId> {
    db.query(
        "SELECT id FROM sqlmq_blocked WHERE queue_id = ? AND ordering_key = ? ORDER BY seq",
        &[Value::from(q), Value::from(key.as_bytes())],
    )
    .await
    .iter()
    .map(|r| id_of(&r[0]))
    .collect()
}

/// The first message of a key becomes its head (`ready`, or `scheduled` when delayed) and the
/// rest wait in `blocked`, in order; later messages of a key that has a head wait behind
/// those; keys are per queue; an empty list does nothing.
async fn keyed_messages_line_up_behind_their_head<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let (q, other) = (queue(&client, "q").await, queue(&client, "other").await);
    let k = messages("k", 4);
    let j = messages("j", 1);
    let late = messages("late", 2);
    let o = messages("o", 1);
    let keyed = |m: &Message, key: &str, delay_us: i64| Keyed {
        key: key.to_owned(),
        entry: entry(m),
        delay_us,
    };

    let mut tx = client.begin().await.unwrap();
    for (queue_id, batch) in [(q, &k), (q, &j), (q, &late), (other, &o)] {
        insert_rows(&client, &mut tx, queue_id, batch).await;
    }
    store.enqueue_keyed(&mut tx, q, Vec::new()).await.unwrap();
    // Interleaved keys in one batch; the head of "late" is delayed.
    store
        .enqueue_keyed(
            &mut tx,
            q,
            vec![
                keyed(&k[0], "k", 0),
                keyed(&j[0], "j", 0),
                keyed(&k[1], "k", 0),
                keyed(&late[0], "late", 3_600_000_000),
                keyed(&k[2], "k", -5),
                keyed(&late[1], "late", 0),
            ],
        )
        .await
        .unwrap();
    store
        .enqueue_keyed(&mut tx, q, vec![keyed(&k[3], "k", 0)])
        .await
        .unwrap();
    // The same key in another queue is another key.
    store
        .enqueue_keyed(&mut tx, other, vec![keyed(&o[0], "k", 0)])
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(
        ids_in(&db, "ready").await,
        sorted(vec![k[0].id(), j[0].id(), o[0].id()])
    );
    assert_eq!(ids_in(&db, "scheduled").await, [late[0].id()]);
    assert_eq!(blocked_of(&db, q, "k").await, ids(&k[1..]));
    assert_eq!(blocked_of(&db, q, "late").await, [late[1].id()]);
    assert!(blocked_of(&db, q, "j").await.is_empty());
    assert!(blocked_of(&db, other, "k").await.is_empty());
    assert_eq!(db.count("key_heads").await, 4);
    let heads = db
        .query(
            "SELECT head_id FROM sqlmq_key_heads WHERE queue_id = ? ORDER BY ordering_key",
            &[Value::from(q)],
        )
        .await;
    let heads: Vec<MessageId> = heads.iter().map(|r| id_of(&r[0])).collect();
    assert_eq!(heads, [j[0].id(), k[0].id(), late[0].id()]);
    db.drop().await;
}

/// More keyed messages than one statement carries, over more keys than one list: each key's
/// first message is its head, the others wait in order.
async fn keyed_messages_in_chunks<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    let msgs = messages("m", 2 * MANY);
    let mut tx = client.begin().await.unwrap();
    insert_rows(&client, &mut tx, q, &msgs).await;
    // Message i has key i % MANY: MANY keys, two messages each.
    let items = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| Keyed {
            key: format!("key-{}", i % MANY),
            entry: entry(m),
            delay_us: 0,
        })
        .collect();
    store.enqueue_keyed(&mut tx, q, items).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids_in(&db, "ready").await, sorted(ids(&msgs[..MANY])));
    assert_eq!(ids_in(&db, "blocked").await, sorted(ids(&msgs[MANY..])));
    assert_eq!(db.count("key_heads").await, MANY as i64);
    db.drop().await;
}

/// A batch for queue `q` with a roomy statement budget.
fn batch(queue_id: i32, messages: &[Message]) -> SendBatch<'_> {
    SendBatch {
        queue_id,
        dedup_window: Duration::ZERO,
        messages,
        budget: 1 << 20,
    }
}

/// The one-round-trip send: only a batch of plain messages qualifies (none with an
/// idempotency key, an ordering key or a delay; not an empty one); where the backend has the
/// path, it commits by itself, the messages ready with what they carry, and a batch with an
/// id stored already fails with a duplicate-key error and writes nothing.
async fn scripted_send<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    let q = queue(&client, "q").await;
    for unfit in [
        vec![],
        vec![Message::new("a"), Message::new("k").idempotency_key("i")],
        vec![Message::new("o").ordering_key("o")],
        vec![Message::new("d").delay(Duration::from_millis(1))],
    ] {
        assert!(
            <B as crate::store::ScriptedSend>::prepare_send_script(store, &batch(q, &unfit))
                .unwrap()
                .is_none()
        );
    }
    let msgs = vec![
        Message::new("it's; DROP TABLE x; --").priority(3),
        Message::new(vec![0u8, b'\'', b'\\', 255]).header("h", "v\"\n"),
    ];
    let Some(script) =
        <B as crate::store::ScriptedSend>::prepare_send_script(store, &batch(q, &msgs)).unwrap()
    else {
        // This backend has no such path: the engine sends in a transaction.
        db.drop().await;
        return;
    };
    let mut conn = client.pool().acquire().await.unwrap();
    <B as crate::store::ScriptedSend>::send_script(store, &mut conn, &script)
        .await
        .unwrap();
    drop(conn);
    assert_eq!(ids_in(&db, "ready").await, sorted(ids(&msgs)));
    let got = super::claim(&client, q, 10, super::LONG).await;
    assert_eq!(super::delivered(&got), [msgs[1].id(), msgs[0].id()]);
    assert_eq!(got[0].body, [0u8, b'\'', b'\\', 255]);
    assert_eq!(got[0].headers["h"], "v\"\n");
    assert_eq!(
        (got[1].body.as_slice(), got[1].priority),
        (&b"it's; DROP TABLE x; --"[..], 3)
    );

    // One new message beside a stored one: nothing is written, and the connection is usable.
    let again = vec![
        Message::new("new"),
        Message::new("dup").with_id(msgs[0].id()),
    ];
    let script = <B as crate::store::ScriptedSend>::prepare_send_script(store, &batch(q, &again))
        .unwrap()
        .unwrap();
    let mut conn = client.pool().acquire().await.unwrap();
    let err = <B as crate::store::ScriptedSend>::send_script(store, &mut conn, &script)
        .await
        .unwrap_err();
    assert!(err.is_duplicate_key(), "{err}");
    let stored = store
        .stored_messages(&mut conn, &ids(&again))
        .await
        .unwrap();
    assert_eq!(stored, HashSet::from([msgs[0].id()]));
    drop(conn);
    assert_eq!(db.count("messages").await, 2);
    assert_eq!(db.count("ready").await, 0);
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    record_and_find_keys,
    forget_only_closed_keys,
    keys_in_chunks,
    recording_a_recorded_key_fails_and_writes_nothing,
    inserting_a_stored_id_fails_and_inserts_nothing,
    insert_the_largest_statement,
    stored_messages_and_their_count,
    place_by_delay,
    place_many,
    keyed_messages_line_up_behind_their_head,
    keyed_messages_in_chunks,
    scripted_send,
]);
