//! EXPLAIN of every hot statement (docs/design/query-plans.md), on nearly empty tables and on populated ones.
//!
//! A locking read locks every index record it scans, so a plan that scans more than the rows it
//! returns turns into lock contention and deadlocks under load; a filesort in a claim makes the
//! first consumer lock every candidate. Each statement must use the index named here, with no
//! full scan, no filesort and no temporary table. MariaDB in particular may choose a full scan
//! for `IN (…)` lists when its statistics say a table is small, hence the first pass.

use std::time::Duration;

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, Executor, MySqlPool, Row, SqlStr};

use super::{admin, claim};
use crate::store::body::{self, Dialect, ErrorHistory};

/// The backend whose statements are checked.
type M = sqlx::MySql;
use crate::{Client, Message, QueueConfig};

/// One statement and the index its main table must be read through.
pub(super) struct Case {
    pub name: &'static str,
    pub sql: SqlStr,
    pub binds: Vec<Bind>,
    /// (table alias as EXPLAIN prints it, index)
    pub expect: (&'static str, &'static str),
}

#[derive(Clone)]
pub(super) enum Bind {
    Int(i64),
    Bytes(Vec<u8>),
}

pub(super) async fn explain(pool: &MySqlPool, case: &Case) -> Vec<MySqlRow> {
    let text = format!("EXPLAIN {}", case.sql.as_str());
    let mut q = sqlx::query(AssertSqlSafe(text));
    for b in &case.binds {
        q = match b {
            Bind::Int(i) => q.bind(*i),
            Bind::Bytes(v) => q.bind(v.clone()),
        };
    }
    q.fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN {}: {e}", case.name))
}

fn text(row: &MySqlRow, col: &str) -> String {
    row.try_get::<Option<String>, _>(col)
        .ok()
        .flatten()
        .unwrap_or_default()
}

pub(super) fn check(case: &Case, rows: &[MySqlRow], pass: &str) {
    let plan: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} key={} {}",
                text(r, "table"),
                text(r, "type"),
                text(r, "key"),
                text(r, "Extra")
            )
        })
        .collect();
    let context = format!("{} ({pass}): {plan:#?}", case.name);
    let mut main_seen = false;
    for r in rows {
        let (table, access, key, extra) = (
            text(r, "table"),
            text(r, "type"),
            text(r, "key"),
            text(r, "Extra"),
        );
        assert!(!extra.contains("filesort"), "filesort in {context}");
        assert!(!extra.contains("temporary"), "temporary table in {context}");
        // Materialized derived tables (a handful of rows) are read whole by design.
        let derived = table.starts_with("<derived");
        if !table.is_empty() && !derived {
            assert!(
                access != "ALL" && access != "index",
                "full scan in {context}"
            );
        }
        // Answered while planning (by primary/unique key lookups, or proven empty): no scan.
        if extra.starts_with("Impossible WHERE") || extra.contains("no matching row in const table")
        {
            main_seen = true;
        }
        if table == case.expect.0 || table == format!("sqlmq_{}", case.expect.0) {
            assert_eq!(key, case.expect.1, "index of {context}");
            main_seen = true;
        }
    }
    assert!(main_seen, "table {} missing from {context}", case.expect.0);
}

pub(super) fn id(n: u8) -> Bind {
    Bind::Bytes(vec![n; 16])
}

