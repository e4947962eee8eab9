//! The wakeup probes' statements (the body is `store/body/probe.rs`), run on a reader
//! connection (WAL: it never waits for the writer). Two differences for groups: SQLite gives
//! records their offsets in the publishing transaction, so nothing waits for an offset (the
//! last flag is always 0); and the strict-order checks are plain `EXISTS` (MySQL needs scalar
//! subqueries there to keep MariaDB from materialising them).

use super::now_us;
use crate::store::body::ProbeSql;

pub(super) const SQL: ProbeSql = ProbeSql {
    queues: concat!(
        "SELECT q.id, q.paused, ",
        "EXISTS (SELECT 1 FROM {p}ready r WHERE r.queue_id = q.id), ",
        "EXISTS (SELECT 1 FROM {p}scheduled s WHERE s.queue_id = q.id AND s.run_at <= ",
        now_us!(),
        "), ",
        "EXISTS (SELECT 1 FROM {p}leases l WHERE l.queue_id = q.id AND l.lease_until <= ",
        now_us!(),
        "), q.name FROM {p}queues q WHERE q.id IN ({list})"
    ),
    groups: concat!(
        "SELECT g.id, ",
        "EXISTS (SELECT 1 FROM {p}group_cursors c JOIN {p}topic_partitions tp ",
        "ON tp.topic_id = g.topic_id AND tp.partition_no = c.partition_no ",
        "WHERE c.group_id = g.id AND c.next_offset < tp.next_offset ",
        "AND NOT (t.strict_order <> 0 AND (",
        "EXISTS (SELECT 1 FROM {p}group_leases l ",
        "WHERE l.group_id = c.group_id AND l.partition_no = c.partition_no) ",
        "OR EXISTS (SELECT 1 FROM {p}group_retries r ",
        "WHERE r.group_id = c.group_id AND r.partition_no = c.partition_no)))), ",
        "EXISTS (SELECT 1 FROM {p}group_retries r WHERE r.group_id = g.id AND r.run_at <= ",
        now_us!(),
        "), ",
        "EXISTS (SELECT 1 FROM {p}group_leases l WHERE l.group_id = g.id AND l.lease_until <= ",
        now_us!(),
        "), 0, t.name, g.name FROM {p}consumer_groups g JOIN {p}topics t ON t.id = g.topic_id ",
        "WHERE g.id IN ({list})"
    ),
};
