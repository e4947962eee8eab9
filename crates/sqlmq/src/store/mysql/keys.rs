//! The key protocol's statements (the body is `store/body/keys.rs`). The reads of a key's
//! head and of its first blocked message lock their rows (`FOR UPDATE`): the release of a head
//! and a producer adding behind it serialise on the `key_heads` row.

use crate::store::body::KeySql;

pub(super) const SQL: KeySql = KeySql {
    upsert_keys: "INSERT INTO {p}key_heads (queue_id, ordering_key, next_seq, head_id) \
        VALUES {list} ON DUPLICATE KEY UPDATE next_seq = next_seq + VALUES(next_seq)",
    key_row: "(?,?,?,?)",
    select_keys: "SELECT ordering_key, next_seq, head_id FROM {p}key_heads FORCE INDEX (PRIMARY) \
        WHERE queue_id = ? AND ordering_key IN ({list})",
    blocked_row: "(?,?,?,?,?,DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND),?,?)",
    lock_key: "SELECT head_id FROM {p}key_heads WHERE queue_id = ? AND ordering_key = ? FOR UPDATE",
    next_blocked: "SELECT seq, id, priority, attempts, token, \
        GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), run_at), 0) \
        FROM {p}blocked FORCE INDEX (PRIMARY) WHERE queue_id = ? AND ordering_key = ? \
        ORDER BY seq LIMIT 1 FOR UPDATE",
    // A duplicate key's row is locked exclusively by the upsert even when nothing changes.
    upsert_slot: "INSERT INTO {p}key_slots (queue_id, slot_key, busy, next_seq) \
        VALUES (?, ?, 0, 0) ON DUPLICATE KEY UPDATE busy = busy",
    first_waiting: "SELECT id, priority, attempts, token, \
        GREATEST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), run_at), 0) \
        FROM {p}blocked FORCE INDEX (PRIMARY) WHERE queue_id = ? AND ordering_key = ? \
        ORDER BY seq LIMIT ? FOR UPDATE",
    orphaned_keys: "SELECT k.ordering_key, k.head_id FROM {p}key_heads k FORCE INDEX (PRIMARY) \
        LEFT JOIN {p}messages m ON m.id = k.head_id \
        WHERE k.queue_id = ? AND m.id IS NULL LIMIT 500",
};