fn cases(client: &Client, q: i64) -> Vec<Case> {
    use Bind::Int;
    let st = &client.inner.db.store.st;
    let ids = |n: usize| (0..n).map(|i| id(i as u8)).collect::<Vec<_>>();
    let key = || Bind::Bytes(b"k".to_vec());
    let c = |name, sql, binds, expect| Case {
        name,
        sql,
        binds,
        expect,
    };
    let mut quads = Vec::new();
    for i in 0..4u8 {
        quads.extend([Int(q), Int(0), Int(0), id(i)]);
    }
    let dedup_keys = || vec![Int(q), key(), Int(q), key()];
    let ErrorHistory::InSql(append_error) = M::SETTLE.error_history else {
        unreachable!("MySQL appends to error histories in SQL")
    };
    let mut out = vec![
        c(
            "claim",
            st.get(claim::CLAIM),
            vec![Int(q), Int(q), Int(16)],
            ("r", "PRIMARY"),
        ),
        c(
            "fair: head",
            st.get(M::FAIR.head),
            vec![Int(q), Int(0)],
            ("ready", "PRIMARY"),
        ),
        c(
            "fair: latest",
            st.get(M::FAIR.latest),
            vec![Int(q)],
            ("fair_keys", "clock"),
        ),
        c(
            "claim: delete ready",
            st.list(claim::DELETE_CLAIMED, claim::CLAIMED_ROW, 4),
            quads,
            ("t", "PRIMARY"),
        ),
        c(
            "ack: lock leases",
            st.list(M::SETTLE.lock_leases, "?", 8),
            ids(8),
            ("leases", "PRIMARY"),
        ),
        c(
            "ack: delete leases",
            st.list(M::SETTLE.delete_leases, "?", 8),
            ids(8),
            ("t", "PRIMARY"),
        ),
        c(
            "ack: delete messages",
            st.list(M::SETTLE.delete_messages, "?", 8),
            ids(8),
            ("t", "PRIMARY"),
        ),
        c(
            "extend",
            st.get(M::SETTLE.extend),
            vec![Int(1000), id(1), Int(1), Int(q)],
            ("leases", "PRIMARY"),
        ),
        c(
            "nack: append error",
            st.get(append_error),
            vec![Int(1), Bind::Bytes(b"\"e\"".to_vec()), Int(-21), id(1)],
            ("messages", "PRIMARY"),
        ),
        c(
            "promote: any due",
            st.get(M::MAINTAIN.any_due),
            vec![Int(q)],
            ("scheduled", "due"),
        ),
        c(
            "promote: claim due",
            st.get(M::MAINTAIN.claim_due),
            vec![Int(q), Int(500)],
            ("scheduled", "due"),
        ),
        c(
            "promote: delete scheduled",
            st.list(M::MAINTAIN.delete_scheduled, "?", 4),
            ids(4),
            ("t", "PRIMARY"),
        ),
        c(
            "release: any expired",
            st.get(M::MAINTAIN.any_expired),
            vec![Int(q)],
            ("leases", "expiry"),
        ),
        c(
            "release: claim expired",
            st.get(M::MAINTAIN.claim_expired),
            vec![Int(q), Int(500)],
            ("leases", "expiry"),
        ),
        c(
            "cleanup: old idempotency keys",
            st.get(M::MAINTAIN.claim_old_keys),
            vec![Int(500)],
            ("dedup", "expiry"),
        ),
        c(
            "cleanup: delete idempotency keys",
            st.list(M::MAINTAIN.delete_keys, M::ENQUEUE.key_row, 2),
            dedup_keys(),
            ("t", "PRIMARY"),
        ),
        c(
            "send: find idempotency keys",
            st.list(M::ENQUEUE.select_keys, "?", 2),
            vec![Int(q), key(), key()],
            ("dedup", "PRIMARY"),
        ),
        c(
            "send: stale idempotency keys",
            st.list(M::ENQUEUE.forget_keys, M::ENQUEUE.key_row, 2),
            dedup_keys(),
            ("t", "PRIMARY"),
        ),
        c(
            "send: read key counters",
            st.list(M::KEYS.select_keys, "?", 2),
            vec![Int(q), key(), key()],
            ("key_heads", "PRIMARY"),
        ),
        c(
            "release key: lock",
            st.get(M::KEYS.lock_key),
            vec![Int(q), key()],
            ("key_heads", "PRIMARY"),
        ),
        c(
            "release key: next",
            st.get(M::KEYS.next_blocked),
            vec![Int(q), key()],
            ("blocked", "PRIMARY"),
        ),
        c(
            "release key: take next",
            st.get(body::keys::DELETE_BLOCKED_SEQ),
            vec![Int(q), key(), Int(1)],
            ("blocked", "PRIMARY"),
        ),
        c(
            "release key: set head",
            st.get(body::keys::SET_HEAD),
            vec![id(1), Int(q), key()],
            ("key_heads", "PRIMARY"),
        ),
        c(
            "release key: drop",
            st.get(body::keys::DELETE_KEY),
            vec![Int(q), key()],
            ("key_heads", "PRIMARY"),
        ),
        c(
            "repair keys",
            st.get(M::KEYS.orphaned_keys),
            vec![Int(q)],
            ("k", "PRIMARY"),
        ),
        c(
            "cancel: lock message",
            st.get(M::ADMIN.lock_message),
            vec![id(1)],
            ("messages", "PRIMARY"),
        ),
        c(
            "cancel: ready",
            st.list(admin::DELETE_READY, admin::READY_KEY_ROW, 1),
            vec![Int(q), Int(0), id(1)],
            ("t", "arrival"),
        ),
        c(
            "cancel: blocked",
            st.list(M::ADMIN.delete_blocked, "?", 2),
            ids(2),
            ("t", "id"),
        ),
        c(
            "cancel: dead",
            st.list(M::ADMIN.delete_dead, "?", 2),
            ids(2),
            ("t", "PRIMARY"),
        ),
        c(
            "purge: ready",
            st.get(M::ADMIN.purge_ready),
            vec![Int(q), Int(1000)],
            ("ready", "PRIMARY"),
        ),
        c(
            "stats: oldest ready",
            st.get(M::ADMIN.oldest_ready),
            vec![Int(q)],
            ("m", "PRIMARY"),
        ),
        c(
            "dead letters: list",
            st.get(M::DEAD.list),
            vec![Int(q), Int(100)],
            ("d", "queue_died"),
        ),
        c(
            "dead letters: claim all",
            st.get(M::DEAD.claim_oldest),
            vec![Int(q), Int(100)],
            ("d", "queue_died"),
        ),
        c(
            "dead letters: claim ids",
            st.list(M::DEAD.claim_ids, "?", 2),
            ids(2),
            ("d", "PRIMARY"),
        ),
        c(
            "queue by name",
            st.get(body::queues::BY_NAME),
            vec![Bind::Bytes(b"q".to_vec())],
            ("q", "name"),
        ),
        c(
            "queue by id",
            st.get(body::queues::BY_ID),
            vec![Int(q)],
            ("q", "PRIMARY"),
        ),
    ];
    let b = &M::BROWSE;
    let at = || Int(1_700_000_000_000_000);
    for (i, (alias, index)) in [
        ("r", "arrival"),
        ("s", "due"),
        ("b", "PRIMARY"),
        ("l", "expiry"),
    ]
    .into_iter()
    .enumerate()
    {
        out.push(c(
            "browse: first page",
            st.get(b.first[i]),
            vec![Int(q), Int(101)],
            (alias, index),
        ));
        let past = match alias {
            "r" => vec![Int(q), Int(0), Int(0), id(1), Int(101)],
            "b" => vec![Int(q), key(), key(), Int(3), Int(101)],
            _ => vec![Int(q), at(), at(), id(1), Int(101)],
        };
        out.push(c(
            "browse: a page past",
            st.get(b.after[i]),
            past,
            (alias, index),
        ));
    }
    out.push(c(
        "browse: one by id",
        st.get(b.find),
        vec![id(1), Int(q)],
        ("m", "PRIMARY"),
    ));
    out.push(c(
        "browse: ids by key",
        st.get(b.by_key),
        vec![Int(q), key(), Int(q), key(), Int(q), key(), Int(100)],
        ("key_heads", "PRIMARY"),
    ));
    let purge_expect = [
        ("scheduled", "due"),
        ("blocked", "PRIMARY"),
        ("leases", "expiry"),
        ("dead", "queue_died"),
    ];
    let purge_deletes = [
        M::MAINTAIN.delete_scheduled,
        M::ADMIN.delete_blocked,
        M::SETTLE.delete_leases,
        M::ADMIN.delete_dead,
    ];
    let purge = M::ADMIN.purge_by_id.into_iter().zip(purge_deletes);
    for ((select, delete), (table, index)) in purge.zip(purge_expect) {
        out.push(c(
            "purge: select",
            st.get(select),
            vec![Int(q), Int(1000)],
            (table, index),
        ));
        out.push(c(
            "purge: delete",
            st.list(delete, "?", 4),
            ids(4),
            ("t", if table == "blocked" { "id" } else { "PRIMARY" }),
        ));
    }
    out
}

