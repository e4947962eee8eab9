//! Running a unit of work in a short transaction of our own, with bounded retries.
//!
//! Every transaction sqlmq opens itself starts with its backend's begin statement (for MySQL a
//! bare `START TRANSACTION`: the pool's sessions are READ COMMITTED; on a caller's connection
//! `SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION`) and is retried according
//! to the class of its error:
//!
//! - deadlock, certification failure, snapshot conflict: the server rolled everything back, run
//!   the unit again;
//! - lock wait timeout: only the statement failed, so roll back explicitly, then run it again;
//! - lost connection: discard the connection; if it happened during COMMIT the outcome is
//!   unknown, and the unit's resolver (when it has one) asks the database whether the commit
//!   happened, through an id the unit wrote, before anything is retried;
//! - anything else: return the error.
//!
//! Retries are bounded, jittered and counted in `sqlmq_db_retries_total`.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use rand::RngExt;
use sqlx::{Connection, Pool, SqlSafeStr, SqlStr};

use crate::conns::{Conns, Lent};
use crate::domain::{Error, ErrorClass, Result};
use crate::store::{Backend, begin_pooled, begin_snapshot};

/// Attempts per unit of work before the error is returned.
pub(crate) const MAX_ATTEMPTS: u32 = 8;
/// First retry wait; doubles per attempt.
const BASE_BACKOFF: Duration = Duration::from_millis(5);
/// Longest retry wait.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// The future a unit of work returns.
pub(crate) type TxFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

/// A marker argument that lets unit-of-work closures borrow from their caller: `&'c &'a ()` is
/// only well-formed when `'a: 'c`, so the higher-ranked bound `for<'c>` on the closure ranges
/// over connection lifetimes within `'a` only, and the returned future may hold `'a` borrows.
pub(crate) type Scope<'c, 'a> = PhantomData<&'c &'a ()>;

/// The backend's begin statement for a caller's connection, as an owned `SqlStr`: a
/// `&'static str` argument trips the compiler's check that generic futures holding it are
/// `Send` ("not general enough").
fn begin<B: Backend>() -> SqlStr {
    B::BEGIN.into_sql_str()
}

/// Wait before retry number `attempt` (1-based), with full jitter.
fn backoff(attempt: u32) -> Duration {
    let cap = BASE_BACKOFF
        .saturating_mul(1 << attempt.min(10))
        .min(MAX_BACKOFF);
    cap.mul_f64(rand::rng().random_range(0.5..1.0))
}

fn class_label(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::RetryStatement => "retry_statement",
        ErrorClass::RetryTransaction => "retry_transaction",
        ErrorClass::Reconnect => "reconnect",
        ErrorClass::Busy => "busy",
        ErrorClass::Fatal => "fatal",
    }
}

/// Whether to retry after `err` on attempt `attempt`; counts the retry.
fn should_retry(op: &'static str, err: &Error, attempt: u32) -> bool {
    let class = match err.class() {
        // A pool timeout already waited for its whole acquire timeout: do not wait again.
        Some(c) if c.is_retryable() && c != ErrorClass::Busy => c,
        _ => return false,
    };
    if attempt >= MAX_ATTEMPTS {
        return false;
    }
    metrics::counter!(crate::telemetry::catalogue::DB_RETRIES.name(), "op" => op, "class" => class_label(class))
        .increment(1);
    tracing::debug!(op, attempt, error = %err, "retrying transaction");
    true
}

/// Run `work` in a fresh READ COMMITTED transaction on a connection of `conns`, retrying
/// transient failures.
pub(crate) async fn run<'a, B: Backend, T, F>(
    conns: &Conns<B>,
    op: &'static str,
    work: F,
) -> Result<T>
where
    T: Send,
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    type NoResolver<'a, B> =
        for<'c> fn(&'c mut <B as sqlx::Database>::Connection, Scope<'c, 'a>) -> TxFuture<'c, bool>;
    run_inner(conns, op, work, None::<NoResolver<'a, B>>).await
}

