//! Settling a queue's leases: the statements (the body is `store/body/settle.rs`). The lease
//! rows need no lock: the write transaction has the database to itself, so an ack and a
//! release of the same message are serialised by the write lock. The error history is
//! trimmed in Rust (read and written back inside the transaction): SQLite has no
//! `SUBSTRING_INDEX`.

use super::{now_text, now_us};
use crate::store::body::{ErrorHistory, SettleSql};

pub(super) const SQL: SettleSql = SettleSql {
    lock_leases: concat!(
        "SELECT id, queue_id, priority, token, attempts, ordering_key, lease_until > ",
        now_us!(),
        " FROM {p}leases WHERE id IN ({list})"
    ),
    delete_leases: "DELETE FROM {p}leases WHERE id IN ({list})",
    delete_messages: "DELETE FROM {p}messages WHERE id IN ({list})",
    extend: concat!(
        "UPDATE {p}leases SET lease_until = ",
        now_us!(),
        " + ? WHERE id = ? AND token = ? AND queue_id = ? AND lease_until > ",
        now_us!()
    ),
    dead_row: concat!("(?,?,?,?,?,", now_us!(), ")"),
    error_history: ErrorHistory::ReadWrite {
        read: concat!(
            "SELECT errors, ",
            now_text!(),
            " FROM {p}messages WHERE id = ?"
        ),
        write: "UPDATE {p}messages SET errors = ? WHERE id = ?",
    },
};