async fn populate(client: &Client) {
    for name in ["a", "b", "c"] {
        let q = client
            .create_queue(name, QueueConfig::default().max_attempts(1))
            .await
            .unwrap();
        let batch: Vec<Message> = (0..3000)
            .map(|i| {
                let m = Message::new(format!("{i}")).priority((i % 3) as i16);
                match i % 10 {
                    0 => m.delay(Duration::from_secs(3600)),
                    1 => m.ordering_key(format!("k{}", i % 50)),
                    2 => m.idempotency_key(format!("id-{i}")),
                    _ => m,
                }
            })
            .collect();
        q.send_batch(batch).await.unwrap();
        let got = q.receive(600, Duration::from_secs(3600)).await.unwrap();
        for d in &got[..100] {
            q.nack(d.receipt(), None, "dead").await.unwrap();
        }
    }
}

/// A migrated client on a throwaway database of the test server (see `sqlmq-testkit`):
/// (database name, client). Drop it with [`sqlmq_testkit::drop_database`].
pub(super) async fn scratch() -> (String, Client) {
    let db = sqlmq_testkit::create_database().await;
    let admin = Client::connect(&sqlmq_testkit::admin_url_for(&db))
        .await
        .unwrap();
    admin.migrate().await.unwrap();
    admin.pool().close().await;
    let client = Client::connect(&sqlmq_testkit::url_for(&db)).await.unwrap();
    (db, client)
}

#[tokio::test]
async fn hot_statements_use_their_index_without_scans_or_sorts() {
    let (db, client) = scratch().await;
    let pool = client.pool().clone();

    // Pass 1: tiny tables with fresh statistics (the case where MariaDB likes full scans).
    let q = client
        .create_queue("a", QueueConfig::default())
        .await
        .unwrap();
    q.send(Message::new("x").ordering_key("k")).await.unwrap();
    let q_id = q.id() as i64;
    for case in cases(&client, q_id) {
        check(&case, &explain(&pool, &case).await, "tiny tables");
    }

    // Pass 2: thousands of rows in every state, statistics refreshed.
    populate(&client).await;
    let tables = [
        "messages",
        "ready",
        "scheduled",
        "leases",
        "dead",
        "dedup",
        "key_heads",
        "blocked",
        "queues",
    ];
    for t in tables {
        pool.execute(AssertSqlSafe(format!("ANALYZE TABLE sqlmq_{t}")))
            .await
            .unwrap();
    }
    for case in cases(&client, q_id) {
        check(&case, &explain(&pool, &case).await, "populated tables");
    }
    sqlmq_testkit::drop_database(&db).await;
}
