//! Settling a queue's leases: the statements (the body is `store/body/settle.rs`), and the ack
//! in a transaction of its own: a lone receipt as one prepared `CALL {p}ack_plain(…)`
//! (`ack_plain.sql`, see `procedures.rs`), any other in two round trips (see `script.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use super::MySqlStore;
use super::procedures;
use super::script::{Lit, Script, rolled_back};
use crate::domain::{Error, MessageId, Receipt, Result};
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

/// The internal procedure's call (schema version 10, `ack_plain.sql`): queue, id, token.
const CALL_ACK_PLAIN: &str = "CALL {p}ack_plain(?, ?, ?)";

/// What the procedure answers (see `ack_plain.sql`; `ack_group_one.sql` answers the first two).
pub(super) const ACK_LOST: i64 = 0;
pub(super) const ACK_DONE: i64 = 1;
const ACK_KEYED: i64 = 2;

/// An ack of a queue's receipts in a transaction of its own: a lone receipt by the procedure
/// while the server allows it (a message with a key to release, which it leaves alone, then
/// takes the full ack); otherwise in two round trips: the transaction's start with the lease
/// locks, then the deletes with the COMMIT. Messages with an ordering key release it with
/// statements of their own before the COMMIT.
pub(super) async fn ack_queue_own(
    store: &MySqlStore,
    conn: &mut sqlx::MySqlConnection,
    queue_id: i32,
    receipts: &[Receipt],
    acked_out: &Mutex<Vec<Receipt>>,
    op: &'static str,
) -> Result<Vec<Receipt>> {
    if let [receipt] = receipts
        && store.state.ack.load(Ordering::Relaxed)
    {
        // Should the answer be lost, the resolver asks whether the message is gone. A message
        // gone although this receipt had lost its lease (its next holder acked it) is then
        // reported acked: the same answer as when a COMMIT of the two-round-trip ack is lost
        // and the lease ends before the resolver asks.
        *acked_out.lock().expect("poisoned") = vec![*receipt];
        crate::failpoints::before_commit(op).await;
        // All of the answer, to its final OK: the row comes after the procedure's COMMIT.
        let called = sqlx::query_scalar::<_, i64>(store.st.get(CALL_ACK_PLAIN))
            .bind(queue_id)
            .bind(receipt.id.bytes())
            .bind(receipt.token as i64)
            .fetch_all(&mut *conn)
            .await
            .map_err(Error::from);
        match called {
            Ok(answer) => match answer[..] {
                [ACK_DONE] => return Ok(Vec::new()),
                [ACK_LOST] => {
                    acked_out.lock().expect("poisoned").clear();
                    return Ok(vec![*receipt]);
                }
                [ACK_KEYED] => {}
                _ => {
                    return Err(Error::Corrupt(format!(
                        "the ack procedure answered {answer:?}"
                    )));
                }
            },
            Err(e) if procedures::refused(&e) => {
                procedures::give_up(&store.state.ack, "ack", 10, &e);
            }
            // The procedure may have begun its transaction: end it.
            Err(e) => return Err(rolled_back(conn, e).await),
        }
        acked_out.lock().expect("poisoned").clear();
    }
    let ids: Vec<MessageId> = receipts.iter().map(|r| r.id).collect();
    let mut read = Script::begin(store);
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
    let mut write = Script::new(store);
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
