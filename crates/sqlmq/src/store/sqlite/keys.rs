//! The key protocol's statements (the body is `store/body/keys.rs`). No row locks: every
//! statement runs in a write transaction that has the database to itself, so producers and
//! the release of a head cannot interleave, and `seq` order is commit order by construction.

use super::now_us;
use crate::store::body::KeySql;

pub(super) const SQL: KeySql = KeySql {
    upsert_keys: "INSERT INTO {p}key_heads (queue_id, ordering_key, next_seq, head_id) \
        VALUES {list} ON CONFLICT (queue_id, ordering_key) \
        DO UPDATE SET next_seq = next_seq + excluded.next_seq",
    key_row: "(?,?,?,?)",
    select_keys: "SELECT ordering_key, next_seq, head_id FROM {p}key_heads \
        WHERE queue_id = ? AND ordering_key IN ({list})",
    blocked_row: concat!("(?,?,?,?,?,", now_us!(), " + ?,?,?)"),
    lock_key: "SELECT head_id FROM {p}key_heads WHERE queue_id = ? AND ordering_key = ?",
    next_blocked: concat!(
        "SELECT seq, id, priority, attempts, token, max(run_at - ",
        now_us!(),
        ", 0) FROM {p}blocked WHERE queue_id = ? AND ordering_key = ? ORDER BY seq LIMIT 1"
    ),
    upsert_slot: "INSERT INTO {p}key_slots (queue_id, slot_key, busy, next_seq) \
        VALUES (?, ?, 0, 0) ON CONFLICT (queue_id, slot_key) DO NOTHING",
    first_waiting: concat!(
        "SELECT id, priority, attempts, token, max(run_at - ",
        now_us!(),
        ", 0) FROM {p}blocked WHERE queue_id = ? AND ordering_key = ? ORDER BY seq LIMIT ?"
    ),
    orphaned_keys: "SELECT k.ordering_key, k.head_id FROM {p}key_heads k \
        WHERE k.queue_id = ? AND NOT EXISTS (SELECT 1 FROM {p}messages m WHERE m.id = k.head_id) \
        LIMIT 500",
};