/// Like [`run`], with a resolver for a COMMIT whose outcome is unknown: it runs on a new
/// connection and returns whether the unit's writes are in the database.
pub(crate) async fn run_resolving<'a, B: Backend, T, F, R>(
    conns: &Conns<B>,
    op: &'static str,
    work: F,
    resolve: R,
) -> Result<T>
where
    T: Send,
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
    R: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, bool>,
{
    run_inner(conns, op, work, Some(resolve)).await
}

/// Run a unit that manages its own transaction on a pooled connection — `work` begins, writes
/// and commits, in as few round trips as its backend can, and on an error ends what it opened
/// unless the connection failed — retrying like [`run`]. A lost connection leaves the outcome
/// unknown: this runs the unit again, for units whose replay is harmless (a claim whose leases
/// were committed unseen only delays its messages until the leases end); see
/// [`run_own_resolving`] for the others.
pub(crate) async fn run_own<'a, B: Backend, T, F>(
    conns: &Conns<B>,
    op: &'static str,
    work: F,
) -> Result<T>
where
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    type NoResolver<'a, B, T> = for<'c> fn(
        &'c mut <B as sqlx::Database>::Connection,
        Scope<'c, 'a>,
    ) -> TxFuture<'c, Option<T>>;
    run_own_inner(conns, op, work, None::<NoResolver<'a, B, T>>).await
}

/// Like [`run_own`], with a resolver for a lost connection: it runs on a new connection and
/// returns the unit's value if its writes are in the database.
pub(crate) async fn run_own_resolving<'a, B: Backend, T, F, R>(
    conns: &Conns<B>,
    op: &'static str,
    work: F,
    resolve: R,
) -> Result<T>
where
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
    R: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, Option<T>>,
{
    run_own_inner(conns, op, work, Some(resolve)).await
}

async fn run_own_inner<'a, B: Backend, T, F, R>(
    conns: &Conns<B>,
    op: &'static str,
    mut work: F,
    mut resolve: Option<R>,
) -> Result<T>
where
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
    R: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, Option<T>>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let err = 'attempt: {
            let mut conn = match conns.take().await {
                Err(e) => break 'attempt e,
                Ok(conn) => conn,
            };
            // Abandoned half-way, it may be inside the unit's transaction or reply: closed.
            conn.in_use(true);
            let done = work(&mut conn, PhantomData).await;
            conn.in_use(false);
            let err = match done {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            if matches!(err, Error::DatabaseFull { .. }) {
                // The unit ended its own transaction, and this runner cannot see whether its
                // ROLLBACK worked: SQLite may have rolled back by itself on SQLITE_FULL, and
                // sqlx 0.9, whose ROLLBACK then fails, would count the transaction open for
                // good (the connection's next BEGIN fails). Start afresh.
                let _ = conn.close().await;
                break 'attempt err;
            }
            if err.class() != Some(ErrorClass::Reconnect) {
                break 'attempt err;
            }
            let _ = conn.close().await;
            conns.give_back_all();
            // Without a resolver the unit may run again whatever happened.
            let Some(resolve) = resolve.as_mut() else {
                break 'attempt err;
            };
            let found = ask(conns, resolve).await?;
            log_resolution(op, found.is_some());
            if let Some(value) = found {
                return Ok(value);
            }
            err
        };
        if !again(op, &err, attempts).await {
            return Err(err);
        }
    }
}

/// Ask `resolve`, on another connection, about a unit whose COMMIT outcome is unknown.
async fn ask<'a, B: Backend, O, R>(conns: &Conns<B>, resolve: &mut R) -> Result<O>
where
    R: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, O>,
{
    let mut fresh = conns.acquire().await?;
    resolve(&mut fresh, PhantomData).await
}

fn log_resolution(op: &'static str, committed: bool) {
    let outcome = if committed {
        "committed"
    } else {
        "not committed"
    };
    tracing::info!(op, "commit outcome was unknown; resolved as {outcome}");
}

