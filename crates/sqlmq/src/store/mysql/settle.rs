//! Settling a queue's leases: the statements (the body is `store/body/settle.rs`), and the ack
//! in a transaction of its own in two round trips (see `script.rs`).

use std::collections::HashMap;
use std::sync::Mutex;

use super::MySqlStore;
use super::script::{Lit, Script, rolled_back};
use crate::domain::{MessageId, Receipt, Result};
use crate::store::body::settle::{Lease, split_acks};
use crate::store::body::{ErrorHistory, SettleSql};
use crate::store::receipts_except;
use crate::store::statements::MAX_LIST;

pub(super) const SQL: SettleSql = SettleSql {
    lock_leases: LOCK_LEASES,
    delete_leases: DELETE_LEASES,
    delete_messages: DELETE_MESSAGES,
    extend: "UPDATE {p}leases FORCE INDEX (PRIMARY) \
        SET lease_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) \
        WHERE id = ? AND token = ? AND queue_id = ? AND lease_until > UTC_TIMESTAMP(6)",
    dead_row: "(?,?,?,?,?,UTC_TIMESTAMP(6))",
    // Append one JSON line and keep the last entries (the trailing newline makes one more,
    // empty, field: the bound count is negative, counting from the end). CHAR(10) rather than
    // '\n': NO_BACKSLASH_ESCAPES may be on.
    error_history: ErrorHistory::InSql(
        "UPDATE {p}messages SET errors = SUBSTRING_INDEX(CONCAT(\
        COALESCE(errors, ''), '{\"attempt\":', ?, ',\"at\":\"', \
        DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'), '\",\"error\":', ?, '}', CHAR(10)), \
        CHAR(10), ?) WHERE id = ?",
    ),
};

const LOCK_LEASES: &str = "SELECT id, queue_id, priority, token, attempts, ordering_key, \
    lease_until > UTC_TIMESTAMP(6) FROM {p}leases FORCE INDEX (PRIMARY) WHERE id IN ({list}) \
    FOR UPDATE";
pub(super) const DELETE_LEASES: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}leases t FORCE INDEX (PRIMARY) ON t.id = v.id";
pub(super) const DELETE_MESSAGES: &str =
    "DELETE t FROM ({ids}) v STRAIGHT_JOIN {p}messages t FORCE INDEX (PRIMARY) ON t.id = v.id";

/// An ack of a queue's receipts in a transaction of its own, in two round trips: the
/// transaction's start with the lease locks, then the deletes with the COMMIT. Messages with an
/// ordering key release it with statements of their own before the COMMIT.
pub(super) async fn ack_queue_own(
    store: &MySqlStore,
    conn: &mut sqlx::MySqlConnection,
    queue_id: i32,
    receipts: &[Receipt],
    acked_out: &Mutex<Vec<Receipt>>,
    op: &'static str,
) -> Result<Vec<Receipt>> {
    let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
    let mut read = Script::begin();
    for chunk in ids.chunks(MAX_LIST) {
        let args: Vec<Lit<'_>> = chunk.iter().map(|id| Lit::Bytes(id.bytes())).collect();
        read.push(&store.st.list_text(LOCK_LEASES, "?", chunk.len()), &args);
    }
    let rows = read.fetch(conn).await?;
    let leases: Result<HashMap<MessageId, Lease>> = rows
        .iter()
        .map(|r| Lease::decode(r).map(|l| (l.entry.id, l)))
        .collect();
    let leases = match leases {
        Ok(leases) => leases,
        Err(e) => return Err(rolled_back(conn, e).await),
    };
    let (acked, lost) = split_acks(&leases, queue_id, receipts);
    *acked_out.lock().expect("poisoned") = receipts_except(receipts, &lost);
    let mut write = Script::default();
    if acked.iter().any(|id| leases[id].ordering_key.is_some()) {
        if let Err(e) = store.delete_acked(conn, queue_id, &acked, &leases).await {
            return Err(rolled_back(conn, e).await);
        }
    } else {
        for chunk in acked.chunks(MAX_LIST) {
            let args: Vec<Lit<'_>> = chunk.iter().map(|id| Lit::Bytes(id.bytes())).collect();
            write.push(&store.st.list_text(DELETE_LEASES, "", chunk.len()), &args);
            write.push(&store.st.list_text(DELETE_MESSAGES, "", chunk.len()), &args);
        }
    }
    write.commit();
    crate::failpoints::before_commit(op).await;
    write.run(conn).await?;
    Ok(lost)
}
