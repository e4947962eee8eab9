//! The SQLite schema as embedded, versioned migrations.
//!
//! The tables and columns are those of the MySQL backend (see its `schema.rs` for what each
//! holds), in SQLite's types:
//!
//! - times are `INTEGER` microseconds since the Unix epoch, UTC (`now_us!`);
//! - ids are 16-byte `BLOB`s; keys, owners and members are `BLOB`s of UTF-8, compared byte for
//!   byte (`"a"` and `"a "` are different keys);
//! - queue, topic and group ids are `AUTOINCREMENT`, so that an id is never given twice, not
//!   even after its row is deleted (handles cache ids);
//! - tables keyed by a composite primary key are `WITHOUT ROWID`: the primary key is the
//!   table's order, as InnoDB's clustered index is, so the claim reads `ready` in claim order.
//!
//! There is no `topic_pending`: a record gets its offset in its publishing transaction.
//! A migration runs in one `BEGIN IMMEDIATE` transaction (SQLite's DDL is transactional), so two
//! processes migrating at once apply each version once.

use crate::store::rows::{Migration, Reverse};

/// The table that records applied versions.
pub(crate) const CREATE_MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS {p}schema_migrations (
    version INTEGER NOT NULL PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at INTEGER NOT NULL
)";

/// Record an applied version.
pub(crate) const RECORD_VERSION: &str = concat!(
    "INSERT OR IGNORE INTO {p}schema_migrations (version, description, applied_at) VALUES (?, ?, ",
    super::now_us!(),
    ")"
);