/// Whether to run a unit again after `err` on attempt `attempts`: counted, and after the
/// attempt's backoff.
async fn again(op: &'static str, err: &Error, attempts: u32) -> bool {
    if !should_retry(op, err, attempts) {
        return false;
    }
    tokio::time::sleep(backoff(attempts)).await;
    true
}

/// How one attempt of a unit of work ended.
enum Attempt<T> {
    Committed(T),
    /// The unit failed before COMMIT and was rolled back (`healthy`: the connection can be
    /// reused).
    Failed {
        err: Error,
        healthy: bool,
    },
    /// COMMIT itself failed; `T` is what the unit returned.
    CommitFailed(T, Error),
}

/// One attempt of a unit on `conn`, marked in use from its BEGIN to the end of its COMMIT or
/// ROLLBACK: a caller that gives up in between leaves the connection to be closed, never kept
/// or given back (see `conns.rs`). Two ways such a connection would harm its next user: sqlx
/// (0.9, MySQL) counts a transaction as open only once the server answered its BEGIN, so one
/// abandoned before the answer leaves the server inside a transaction the client does not know
/// of (the next user's statements would run in it and hold their row locks until the
/// connection closes; a claim's `SKIP LOCKED` skips those rows meanwhile); and a reply
/// abandoned half-way through a packet leaves the rest of that packet to be read as the next
/// reply's header (the next user waits with no end). Closing rolls back whatever it had open.
async fn attempt<'a, B: Backend, T, F>(
    conn: &mut Lent<B>,
    op: &'static str,
    work: &mut F,
) -> Attempt<T>
where
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    crate::failpoints::before_begin(op).await;
    conn.in_use(true);
    let attempted = attempt_in::<B, T, F>(conn, op, work).await;
    conn.in_use(false);
    attempted
}

/// [`attempt`]'s transaction, on a connection marked in use.
async fn attempt_in<'a, B: Backend, T, F>(
    conn: &mut B::Connection,
    op: &'static str,
    work: &mut F,
) -> Attempt<T>
where
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    let begun = conn.begin_with(begin_pooled::<B>()).await;
    let mut tx = match begun {
        Ok(tx) => tx,
        Err(e) => {
            return Attempt::Failed {
                err: e.into(),
                healthy: false,
            };
        }
    };
    match work(&mut tx, PhantomData).await {
        Ok(value) => {
            crate::failpoints::before_commit(op).await;
            match tx.commit().await {
                Ok(()) => Attempt::Committed(value),
                Err(e) => Attempt::CommitFailed(value, e.into()),
            }
        }
        Err(err) => {
            // Explicit rollback: after 1205 the transaction is still open on the server.
            let rolled_back = tx.rollback().await.is_ok();
            let healthy = rolled_back && err.class() != Some(ErrorClass::Reconnect);
            Attempt::Failed { err, healthy }
        }
    }
}

async fn run_inner<'a, B: Backend, T, F, R>(
    conns: &Conns<B>,
    op: &'static str,
    mut work: F,
    mut resolve: Option<R>,
) -> Result<T>
where
    T: Send,
    F: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
    R: for<'c> FnMut(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, bool>,
{
    let mut attempts = 0;
    loop {
        attempts += 1;
        let err = match conns.take().await {
            Err(e) => e,
            Ok(mut conn) => match attempt::<B, T, F>(&mut conn, op, &mut work).await {
                Attempt::Committed(value) => return Ok(value),
                Attempt::Failed { err, healthy } => {
                    // (A transaction SQLite rolled back by itself on SQLITE_FULL fails its
                    // ROLLBACK: not healthy, closed.)
                    if !healthy {
                        let _ = conn.close().await;
                    }
                    if err.class() == Some(ErrorClass::Reconnect) {
                        conns.give_back_all();
                    }
                    err
                }
                Attempt::CommitFailed(value, err) => {
                    let _ = conn.close().await;
                    if err.class() == Some(ErrorClass::Reconnect) {
                        conns.give_back_all();
                        // Unknown outcome: never blindly replay a COMMIT.
                        let Some(resolve) = resolve.as_mut() else {
                            return Err(err);
                        };
                        let committed = ask(conns, resolve).await?;
                        log_resolution(op, committed);
                        if committed {
                            return Ok(value);
                        }
                    }
                    err
                }
            },
        };
        if !again(op, &err, attempts).await {
            return Err(err);
        }
    }
}

