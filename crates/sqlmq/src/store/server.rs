//! Connecting, knowing the server, and the schema.

use std::future::Future;

use sqlx::Pool;

use super::Backend;
use super::body::{Dialect, SqlStore};
use super::rows::{ConnectOptions, Pools};
use crate::domain::{Result, ServerInfo};

/// Connections and the server behind them.
pub trait Server: Dialect {
    /// The statement that opens every transaction sqlmq runs itself (isolation level, locking
    /// mode), sent in one round trip where the backend allows.
    const BEGIN: &'static str;

    /// The statement that opens a transaction on a connection of sqlmq's own pool, whose
    /// session the backend configured when it connected (MySQL: READ COMMITTED for the session,
    /// so a bare `START TRANSACTION`). [`Server::BEGIN`] remains for a caller's connection.
    const BEGIN_POOLED: &'static str;

    /// The statement that opens a read-only transaction whose reads all see one snapshot of
    /// the database: a report read by several statements (a group's lag: its cursors, leases
    /// and retries) then never counts a row twice or misses one that moved between tables
    /// while it read. Nothing sqlmq writes runs in it.
    const BEGIN_SNAPSHOT: &'static str;

    /// Whether the database admits one write transaction at a time (SQLite). The engine then
    /// checks with a plain read on a reader connection, which never waits, whether a claim
    /// would find anything before it waits for the writer, which may be held by an open
    /// transaction or another process: an idle consumer never queues for the write lock.
    const ONE_WRITER: bool = false;

    /// Whether the database keeps the undo history of committed transactions until a purge
    /// removes it (InnoDB): [`Server::history_list_length`] then reads its length. Where it
    /// does not (SQLite), the engine answers "not applicable" without asking.
    const UNDO_HISTORY: bool = false;

    /// Open the pools to `url`, reporting why when the first connection fails.
    fn connect(
        url: &str,
        options: &ConnectOptions,
    ) -> impl Future<Output = Result<Pools<Self>>> + Send;

    /// Prepare a pool the application opened itself (`Client::from_pool`).
    fn adopt(pool: &Pool<Self>);

    /// Facts about the server (flavour, version, durability settings, packet limit).
    fn detect(conn: &mut Self::Connection) -> impl Future<Output = Result<ServerInfo>> + Send;

    /// Check that locking works as sqlmq needs (for a server: with two connections of `pool`,
    /// that `SKIP LOCKED` skips and never waits); refuse the database otherwise.
    fn verify_locking(
        store: &SqlStore<Self>,
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Fit the store to the server found at connect (MySQL: text scripts become compound
    /// statements on a Galera node, see `store/mysql/script.rs`). Nothing by default.
    fn fit(_store: &SqlStore<Self>, _server: &ServerInfo) {}

    /// Bytes one statement may carry on this server.
    fn statement_budget(server: &ServerInfo) -> usize;

    /// The database clock, in microseconds since the Unix epoch.
    fn now_us(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Result<i64>> + Send;

    /// InnoDB's history list length (undo logs of committed transactions not purged yet), as
    /// the server reports it to this connection's user; `None` when it reports none. One
    /// statement; a user the server refuses it to gets [`Error::PermissionDenied`]. Only called
    /// where [`Server::UNDO_HISTORY`] is true.
    ///
    /// [`Error::PermissionDenied`]: crate::Error::PermissionDenied
    fn history_list_length(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        server: &ServerInfo,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;
}

/// [`Server::BEGIN_POOLED`] of backend `B`, as an owned `SqlStr`: a `&'static str` argument
/// trips the compiler's check that generic futures holding it are `Send` ("not general
/// enough").
pub(crate) fn begin_pooled<B: Backend>() -> sqlx::SqlStr {
    sqlx::SqlSafeStr::into_sql_str(B::BEGIN_POOLED)
}

/// [`Server::BEGIN_SNAPSHOT`] as an owned `SqlStr` (see [`begin_pooled`]).
pub(crate) fn begin_snapshot<B: Backend>() -> sqlx::SqlStr {
    sqlx::SqlSafeStr::into_sql_str(B::BEGIN_SNAPSHOT)
}
