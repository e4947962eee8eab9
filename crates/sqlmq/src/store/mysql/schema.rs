//! The MySQL/MariaDB schema as embedded, versioned migrations.
//!
//! Layout (one row per message per state, Solid Queue style; each table small and narrow so that
//! the hot statements touch few index entries):
//!
//! | table | holds | key used by the hot path |
//! |---|---|---|
//! | `queues` | one row per queue: config, paused flag | `name` (unique) |
//! | `messages` | body, headers, keys, error history: written at send, read at claim, deleted at ack | `id` |
//! | `ready` | messages that can be claimed now; `vt`: a fair queue's virtual start time (0 in other queues) | PK `(queue_id, priority, vt, id)` = claim order; `arrival (queue_id, priority, id)` |
//! | `scheduled` | delayed messages and retries waiting for their time | `(queue_id, run_at, id)` |
//! | `leases` | claimed messages: fencing token, lease end | `id`; `(queue_id, lease_until)` for expiry |
//! | `dead` | dead letters | `(queue_id, died_at, id)` |
//! | `dedup` | idempotency keys within their window | PK `(queue_id, idempotency_key)` |
//! | `key_heads` | per ordering key: the head message and a sequence counter | PK `(queue_id, ordering_key)` |
//! | `blocked` | keyed messages waiting for their predecessors | PK `(queue_id, ordering_key, seq)` |
//! | `processes` | live worker processes and their heartbeats | PK `id`; `expires_at` |
//! | `topics` | one row per topic: partitions, retention, strict order | `name` (unique) |
//! | `topic_partitions` | per partition: next offset (the counter), first retained offset, bytes | PK |
//! | `topic_pending` | published, not yet sequenced (no offset yet) | PK `(topic_id, partition_no, id)` |
//! | `topic_log` | the stream: offsets dense per partition | PK `(topic_id, partition_no, msg_offset)` |
//! | `consumer_groups` | consumer groups: mode, retry ladder, dead-letter threshold | `(topic_id, name)` |
//! | `group_cursors` | cluster groups: next offset to hand out, per partition | PK |
//! | `group_leases`, `group_retries`, `group_dead` | cluster groups: in flight, waiting to retry, dead | PK `(group_id, id)` |
//! | `group_history` | per group and message: deliveries, state, errors (trace) | PK `(group_id, partition_no, msg_offset)` |
//! | `group_positions` | broadcast members' checkpointed positions | PK `(group_id, member, partition_no)` |
//! | `member_dead` | broadcast members' dead letters (each member keeps its own) | PK `(group_id, member, id)` |
//! | `queue_limits` | a limited queue's most in flight and rate (absent: no limit) | PK `queue_id` |
//! | `queue_deliveries` | a rate-limited queue's recent claims: when, how many (the whole queue, or one concurrency key) | `(queue_id, slot_key, at_us)` |
//! | `group_limits`, `group_deliveries` | a rate-limited cluster group's limit and recent claims | PK `group_id`; `(group_id, at_us)` |
//! | `key_slots` | per concurrency key: messages admitted, a sequence counter for those waiting in `blocked` | PK `(queue_id, slot_key)` |
//! | `batches` | batches and workflows: state, member counts by outcome, created and finished times | PK `id` |
//! | `flow_nodes` | per tracked message (a batch's member or callback, a dependency, a dependant): batch, step, unmet and dead dependencies, outcome | PK `id`; `batch_id` |
//! | `flow_edges` | dependencies: parent, child | PK `(parent, child)`; `(child, parent)` |
//! | `waiting` | messages waiting for their dependencies or their batch (callbacks) | PK `id` |
//! | `results` | results acks left, until they expire | PK `id`; `expires_us` |
//! | `flow_records` | batches' callbacks to topics, until the batch finishes | PK `id`; `batch_id` |
//! | `schedules` | recurring schedules: configuration, next and last fire time (µs, database clock) | PK `name`; `(paused, next_fire)` |
//! | `run_steps` | a durable run's journal: its steps, sleeps and event waits in order, with results | PK `(message_id, seq)`; unique `(message_id, kind, name)` |
//! | `events` | events emitted for durable runs, until their retention ends | PK `name`; `expires_at` |
//! | `event_waits` | which suspended runs wait for which event | PK `(name, message_id)`; `message_id` |
//! | `fair_keys` | a fair queue's keys: weight, the last virtual time given | PK `(queue_id, fairness_key)`; `(queue_id, vt)` |
//!
//! Every message is in exactly one of `ready`, `scheduled`, `leases`, `dead`, `blocked`,
//! `waiting`.
//! Keys are `VARBINARY`: `utf8mb4_bin` is a PAD SPACE collation on MySQL, under which `"a"` and
//! `"a "` would be the same key for the database but not for Rust.
//! Migrations use `IF NOT EXISTS` forms so that two processes migrating at once are harmless
//! (MySQL DDL is not transactional).