/// Begin a transaction on a connection from `pool` for the caller to use (`Client::begin`,
/// `JobContext::begin`), cancel-safely: the BEGIN runs in a task of its own, so a caller that
/// gives up while it is in flight leaves that task to finish it and drop the transaction, which
/// queues a ROLLBACK that the pool sends before it reuses the connection (see [`attempt`] for
/// what happens otherwise).
pub(crate) async fn begin_for_caller<B: Backend>(
    pool: &Pool<B>,
) -> Result<sqlx::Transaction<'static, B>> {
    let pool = pool.clone();
    match tokio::spawn(async move { pool.begin_with(begin_pooled::<B>()).await }).await {
        Ok(begun) => Ok(begun?),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels the task.
        Err(e) => Err(Error::from(sqlx::Error::Io(std::io::Error::other(e)))),
    }
}

/// Run the reads of `work` on a reading connection of `conns` inside one snapshot of the database
/// ([`Server::BEGIN_SNAPSHOT`]), then end the transaction: figures gathered by several
/// statements agree as if read at one instant. Not retried: reads that fail are simply asked
/// for again by their caller.
pub(crate) async fn snapshot<'a, B: Backend, T, F>(conns: &Conns<B>, work: F) -> Result<T>
where
    F: for<'c> FnOnce(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    let mut conn = conns.read().await?;
    // Abandoned half-way, it is closed (see [`attempt`]).
    conn.in_use(true);
    let read = read_snapshot::<B, T, F>(&mut conn, work).await;
    conn.in_use(false);
    read
}

/// [`snapshot`]'s transaction, on a connection marked in use.
async fn read_snapshot<'a, B: Backend, T, F>(conn: &mut B::Connection, work: F) -> Result<T>
where
    F: for<'c> FnOnce(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    let mut tx = conn.begin_with(begin_snapshot::<B>()).await?;
    let value = work(&mut tx, PhantomData).await;
    // Nothing was written: ending it either way releases the snapshot.
    tx.rollback().await?;
    value
}

/// Run `work` inside the caller's connection: in its transaction if it has one (no retries:
/// the caller owns the transaction and decides), otherwise in a transaction of its own on that
/// connection.
pub(crate) async fn run_in<'a, B: Backend, T, F>(conn: &mut B::Connection, work: F) -> Result<T>
where
    F: for<'c> FnOnce(&'c mut B::Connection, Scope<'c, 'a>) -> TxFuture<'c, T>,
{
    if conn.is_in_transaction() {
        return work(conn, PhantomData).await;
    }
    let mut tx = conn.begin_with(begin::<B>()).await?;
    let value = work(&mut tx, PhantomData).await?;
    tx.commit().await?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_grows() {
        for attempt in 1..20 {
            let d = backoff(attempt);
            assert!(d <= MAX_BACKOFF, "{d:?}");
            assert!(d >= BASE_BACKOFF.mul_f64(0.5));
        }
        assert!(backoff(1) < Duration::from_millis(10));
    }

    #[test]
    fn fatal_and_busy_errors_are_not_retried() {
        let fatal = Error::InvalidArgument("x".into());
        assert!(!should_retry("t", &fatal, 1));
        let busy = Error::from(sqlx::Error::PoolTimedOut);
        assert!(!should_retry("t", &busy, 1));
        let io = Error::from(sqlx::Error::Io(std::io::Error::other("x")));
        assert!(should_retry("t", &io, 1));
        assert!(!should_retry("t", &io, MAX_ATTEMPTS));
    }
}
