//! Fair queues' statements (the body is `store/body/fair.rs`).

use crate::store::body::FairSql;

pub(super) const SQL: FairSql = FairSql {
    head: "SELECT vt FROM {p}ready FORCE INDEX (PRIMARY) \
        WHERE queue_id = ? AND priority = ? AND vt > 0 ORDER BY vt LIMIT 1",
    latest: "SELECT vt FROM {p}fair_keys FORCE INDEX (clock) \
        WHERE queue_id = ? ORDER BY vt DESC LIMIT 1",
    save_finish: "INSERT INTO {p}fair_keys (queue_id, fairness_key, weight, vt, arrived) \
        VALUES {list} ON DUPLICATE KEY UPDATE vt = GREATEST(vt, VALUES(vt)), \
        arrived = arrived + VALUES(arrived)",
    set_weight: "INSERT INTO {p}fair_keys (queue_id, fairness_key, weight, vt) \
        VALUES (?, ?, ?, 0) ON DUPLICATE KEY UPDATE weight = VALUES(weight)",
    backlog: concat!(
        "SELECT m.fairness_key, COUNT(*), ",
        super::micros!("UTC_TIMESTAMP(6)"),
        " - ",
        super::micros!("MIN(m.created_at)"),
        " FROM {p}ready r FORCE INDEX (PRIMARY) STRAIGHT_JOIN {p}messages m ON m.id = r.id ",
        "WHERE r.queue_id = ? GROUP BY m.fairness_key ORDER BY COUNT(*) DESC, m.fairness_key ",
        "LIMIT ?"
    ),
    in_flight: "SELECT m.fairness_key, COUNT(*) FROM {p}leases l FORCE INDEX (expiry) \
        STRAIGHT_JOIN {p}messages m FORCE INDEX (PRIMARY) ON m.id = l.id \
        WHERE l.queue_id = ? GROUP BY m.fairness_key",
};
