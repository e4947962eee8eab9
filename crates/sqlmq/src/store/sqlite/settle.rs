//! Settling a queue's leases: the statements (the body is `store/body/settle.rs`). The lease
//! rows need no lock: the write transaction has the database to itself, so an ack and a
//! release of the same message are serialised by the write lock. The error history is
//! trimmed in Rust (read and written back inside the transaction): SQLite has no
//! `SUBSTRING_INDEX`.

use std::sync::Mutex;
use std::time::Duration;

use sqlx::{Sqlite, SqliteConnection};

use super::{SqliteStore, now_text, now_us};
use crate::domain::{Decide, NackOutcome, Receipt, Released, Result};
use crate::store::body::{ErrorHistory, SettleSql};
use crate::store::{GroupSettle, ack_in_own_transaction};

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

impl GroupSettle<Sqlite> for SqliteStore {
    async fn ack_group(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        receipts: &[Receipt],
    ) -> Result<Vec<Receipt>> {
        SqliteStore::ack_group(self, conn, group_id, receipts).await
    }

    async fn ack_group_own(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        receipts: &[Receipt],
        acked: &Mutex<Vec<Receipt>>,
        op: &'static str,
    ) -> Result<Vec<Receipt>> {
        type B = Sqlite;
        ack_in_own_transaction!(conn, receipts, acked, op, |tx| SqliteStore::ack_group(
            self, &mut tx, group_id, receipts
        ))
    }

    async fn group_acks_committed(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        acked: &[Receipt],
    ) -> Result<bool> {
        SqliteStore::group_acks_committed(self, conn, group_id, acked).await
    }

    async fn fail_group(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        receipt: &Receipt,
        decide: &Decide<'_>,
    ) -> Result<NackOutcome> {
        SqliteStore::fail_group(self, conn, group_id, receipt, decide).await
    }

    async fn extend_group(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        receipt: &Receipt,
        lease: Duration,
    ) -> Result<bool> {
        SqliteStore::extend_group(self, conn, group_id, receipt, lease).await
    }

    async fn release_group_expired(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        SqliteStore::release_group_expired(self, conn, group_id, limit, decide).await
    }

    async fn release_group_owned(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        owner: &str,
        limit: usize,
        decide: &Decide<'_>,
    ) -> Result<Released> {
        SqliteStore::release_group_owned(self, conn, group_id, owner, limit, decide).await
    }
}