/// Every migration, in order. Never edit a released one: add a new version. The versions
/// match the MySQL backend's.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "queues",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}probe (id INTEGER NOT NULL PRIMARY KEY)",
            "INSERT OR IGNORE INTO {p}probe (id) VALUES (1)",
            "CREATE TABLE IF NOT EXISTS {p}queues (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            paused INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL,
            backoff TEXT NOT NULL,
            dedup_window_ms INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )",
            "CREATE TABLE IF NOT EXISTS {p}messages (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            ordering_key BLOB NULL,
            idempotency_key BLOB NULL,
            headers BLOB NULL,
            body BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            errors BLOB NULL
        ) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS {p}ready (
            queue_id INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            id BLOB NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL,
            PRIMARY KEY (queue_id, priority, id)
        ) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS {p}scheduled (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}scheduled_due ON {p}scheduled (queue_id, run_at, id)",
            "CREATE TABLE IF NOT EXISTS {p}leases (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            token INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            ordering_key BLOB NULL,
            lease_until INTEGER NOT NULL,
            claimed_at INTEGER NOT NULL,
            owner BLOB NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}leases_expiry ON {p}leases (queue_id, lease_until)",
            "CREATE TABLE IF NOT EXISTS {p}dead (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            token INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            died_at INTEGER NOT NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}dead_queue_died ON {p}dead (queue_id, died_at, id)",
            "CREATE TABLE IF NOT EXISTS {p}dedup (
            queue_id INTEGER NOT NULL,
            idempotency_key BLOB NOT NULL,
            id BLOB NOT NULL,
            expires_at INTEGER NOT NULL,
            PRIMARY KEY (queue_id, idempotency_key)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}dedup_expiry ON {p}dedup (expires_at)",
            "CREATE TABLE IF NOT EXISTS {p}key_heads (
            queue_id INTEGER NOT NULL,
            ordering_key BLOB NOT NULL,
            next_seq INTEGER NOT NULL,
            head_id BLOB NOT NULL,
            PRIMARY KEY (queue_id, ordering_key)
        ) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS {p}blocked (
            queue_id INTEGER NOT NULL,
            ordering_key BLOB NOT NULL,
            seq INTEGER NOT NULL,
            id BLOB NOT NULL UNIQUE,
            priority INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL,
            PRIMARY KEY (queue_id, ordering_key, seq)
        ) WITHOUT ROWID",
        ],
        reverse: Some(Reverse {
            drops: &[
                "blocked",
                "key_heads",
                "dedup",
                "dead",
                "leases",
                "scheduled",
                "ready",
                "messages",
                "queues",
                "probe",
            ],
            disposable: &["probe"],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 2,
        description: "worker processes",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}processes (
            id BLOB NOT NULL PRIMARY KEY,
            kind TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            queues TEXT NOT NULL,
            started_at INTEGER NOT NULL,
            heartbeat_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}processes_expiry ON {p}processes (expires_at)",
        ],
        reverse: Some(Reverse {
            drops: &["processes"],
            disposable: &["processes"],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 3,
        description: "topics",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}topics (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            partitions INTEGER NOT NULL,
            retention_ms INTEGER NULL,
            retention_bytes INTEGER NULL,
            retention_keeps_unconsumed INTEGER NOT NULL DEFAULT 0,
            strict_order INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        )",
            "CREATE TABLE IF NOT EXISTS {p}topic_partitions (
            topic_id INTEGER NOT NULL,
            partition_no INTEGER NOT NULL,
            next_offset INTEGER NOT NULL,
            low_offset INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            last_at INTEGER NOT NULL,
            PRIMARY KEY (topic_id, partition_no)
        ) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS {p}topic_log (
            topic_id INTEGER NOT NULL,
            partition_no INTEGER NOT NULL,
            msg_offset INTEGER NOT NULL,
            id BLOB NOT NULL UNIQUE,
            msg_key BLOB NULL,
            headers BLOB NULL,
            body BLOB NOT NULL,
            published_at INTEGER NOT NULL,
            sequenced_at INTEGER NOT NULL,
            PRIMARY KEY (topic_id, partition_no, msg_offset)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}topic_log_by_key ON {p}topic_log (topic_id, msg_key)",
            "CREATE TABLE IF NOT EXISTS {p}consumer_groups (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            topic_id INTEGER NOT NULL,
            name TEXT NOT NULL,
            mode INTEGER NOT NULL,
            max_attempts INTEGER NOT NULL,
            backoff TEXT NOT NULL,
            consume_timeout_ms INTEGER NULL,
            created_at INTEGER NOT NULL,
            UNIQUE (topic_id, name)
        )",
            "CREATE TABLE IF NOT EXISTS {p}group_cursors (
            group_id INTEGER NOT NULL,
            partition_no INTEGER NOT NULL,
            next_offset INTEGER NOT NULL,
            high_offset INTEGER NOT NULL,
            PRIMARY KEY (group_id, partition_no)
        ) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS {p}group_leases (
            group_id INTEGER NOT NULL,
            id BLOB NOT NULL,
            partition_no INTEGER NOT NULL,
            msg_offset INTEGER NOT NULL,
            token INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            lease_until INTEGER NOT NULL,
            claimed_at INTEGER NOT NULL,
            owner BLOB NULL,
            PRIMARY KEY (group_id, id)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}group_leases_expiry ON {p}group_leases (group_id, lease_until)",
            "CREATE INDEX IF NOT EXISTS {p}group_leases_part ON {p}group_leases (group_id, partition_no, msg_offset)",
            "CREATE TABLE IF NOT EXISTS {p}group_retries (
            group_id INTEGER NOT NULL,
            id BLOB NOT NULL,
            partition_no INTEGER NOT NULL,
            msg_offset INTEGER NOT NULL,
            run_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL,
            PRIMARY KEY (group_id, id)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}group_retries_due ON {p}group_retries (group_id, run_at, id)",
            "CREATE INDEX IF NOT EXISTS {p}group_retries_part ON {p}group_retries (group_id, partition_no, msg_offset)",
            "CREATE TABLE IF NOT EXISTS {p}group_dead (
            group_id INTEGER NOT NULL,
            id BLOB NOT NULL,
            partition_no INTEGER NOT NULL,
            msg_offset INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL,
            died_at INTEGER NOT NULL,
            PRIMARY KEY (group_id, id)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}group_dead_died ON {p}group_dead (group_id, died_at, id)",
            "CREATE TABLE IF NOT EXISTS {p}group_history (
            group_id INTEGER NOT NULL,
            partition_no INTEGER NOT NULL,
            msg_offset INTEGER NOT NULL,
            id BLOB NOT NULL,
            state INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL,
            settled_at INTEGER NOT NULL,
            events BLOB NOT NULL,
            PRIMARY KEY (group_id, partition_no, msg_offset)
        ) WITHOUT ROWID",
            "CREATE TABLE IF NOT EXISTS {p}group_positions (
            group_id INTEGER NOT NULL,
            member BLOB NOT NULL,
            partition_no INTEGER NOT NULL,
            next_offset INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (group_id, member, partition_no)
        ) WITHOUT ROWID",
        ],
        reverse: Some(Reverse {
            drops: &[
                "group_positions",
                "group_history",
                "group_dead",
                "group_retries",
                "group_leases",
                "group_cursors",
                "consumer_groups",
                "topic_log",
                "topic_partitions",
                "topics",
            ],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 4,
        description: "broadcast members' dead letters",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}member_dead (
            group_id INTEGER NOT NULL,
            member BLOB NOT NULL,
            id BLOB NOT NULL,
            partition_no INTEGER NOT NULL,
            msg_offset INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            died_at INTEGER NOT NULL,
            errors BLOB NOT NULL,
            PRIMARY KEY (group_id, member, id)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}member_dead_died ON {p}member_dead (group_id, died_at)",
            "CREATE INDEX IF NOT EXISTS {p}member_dead_record ON {p}member_dead (group_id, id)",
        ],
        reverse: Some(Reverse {
            drops: &["member_dead"],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 5,
        description: "recurring schedules",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}schedules (
            name TEXT NOT NULL PRIMARY KEY,
            spec TEXT NOT NULL,
            body BLOB NOT NULL,
            paused INTEGER NOT NULL DEFAULT 0,
            next_fire INTEGER NOT NULL,
            last_fired INTEGER,
            fired INTEGER NOT NULL DEFAULT 0,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}schedules_due ON {p}schedules (paused, next_fire)",
        ],
        reverse: Some(Reverse {
            drops: &["schedules"],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 6,
        description: "limits",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}queue_limits (
            queue_id INTEGER NOT NULL PRIMARY KEY,
            max_in_flight INTEGER,
            rate_count INTEGER,
            rate_window_us INTEGER,
            concurrency_limit INTEGER,
            key_rate_count INTEGER,
            key_rate_window_us INTEGER
        )",
            "CREATE TABLE IF NOT EXISTS {p}key_slots (
            queue_id INTEGER NOT NULL,
            slot_key BLOB NOT NULL,
            busy INTEGER NOT NULL,
            next_seq INTEGER NOT NULL,
            PRIMARY KEY (queue_id, slot_key)
        )",
            "CREATE TABLE IF NOT EXISTS {p}queue_deliveries (
            id INTEGER PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            slot_key BLOB NOT NULL DEFAULT X'',
            at_us INTEGER NOT NULL,
            n INTEGER NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS {p}queue_deliveries_recent ON {p}queue_deliveries (queue_id, slot_key, at_us)",
            "CREATE TABLE IF NOT EXISTS {p}group_limits (
            group_id INTEGER NOT NULL PRIMARY KEY,
            rate_count INTEGER NOT NULL,
            rate_window_us INTEGER NOT NULL
        )",
            "CREATE TABLE IF NOT EXISTS {p}group_deliveries (
            id INTEGER PRIMARY KEY,
            group_id INTEGER NOT NULL,
            at_us INTEGER NOT NULL,
            n INTEGER NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS {p}group_deliveries_recent ON {p}group_deliveries (group_id, at_us)",
        ],
        reverse: Some(Reverse {
            drops: &[
                "group_deliveries",
                "group_limits",
                "queue_deliveries",
                "key_slots",
                "queue_limits",
            ],
            disposable: &["group_deliveries", "queue_deliveries"],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 7,
        description: "workflows",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}batches (
            id BLOB NOT NULL PRIMARY KEY,
            state INTEGER NOT NULL,
            members INTEGER NOT NULL,
            pending INTEGER NOT NULL,
            succeeded INTEGER NOT NULL,
            dead INTEGER NOT NULL,
            cancelled INTEGER NOT NULL,
            created_us INTEGER NOT NULL,
            finished_us INTEGER
        )",
            "CREATE INDEX IF NOT EXISTS {p}batches_finished ON {p}batches (state, finished_us)",
            "CREATE TABLE IF NOT EXISTS {p}flow_nodes (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            batch_id BLOB,
            step BLOB,
            role INTEGER NOT NULL,
            waiting INTEGER NOT NULL,
            held INTEGER NOT NULL,
            state INTEGER NOT NULL,
            ended_us INTEGER
        )",
            "CREATE INDEX IF NOT EXISTS {p}flow_nodes_batch ON {p}flow_nodes (batch_id)",
            "CREATE INDEX IF NOT EXISTS {p}flow_nodes_ended ON {p}flow_nodes (state, ended_us)",
            "CREATE TABLE IF NOT EXISTS {p}flow_edges (
            parent BLOB NOT NULL,
            child BLOB NOT NULL,
            PRIMARY KEY (parent, child)
        )",
            "CREATE INDEX IF NOT EXISTS {p}flow_edges_child ON {p}flow_edges (child, parent)",
            "CREATE TABLE IF NOT EXISTS {p}waiting (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            priority INTEGER NOT NULL,
            delay_us INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            token INTEGER NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS {p}waiting_queue ON {p}waiting (queue_id, id)",
            "CREATE TABLE IF NOT EXISTS {p}results (
            id BLOB NOT NULL PRIMARY KEY,
            result BLOB NOT NULL,
            expires_us INTEGER NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS {p}results_expiry ON {p}results (expires_us)",
            "CREATE TABLE IF NOT EXISTS {p}flow_records (
            id BLOB NOT NULL PRIMARY KEY,
            batch_id BLOB NOT NULL,
            role INTEGER NOT NULL,
            topic_id INTEGER NOT NULL,
            partition_no INTEGER NOT NULL,
            record_key BLOB,
            headers BLOB,
            body BLOB NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS {p}flow_records_batch ON {p}flow_records (batch_id)",
        ],
        reverse: Some(Reverse {
            drops: &[
                "flow_records",
                "results",
                "waiting",
                "flow_edges",
                "flow_nodes",
                "batches",
            ],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 8,
        description: "send procedure",
        // MySQL's stored procedure; SQLite has none (its senders link the library).
        statements: &[],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 9,
        description: "one-statement send",
        // MySQL's internal send procedure; SQLite's sends are in process already.
        statements: &[],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 10,
        description: "one-statement claim and ack",
        // MySQL's internal claim and ack procedures; SQLite has no round trips to save.
        statements: &[],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 11,
        description: "one-statement group ack",
        // MySQL's internal group ack procedure; SQLite has no round trips to save.
        statements: &[],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 12,
        description: "the SQL contract's ack",
        // MySQL's `CALL sqlmq_ack`; SQLite has no stored procedures (and no other language's
        // transaction shares its file through a server).
        statements: &[],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 13,
        description: "durable execution",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}run_steps (
            message_id BLOB NOT NULL,
            seq INTEGER NOT NULL,
            name BLOB NOT NULL,
            kind INTEGER NOT NULL,
            state INTEGER NOT NULL,
            wake_at INTEGER,
            result BLOB,
            recorded_at INTEGER NOT NULL,
            PRIMARY KEY (message_id, seq)
        ) WITHOUT ROWID",
            "CREATE UNIQUE INDEX IF NOT EXISTS {p}run_steps_name ON {p}run_steps (message_id, kind, name)",
            "CREATE TABLE IF NOT EXISTS {p}events (
            name BLOB NOT NULL PRIMARY KEY,
            payload BLOB NOT NULL,
            emitted_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        )",
            "CREATE INDEX IF NOT EXISTS {p}events_expiry ON {p}events (expires_at)",
            "CREATE TABLE IF NOT EXISTS {p}event_waits (
            name BLOB NOT NULL,
            message_id BLOB NOT NULL,
            queue_id INTEGER NOT NULL,
            since INTEGER NOT NULL,
            PRIMARY KEY (name, message_id)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}event_waits_message ON {p}event_waits (message_id)",
        ],
        reverse: Some(Reverse {
            drops: &["event_waits", "events", "run_steps"],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 14,
        description: "control of running messages",
        // As on MySQL (`store/mysql/schema.rs`).
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}cancels (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            token INTEGER NOT NULL,
            lease_until INTEGER NOT NULL,
            cancelled_at INTEGER NOT NULL,
            reason BLOB NOT NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}cancels_expiry ON {p}cancels (queue_id, lease_until)",
            "CREATE TABLE IF NOT EXISTS {p}progress (
            id BLOB NOT NULL PRIMARY KEY,
            queue_id INTEGER NOT NULL,
            token INTEGER NOT NULL,
            value BLOB NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}progress_queue ON {p}progress (queue_id, id)",
        ],
        reverse: Some(Reverse {
            drops: &["progress", "cancels"],
            disposable: &[],
            procedures: &[],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 15,
        description: "deadlines",
        // As on MySQL (`store/mysql/schema.rs`): times in µs since the epoch.
        statements: &[
            "ALTER TABLE {p}messages ADD COLUMN deadline_at INTEGER NULL",
            "ALTER TABLE {p}messages ADD COLUMN run_timeout_us INTEGER NULL",
        ],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &[],
            columns: &[("messages", "deadline_at"), ("messages", "run_timeout_us")],
            indexes: &[],
        }),
    },
    Migration {
        version: 16,
        description: "fair queues",
        // As on MySQL (`store/mysql/schema.rs`), but `ready` keeps its primary key and a fair
        // queue's claims read an index (one writer at a time: no concurrent locking reads to
        // pay for), and without the procedure.
        statements: &[
            "ALTER TABLE {p}queues ADD COLUMN fair INTEGER NULL",
            "ALTER TABLE {p}messages ADD COLUMN fairness_key BLOB NULL",
            "ALTER TABLE {p}ready ADD COLUMN vt INTEGER NULL",
            "CREATE INDEX IF NOT EXISTS {p}ready_fair ON {p}ready (queue_id, priority, vt, id)",
            "CREATE TABLE IF NOT EXISTS {p}fair_keys (
            queue_id INTEGER NOT NULL,
            fairness_key BLOB NOT NULL,
            weight INTEGER NOT NULL,
            vt INTEGER NOT NULL,
            arrived INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (queue_id, fairness_key)
        ) WITHOUT ROWID",
            "CREATE INDEX IF NOT EXISTS {p}fair_keys_clock ON {p}fair_keys (queue_id, vt)",
        ],
        reverse: Some(Reverse {
            drops: &["fair_keys"],
            disposable: &[],
            procedures: &[],
            columns: &[
                ("queues", "fair"),
                ("messages", "fairness_key"),
                ("ready", "vt"),
            ],
            indexes: &["DROP INDEX IF EXISTS {p}ready_fair"],
        }),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "mysql")]
    fn versions_match_the_mysql_backend() {
        let mysql = crate::store::mysql::schema::MIGRATIONS;
        assert_eq!(MIGRATIONS.len(), mysql.len());
        for (i, (m, my)) in MIGRATIONS.iter().zip(mysql).enumerate() {
            assert_eq!(m.version, i as i64 + 1);
            assert_eq!((m.version, m.description), (my.version, my.description));
            for s in m.statements {
                let create = s.starts_with("CREATE");
                assert!(!create || s.contains(" IF NOT EXISTS "), "{s}");
            }
        }
    }

    #[test]
    fn released_migrations_are_unchanged() {
        use crate::store::body::checks;
        checks::released_are_unchanged(
            MIGRATIONS,
            &[
                0x27cbb3db5dae7337,
                0xd181e4c37062b44a,
                0x0999152a92c6366b,
                0xbb3b09e5d2fc3f5d,
            ],
        );
        checks::reverses_drop_what_was_created(MIGRATIONS);
    }
}
