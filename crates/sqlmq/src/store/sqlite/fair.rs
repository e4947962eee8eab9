//! Fair queues' statements (the body is `store/body/fair.rs`).

use super::now_us;
use crate::store::body::FairSql;

pub(super) const SQL: FairSql = FairSql {
    head: "SELECT vt FROM {p}ready \
        WHERE queue_id = ? AND priority = ? AND vt IS NOT NULL ORDER BY vt LIMIT 1",
    latest: "SELECT vt FROM {p}fair_keys WHERE queue_id = ? ORDER BY vt DESC LIMIT 1",
    save_finish: "INSERT INTO {p}fair_keys (queue_id, fairness_key, weight, vt, arrived) \
        VALUES {list} ON CONFLICT (queue_id, fairness_key) \
        DO UPDATE SET vt = MAX(vt, excluded.vt), arrived = arrived + excluded.arrived",
    set_weight: "INSERT INTO {p}fair_keys (queue_id, fairness_key, weight, vt) \
        VALUES (?, ?, ?, 0) ON CONFLICT (queue_id, fairness_key) \
        DO UPDATE SET weight = excluded.weight",
    backlog: concat!(
        "SELECT m.fairness_key, COUNT(*), ",
        now_us!(),
        " - MIN(m.created_at) FROM {p}ready r JOIN {p}messages m ON m.id = r.id ",
        "WHERE r.queue_id = ? GROUP BY m.fairness_key ORDER BY COUNT(*) DESC, m.fairness_key ",
        "LIMIT ?"
    ),
    in_flight: "SELECT m.fairness_key, COUNT(*) FROM {p}leases l JOIN {p}messages m \
        ON m.id = l.id WHERE l.queue_id = ? GROUP BY m.fairness_key",
};
