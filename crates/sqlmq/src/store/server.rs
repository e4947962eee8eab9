//! Connecting, knowing the server, and the schema.

use std::future::Future;

use sqlx::Pool;

use super::Backend;
use super::rows::{ConnectOptions, Migration, Pools};
use crate::domain::{GrantRole, Result, ServerInfo};

/// Connections and the server behind them.
pub trait Server<B: Backend>: Sized {
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

    /// The store for tables named with `prefix` (validated by the engine).
    fn new(prefix: &str) -> Self;

    /// The table prefix.
    fn prefix(&self) -> &str;

    /// Open the pools to `url`, reporting why when the first connection fails.
    fn connect(
        url: &str,
        options: &ConnectOptions,
    ) -> impl Future<Output = Result<Pools<B>>> + Send;

    /// Prepare a pool the application opened itself (`Client::from_pool`).
    fn adopt(pool: &Pool<B>);

    /// Facts about the server (flavour, version, durability settings, packet limit).
    fn detect(conn: &mut B::Connection) -> impl Future<Output = Result<ServerInfo>> + Send;

    /// Check that locking works as sqlmq needs (for a server: with two connections of `pool`,
    /// that `SKIP LOCKED` skips and never waits); refuse the database otherwise.
    fn verify_locking(&self, pool: &Pool<B>) -> impl Future<Output = Result<()>> + Send;

    /// Bytes one statement may carry on this server.
    fn statement_budget(server: &ServerInfo) -> usize;

    /// The database clock, in microseconds since the Unix epoch.
    fn now_us(&self, conn: &mut B::Connection) -> impl Future<Output = Result<i64>> + Send;

    /// InnoDB's history list length (undo logs of committed transactions not purged yet), as
    /// the server reports it to this connection's user; `None` when it reports none. One
    /// statement; a user the server refuses it to gets [`Error::PermissionDenied`]. Only called
    /// where [`Server::UNDO_HISTORY`] is true.
    ///
    /// [`Error::PermissionDenied`]: crate::Error::PermissionDenied
    fn history_list_length(
        &self,
        conn: &mut B::Connection,
        server: &ServerInfo,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;
}

/// Versioned migrations: the primitives of the engine's one migration loop
/// (`client/migrate.rs`).
pub trait Schema<B: Backend> {
    /// Whether DDL is transactional here: the engine then applies every pending migration in
    /// one transaction of its own (a concurrent migrator waits for it, then finds the work
    /// done). Where it is not (MySQL), each statement commits by itself and the migrations'
    /// `IF NOT EXISTS` forms make a concurrent run harmless.
    const DDL_IN_TRANSACTION: bool;

    /// Every migration of this backend, in version order (1, 2, … without gaps).
    fn migrations() -> &'static [Migration];

    /// The schema version this build writes and reads.
    fn latest_version() -> i64 {
        Self::migrations().last().map_or(0, |m| m.version)
    }

    /// The schema version in the database, 0 when there is none.
    fn schema_version(&self, conn: &mut B::Connection) -> impl Future<Output = Result<i64>> + Send;

    /// Create the table of applied versions, if it is missing.
    fn create_version_table(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Take the migration lock where the backend has one: a hint that keeps concurrent
    /// migrators from doing the work twice, never a condition of correctness. True when
    /// taken (then [`Schema::unlock_migrations`] must follow).
    fn lock_migrations(&self, conn: &mut B::Connection) -> impl Future<Output = bool> + Send;

    /// Release the lock [`Schema::lock_migrations`] took.
    fn unlock_migrations(&self, conn: &mut B::Connection) -> impl Future<Output = ()> + Send;

    /// Apply one migration: its statements, then its version row (ignored when a concurrent
    /// migrator recorded it first).
    fn apply_migration(
        &self,
        conn: &mut B::Connection,
        migration: &Migration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// How many registered worker processes are live (0 where the process table does not
    /// exist: before version 2).
    fn live_processes(&self, conn: &mut B::Connection) -> impl Future<Output = Result<i64>> + Send;

    /// Why `migration` cannot be reversed now (it has no reverse, or a table it would drop
    /// holds rows), or `None`.
    fn reversal_refused(
        &self,
        conn: &mut B::Connection,
        migration: &Migration,
    ) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Reverse one migration that [`Schema::reversal_refused`] let through: drop its tables
    /// and forget its version.
    fn reverse_migration(
        &self,
        conn: &mut B::Connection,
        migration: &Migration,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The GRANT statements giving `role` to `user`@`host` on the connection's database (none
    /// where the backend has no users, as SQLite).
    fn grants(
        &self,
        conn: &mut B::Connection,
        role: GrantRole,
        user: &str,
        host: &str,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
}

/// [`Server::BEGIN_POOLED`] of backend `B`, as an owned `SqlStr`: a `&'static str` argument
/// trips the compiler's check that generic futures holding it are `Send` ("not general
/// enough").
pub(crate) fn begin_pooled<B: Backend>() -> sqlx::SqlStr {
    sqlx::SqlSafeStr::into_sql_str(<B::Store as Server<B>>::BEGIN_POOLED)
}

/// [`Server::BEGIN_SNAPSHOT`] as an owned `SqlStr` (see [`begin_pooled`]).
pub(crate) fn begin_snapshot<B: Backend>() -> sqlx::SqlStr {
    sqlx::SqlSafeStr::into_sql_str(<B::Store as Server<B>>::BEGIN_SNAPSHOT)
}