use crate::store::rows::{Migration, Reverse};

/// The table that records applied versions.
pub(crate) const CREATE_MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS {p}schema_migrations (
    version BIGINT NOT NULL PRIMARY KEY,
    description VARCHAR(255) NOT NULL,
    applied_at DATETIME(6) NOT NULL
) ENGINE=InnoDB";

/// Record an applied version (IGNORE: a concurrent migrator may have recorded it first).
pub(crate) const RECORD_VERSION: &str = "INSERT IGNORE INTO {p}schema_migrations \
    (version, description, applied_at) VALUES (?, ?, UTC_TIMESTAMP(6))";

/// Every migration, in order. Never edit a released one: add a new version.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "queues",
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}probe (
            id INT NOT NULL PRIMARY KEY
        ) ENGINE=InnoDB",
            "INSERT IGNORE INTO {p}probe (id) VALUES (1)",
            "CREATE TABLE IF NOT EXISTS {p}queues (
            id INT NOT NULL AUTO_INCREMENT,
            name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            paused TINYINT NOT NULL DEFAULT 0,
            max_attempts INT NOT NULL,
            backoff VARCHAR(4096) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            dedup_window_ms BIGINT NOT NULL,
            created_at DATETIME(6) NOT NULL,
            updated_at DATETIME(6) NOT NULL,
            PRIMARY KEY (id),
            UNIQUE KEY name (name)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}messages (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            priority SMALLINT NOT NULL,
            ordering_key VARBINARY(128) NULL,
            idempotency_key VARBINARY(128) NULL,
            headers BLOB NULL,
            body MEDIUMBLOB NOT NULL,
            created_at DATETIME(6) NOT NULL,
            errors MEDIUMBLOB NULL,
            PRIMARY KEY (id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}ready (
            queue_id INT NOT NULL,
            priority SMALLINT NOT NULL,
            id BINARY(16) NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            PRIMARY KEY (queue_id, priority, id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}scheduled (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            priority SMALLINT NOT NULL,
            run_at DATETIME(6) NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            PRIMARY KEY (id),
            KEY due (queue_id, run_at, id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}leases (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            priority SMALLINT NOT NULL,
            token BIGINT NOT NULL,
            attempts INT NOT NULL,
            ordering_key VARBINARY(128) NULL,
            lease_until DATETIME(6) NOT NULL,
            claimed_at DATETIME(6) NOT NULL,
            owner VARBINARY(255) NULL,
            PRIMARY KEY (id),
            KEY expiry (queue_id, lease_until)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}dead (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            priority SMALLINT NOT NULL,
            token BIGINT NOT NULL,
            attempts INT NOT NULL,
            died_at DATETIME(6) NOT NULL,
            PRIMARY KEY (id),
            KEY queue_died (queue_id, died_at, id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}dedup (
            queue_id INT NOT NULL,
            idempotency_key VARBINARY(128) NOT NULL,
            id BINARY(16) NOT NULL,
            expires_at DATETIME(6) NOT NULL,
            PRIMARY KEY (queue_id, idempotency_key),
            KEY expiry (expires_at)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}key_heads (
            queue_id INT NOT NULL,
            ordering_key VARBINARY(128) NOT NULL,
            next_seq BIGINT NOT NULL,
            head_id BINARY(16) NOT NULL,
            PRIMARY KEY (queue_id, ordering_key)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}blocked (
            queue_id INT NOT NULL,
            ordering_key VARBINARY(128) NOT NULL,
            seq BIGINT NOT NULL,
            id BINARY(16) NOT NULL,
            priority SMALLINT NOT NULL,
            run_at DATETIME(6) NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            PRIMARY KEY (queue_id, ordering_key, seq),
            UNIQUE KEY id (id)
        ) ENGINE=InnoDB",
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
        statements: &["CREATE TABLE IF NOT EXISTS {p}processes (
            id VARBINARY(255) NOT NULL,
            kind VARCHAR(32) NOT NULL,
            host VARCHAR(255) NOT NULL,
            pid INT NOT NULL,
            queues VARCHAR(4096) NOT NULL,
            started_at DATETIME(6) NOT NULL,
            heartbeat_at DATETIME(6) NOT NULL,
            expires_at DATETIME(6) NOT NULL,
            PRIMARY KEY (id),
            KEY expiry (expires_at)
        ) ENGINE=InnoDB"],
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
            id INT NOT NULL AUTO_INCREMENT,
            name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            partitions INT NOT NULL,
            retention_ms BIGINT NULL,
            retention_bytes BIGINT NULL,
            retention_keeps_unconsumed TINYINT NOT NULL DEFAULT 0,
            strict_order TINYINT NOT NULL DEFAULT 0,
            created_at DATETIME(6) NOT NULL,
            updated_at DATETIME(6) NOT NULL,
            PRIMARY KEY (id),
            UNIQUE KEY name (name)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}topic_partitions (
            topic_id INT NOT NULL,
            partition_no INT NOT NULL,
            next_offset BIGINT NOT NULL,
            low_offset BIGINT NOT NULL,
            bytes BIGINT NOT NULL,
            last_at DATETIME(6) NOT NULL,
            PRIMARY KEY (topic_id, partition_no)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}topic_pending (
            topic_id INT NOT NULL,
            partition_no INT NOT NULL,
            id BINARY(16) NOT NULL,
            msg_key VARBINARY(255) NULL,
            headers BLOB NULL,
            body MEDIUMBLOB NOT NULL,
            published_at DATETIME(6) NOT NULL,
            PRIMARY KEY (topic_id, partition_no, id),
            UNIQUE KEY id (id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}topic_log (
            topic_id INT NOT NULL,
            partition_no INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            id BINARY(16) NOT NULL,
            msg_key VARBINARY(255) NULL,
            headers BLOB NULL,
            body MEDIUMBLOB NOT NULL,
            published_at DATETIME(6) NOT NULL,
            sequenced_at DATETIME(6) NOT NULL,
            PRIMARY KEY (topic_id, partition_no, msg_offset),
            UNIQUE KEY id (id),
            KEY by_key (topic_id, msg_key)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}consumer_groups (
            id INT NOT NULL AUTO_INCREMENT,
            topic_id INT NOT NULL,
            name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            mode TINYINT NOT NULL,
            max_attempts INT NOT NULL,
            backoff VARCHAR(4096) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            consume_timeout_ms BIGINT NULL,
            created_at DATETIME(6) NOT NULL,
            PRIMARY KEY (id),
            UNIQUE KEY topic_name (topic_id, name)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_cursors (
            group_id INT NOT NULL,
            partition_no INT NOT NULL,
            next_offset BIGINT NOT NULL,
            high_offset BIGINT NOT NULL,
            PRIMARY KEY (group_id, partition_no)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_leases (
            group_id INT NOT NULL,
            id BINARY(16) NOT NULL,
            partition_no INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            token BIGINT NOT NULL,
            attempts INT NOT NULL,
            lease_until DATETIME(6) NOT NULL,
            claimed_at DATETIME(6) NOT NULL,
            owner VARBINARY(255) NULL,
            PRIMARY KEY (group_id, id),
            KEY expiry (group_id, lease_until),
            KEY part (group_id, partition_no, msg_offset)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_retries (
            group_id INT NOT NULL,
            id BINARY(16) NOT NULL,
            partition_no INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            run_at DATETIME(6) NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            PRIMARY KEY (group_id, id),
            KEY due (group_id, run_at, id),
            KEY part (group_id, partition_no, msg_offset)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_dead (
            group_id INT NOT NULL,
            id BINARY(16) NOT NULL,
            partition_no INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            died_at DATETIME(6) NOT NULL,
            PRIMARY KEY (group_id, id),
            KEY died (group_id, died_at, id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_history (
            group_id INT NOT NULL,
            partition_no INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            id BINARY(16) NOT NULL,
            state TINYINT NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            settled_at DATETIME(6) NOT NULL,
            events MEDIUMBLOB NOT NULL,
            PRIMARY KEY (group_id, partition_no, msg_offset)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_positions (
            group_id INT NOT NULL,
            member VARBINARY(255) NOT NULL,
            partition_no INT NOT NULL,
            next_offset BIGINT NOT NULL,
            updated_at DATETIME(6) NOT NULL,
            PRIMARY KEY (group_id, member, partition_no)
        ) ENGINE=InnoDB",
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
                "topic_pending",
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
        statements: &["CREATE TABLE IF NOT EXISTS {p}member_dead (
            group_id INT NOT NULL,
            member VARBINARY(255) NOT NULL,
            id BINARY(16) NOT NULL,
            partition_no INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            attempts INT NOT NULL,
            died_at DATETIME(6) NOT NULL,
            errors MEDIUMBLOB NOT NULL,
            PRIMARY KEY (group_id, member, id),
            KEY died (group_id, died_at),
            KEY record (group_id, id)
        ) ENGINE=InnoDB"],
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
        statements: &["CREATE TABLE IF NOT EXISTS {p}schedules (
            name VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
            spec MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            body MEDIUMBLOB NOT NULL,
            paused TINYINT NOT NULL DEFAULT 0,
            next_fire BIGINT NOT NULL,
            last_fired BIGINT NULL,
            fired BIGINT NOT NULL DEFAULT 0,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (name),
            KEY due (paused, next_fire)
        ) ENGINE=InnoDB"],
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
            queue_id INT NOT NULL,
            max_in_flight INT NULL,
            rate_count INT NULL,
            rate_window_us BIGINT NULL,
            concurrency_limit INT NULL,
            key_rate_count INT NULL,
            key_rate_window_us BIGINT NULL,
            PRIMARY KEY (queue_id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}key_slots (
            queue_id INT NOT NULL,
            slot_key VARBINARY(128) NOT NULL,
            busy INT NOT NULL,
            next_seq BIGINT NOT NULL,
            PRIMARY KEY (queue_id, slot_key)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}queue_deliveries (
            id BIGINT NOT NULL AUTO_INCREMENT,
            queue_id INT NOT NULL,
            slot_key VARBINARY(128) NOT NULL DEFAULT '',
            at_us BIGINT NOT NULL,
            n INT NOT NULL,
            PRIMARY KEY (id),
            KEY recent (queue_id, slot_key, at_us)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_limits (
            group_id INT NOT NULL,
            rate_count INT NOT NULL,
            rate_window_us BIGINT NOT NULL,
            PRIMARY KEY (group_id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}group_deliveries (
            id BIGINT NOT NULL AUTO_INCREMENT,
            group_id INT NOT NULL,
            at_us BIGINT NOT NULL,
            n INT NOT NULL,
            PRIMARY KEY (id),
            KEY recent (group_id, at_us)
        ) ENGINE=InnoDB",
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
            id BINARY(16) NOT NULL,
            state SMALLINT NOT NULL,
            members INT NOT NULL,
            pending INT NOT NULL,
            succeeded INT NOT NULL,
            dead INT NOT NULL,
            cancelled INT NOT NULL,
            created_us BIGINT NOT NULL,
            finished_us BIGINT NULL,
            PRIMARY KEY (id),
            KEY finished (state, finished_us)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}flow_nodes (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            batch_id BINARY(16) NULL,
            step VARBINARY(128) NULL,
            role SMALLINT NOT NULL,
            waiting INT NOT NULL,
            held INT NOT NULL,
            state SMALLINT NOT NULL,
            ended_us BIGINT NULL,
            PRIMARY KEY (id),
            KEY batch (batch_id),
            KEY ended (state, ended_us)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}flow_edges (
            parent BINARY(16) NOT NULL,
            child BINARY(16) NOT NULL,
            PRIMARY KEY (parent, child),
            KEY child (child, parent)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}waiting (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            priority SMALLINT NOT NULL,
            delay_us BIGINT NOT NULL,
            attempts INT NOT NULL,
            token BIGINT NOT NULL,
            PRIMARY KEY (id),
            KEY queue (queue_id, id)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}results (
            id BINARY(16) NOT NULL,
            result MEDIUMBLOB NOT NULL,
            expires_us BIGINT NOT NULL,
            PRIMARY KEY (id),
            KEY expiry (expires_us)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}flow_records (
            id BINARY(16) NOT NULL,
            batch_id BINARY(16) NOT NULL,
            role SMALLINT NOT NULL,
            topic_id INT NOT NULL,
            partition_no INT NOT NULL,
            record_key VARBINARY(255) NULL,
            headers BLOB NULL,
            body MEDIUMBLOB NOT NULL,
            PRIMARY KEY (id),
            KEY batch (batch_id)
        ) ENGINE=InnoDB",
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
        // The one-statement send (`CALL {p}send(…)`): the SQL contract for other languages
        // (the guide, "Sending from SQL").
        statements: &[include_str!("send_procedure.sql")],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &["send"],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 9,
        description: "one-statement send",
        // The library's own send of one plain message as one prepared statement
        // (`store/mysql/send_script.rs`): no text to parse, one answer to wait for.
        statements: &[include_str!("send_plain.sql")],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &["send_plain"],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 10,
        description: "one-statement claim and ack",
        // The library's own claim and lone ack, each as one prepared statement
        // (`store/mysql/procedures.rs`).
        statements: &[
            include_str!("claim_plain.sql"),
            include_str!("ack_plain.sql"),
        ],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &["claim_plain", "ack_plain"],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 11,
        description: "one-statement group ack",
        // The library's ack of one cluster-group receipt inside a transaction (a job
        // transaction's commit, the acker's lone ack) as one prepared statement
        // (`store/mysql/group_ack.rs`).
        statements: &[include_str!("ack_group_one.sql")],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &["ack_group_one"],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 12,
        description: "the SQL contract's ack",
        // `CALL sqlmq_ack(queue, receipt)`: an ack in the caller's transaction for any
        // language (the guide, "Acking from SQL"), beside `sqlmq_send`; a stable contract.
        statements: &[include_str!("ack_procedure.sql")],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &["ack"],
            columns: &[],
            indexes: &[],
        }),
    },
    Migration {
        version: 13,
        description: "durable execution",
        // A run's journal (its recorded steps, sleeps and event waits), the events emitted,
        // and who waits for which (`store/body/durable.rs`).
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}run_steps (
            message_id BINARY(16) NOT NULL,
            seq INT NOT NULL,
            name VARBINARY(255) NOT NULL,
            kind SMALLINT NOT NULL,
            state SMALLINT NOT NULL,
            wake_at DATETIME(6) NULL,
            result MEDIUMBLOB NULL,
            recorded_at DATETIME(6) NOT NULL,
            PRIMARY KEY (message_id, seq),
            UNIQUE KEY name (message_id, kind, name)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}events (
            name VARBINARY(255) NOT NULL,
            payload MEDIUMBLOB NOT NULL,
            emitted_at DATETIME(6) NOT NULL,
            expires_at DATETIME(6) NOT NULL,
            PRIMARY KEY (name),
            KEY expiry (expires_at)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}event_waits (
            name VARBINARY(255) NOT NULL,
            message_id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            since DATETIME(6) NOT NULL,
            PRIMARY KEY (name, message_id),
            KEY message (message_id)
        ) ENGINE=InnoDB",
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
        // A cancelled in-flight message's lease, moved out of `leases` so that every ack of
        // its receipt fails as it does for a lost lease, kept until the lease would have
        // ended (the handler may still run: its key and slot stay held); and the progress
        // its handler reports (`store/body/running.rs`).
        statements: &[
            "CREATE TABLE IF NOT EXISTS {p}cancels (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            token BIGINT NOT NULL,
            lease_until DATETIME(6) NOT NULL,
            cancelled_at DATETIME(6) NOT NULL,
            reason VARBINARY(1024) NOT NULL,
            PRIMARY KEY (id),
            KEY expiry (queue_id, lease_until)
        ) ENGINE=InnoDB",
            "CREATE TABLE IF NOT EXISTS {p}progress (
            id BINARY(16) NOT NULL,
            queue_id INT NOT NULL,
            token BIGINT NOT NULL,
            value BLOB NOT NULL,
            updated_at DATETIME(6) NOT NULL,
            PRIMARY KEY (id),
            KEY queue (queue_id, id)
        ) ENGINE=InnoDB",
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
        // A message's deadline (database clock) and its attempts' run timeout, in its own row:
        // NULL for the messages without (instant on MySQL 8 and MariaDB, no table rebuilt); and
        // the claim procedure that answers them (`claim_timed.sql`).
        statements: &[
            "ALTER TABLE {p}messages ADD COLUMN deadline_at DATETIME(6) NULL",
            "ALTER TABLE {p}messages ADD COLUMN run_timeout_us BIGINT NULL",
            include_str!("claim_timed.sql"),
        ],
        reverse: Some(Reverse {
            drops: &[],
            disposable: &[],
            procedures: &["claim_timed"],
            columns: &[("messages", "deadline_at"), ("messages", "run_timeout_us")],
            indexes: &[],
        }),
    },
    Migration {
        version: 16,
        description: "fair queues",
        // A queue's fair mode (NULL: first in, first out) and a message's fairness key:
        // columns NULL for what has none, instant on MySQL 8 and MariaDB. The virtual start
        // time a message of a fair queue gets when it becomes ready (`store/body/fair.rs`; 0
        // for every other queue's) goes into ready's primary key, `(queue_id, priority, vt,
        // id)`: the claim order stays the clustered index's, for fair queues and first-in
        // first-out ones alike (claims through a secondary index drained a queue at half the
        // speed under concurrent `SKIP LOCKED` claimers: docs/BENCHMARKS.md, "Fair queues");
        // the former key `(queue_id, priority, id)` stays as the index `arrival`, for what
        // finds a ready row by its message (cancel, purge, browse). One `ALTER`: the table is
        // rebuilt once, online (concurrent reads and writes go on). Each key's weight, last
        // virtual time and messages made ready so far; the claim procedure for that order
        // (`claim_vt.sql`).
        statements: &[
            "ALTER TABLE {p}queues ADD COLUMN fair TINYINT NULL",
            "ALTER TABLE {p}messages ADD COLUMN fairness_key VARBINARY(128) NULL",
            "ALTER TABLE {p}ready ADD COLUMN vt BIGINT NOT NULL DEFAULT 0, \
            DROP PRIMARY KEY, ADD PRIMARY KEY (queue_id, priority, vt, id), \
            ADD UNIQUE KEY arrival (queue_id, priority, id)",
            "CREATE TABLE IF NOT EXISTS {p}fair_keys (
            queue_id INT NOT NULL,
            fairness_key VARBINARY(128) NOT NULL,
            weight INT NOT NULL,
            vt BIGINT NOT NULL,
            arrived BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (queue_id, fairness_key),
            KEY clock (queue_id, vt)
        ) ENGINE=InnoDB",
            include_str!("claim_vt.sql"),
        ],
        reverse: Some(Reverse {
            drops: &["fair_keys"],
            disposable: &[],
            procedures: &["claim_vt"],
            columns: &[
                ("queues", "fair"),
                ("messages", "fairness_key"),
                ("ready", "vt"),
            ],
            indexes: &["ALTER TABLE {p}ready DROP PRIMARY KEY, \
                ADD PRIMARY KEY (queue_id, priority, id), DROP INDEX arrival"],
        }),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_increase_by_one_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.description);
            for s in m.statements {
                let create = s.starts_with("CREATE TABLE");
                assert!(
                    !create || s.starts_with("CREATE TABLE IF NOT EXISTS"),
                    "{s}"
                );
            }
        }
    }

    #[test]
    fn released_migrations_are_unchanged() {
        use crate::store::body::checks;
        checks::released_are_unchanged(
            MIGRATIONS,
            &[
                0x3eb2c906ec8565ac,
                0xd826c547efa503df,
                0xf6ceff20128ddee3,
                0x36d076b96b1adc66,
            ],
        );
        checks::reverses_drop_what_was_created(MIGRATIONS);
    }
}
