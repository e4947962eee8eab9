//! The connections sqlmq's own transactions and reads run on: kept between transactions
//! instead of given back to the pool after each one.
//!
//! Why: sqlx (0.9) tests every connection given back to its pool with a ping — a round trip to
//! the server, from a task it spawns — whatever the connection just did, and offers no option
//! to skip it. sqlmq gives a connection back after every transaction (a send, a claim, an ack),
//! so each paid a second round trip that did nothing: a loop of single INSERTs that takes a
//! pooled connection per INSERT runs at 0.65–0.80× of one that keeps its connection, on 1 and
//! on 16 connections (docs/BENCHMARKS.md, "Connections kept between transactions, and a lone
//! send as one statement").
//!
//! So a connection sqlmq finished with is kept here, checked out of the pool, and the next
//! transaction or read of sqlmq's takes the one kept last (the newest, so that a steady load
//! cycles through as few as it needs). It goes back to the pool instead when:
//!
//! - it must be closed (broken, or abandoned half-way: see below): it is;
//! - the pool has no idle connection and no room for another: someone may be waiting for one,
//!   and only a connection given back to the pool wakes them;
//! - it has been kept unused for [`KEEP_FOR`], or the pool is closed: a task gives it back,
//!   so that the pool's own limits, idle timeouts and `Pool::close` (which waits for every
//!   checked-out connection) see it again.
//!
//! Every connection sqlmq itself uses comes from here, its reads' too: a connection kept idle
//! here while sqlmq's next read made the pool open another would cost a connection, and at a
//! server's per-user limit a refusal (caught by the CLI's tests of such limits). Only `tx.rs`'s
//! units, which close a connection an error may have broken, give theirs back to be kept; any
//! other use gives its connection back to the pool, whose ping finds a broken one (kept, a
//! connection lost in a server restart would go round forever; caught by the CLI's restart
//! test). Only the application's own users of `Client::pool` (and `Client::begin`) take theirs
//! from the pool.
//! A connection kept here counts against the pool's `max_connections` like any checked-out
//! one: the limit holds. Where the database has one writer (SQLite), whose connection every
//! writer needs in turn and whose ping is free, nothing is kept.
//!
//! A unit of work whose caller gives up half-way (a timeout, an HTTP client gone, a handler
//! stopped, a lease extension dropped when its handler ends) may leave its connection inside
//! its transaction, or in the middle of a reply: sqlx (0.9, MySQL) then reads the rest of a
//! half-read packet as the next reply's header and waits, with no end, for bytes that never
//! come — whoever uses that connection next hangs. So a unit marks its connection
//! [`Lent::in_use`] for as long as it runs: dropped so marked, the connection is closed (which
//! also rolls back what it had open), never kept nor given back. What goes back to the pool
//! half-way anyway (a plain read, the application's transaction) meets the pool's release
//! check (`store/mysql/connect.rs`).

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sqlx::Pool;
use sqlx::pool::PoolConnection;

use crate::domain::Result;
use crate::store::Backend;

/// How long a connection is kept unused before it goes back to the pool.
pub(crate) const KEEP_FOR: Duration = Duration::from_secs(1);

/// How often the kept connections are checked for age.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// A kept connection and when it was last given back.
struct Kept<B: Backend> {
    conn: PoolConnection<B>,
    since: Instant,
}

type Shelf<B> = Mutex<Vec<Kept<B>>>;

/// The pool and what is kept from it.
struct Home<B: Backend> {
    pool: Pool<B>,
    /// Where plain reads go: the same pool where anything is kept, SQLite's readers otherwise.
    reader: Pool<B>,
    /// `None` where nothing is kept (one writer).
    shelf: Option<Shelf<B>>,
}

/// The pool of sqlmq's transactions, with the connections kept from its last ones.
pub(crate) struct Conns<B: Backend> {
    home: Arc<Home<B>>,
}

impl<B: Backend> Conns<B> {
    /// Keep connections of `pool` (unless its database has one writer), with a task that
    /// gives back those kept too long and all of them once the pool is closed.
    pub(crate) fn new(pool: Pool<B>, reader: Pool<B>) -> Conns<B> {
        let keeps = !B::ONE_WRITER;
        let home = Arc::new(Home {
            pool,
            reader,
            shelf: keeps.then(Shelf::<B>::default),
        });
        if keeps {
            tokio::spawn(sweep(home.pool.clone(), Arc::downgrade(&home)));
        }
        Conns { home }
    }

    /// The connection kept last, or one from the pool, for one of `tx.rs`'s units, which close
    /// it on any error that may have broken it: kept again when dropped.
    pub(crate) async fn take(&self) -> Result<Lent<B>> {
        self.lend(true).await
    }

    /// The connection kept last, or one from the pool, for a use that does not tell whether an
    /// error broke it: given back to the pool when dropped, which tests it. Taken from what is
    /// kept all the same, so that a kept connection is never idle while the pool opens another.
    pub(crate) async fn acquire(&self) -> Result<Lent<B>> {
        self.lend(false).await
    }

    async fn lend(&self, keep: bool) -> Result<Lent<B>> {
        let kept = self
            .home
            .shelf
            .as_ref()
            .and_then(|s| s.lock().expect("poisoned").pop());
        let conn = match kept {
            Some(k) => k.conn,
            None => self.home.pool.acquire().await?,
        };
        Ok(Lent {
            conn: Some(conn),
            home: Arc::clone(&self.home),
            keep,
            in_use: false,
        })
    }

    /// A connection for plain reads, as [`Conns::acquire`] lends one where the reads share
    /// the pool (MySQL); one of the readers' pool otherwise (SQLite, where nothing is kept).
    pub(crate) async fn read(&self) -> Result<Lent<B>> {
        if self.home.shelf.is_some() {
            return self.acquire().await;
        }
        Ok(Lent {
            conn: Some(self.home.reader.acquire().await?),
            home: Arc::clone(&self.home),
            keep: false,
            in_use: false,
        })
    }

    /// Give every kept connection back to the pool (which tests each): after a lost
    /// connection, the others kept with it were most likely lost with it (a server restart),
    /// and a unit of work should not spend its retries finding that out one by one.
    pub(crate) fn give_back_all(&self) {
        if let Some(shelf) = &self.home.shelf {
            let all = std::mem::take(&mut *shelf.lock().expect("poisoned"));
            drop(all);
        }
    }

    /// How many connections are kept.
    #[cfg(all(test, feature = "sqlite"))]
    fn kept(&self) -> usize {
        self.home
            .shelf
            .as_ref()
            .map_or(0, |s| s.lock().expect("poisoned").len())
    }
}

/// Whether the pool can hand out a connection without one given back: one is idle, or it may
/// open another.
fn has_spare<B: Backend>(pool: &Pool<B>) -> bool {
    pool.num_idle() > 0 || pool.size() < pool.options().get_max_connections()
}

/// Give back what was kept longer than [`KEEP_FOR`], and everything once the pool is closed;
/// ends with the last [`Conns`].
async fn sweep<B: Backend>(pool: Pool<B>, home: Weak<Home<B>>) {
    let closed = pool.close_event();
    tokio::pin!(closed);
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let closing = tokio::select! {
            () = &mut closed => true,
            _ = every.tick() => false,
        };
        let Some(home) = home.upgrade() else {
            return;
        };
        let Some(shelf) = home.shelf.as_ref() else {
            return;
        };
        let old: Vec<Kept<B>> = {
            let mut kept = shelf.lock().expect("poisoned");
            if closing {
                std::mem::take(&mut *kept)
            } else {
                // Oldest first: the newest are on top.
                let stale = kept
                    .iter()
                    .take_while(|k| k.since.elapsed() >= KEEP_FOR)
                    .count();
                kept.drain(..stale).collect()
            }
        };
        drop(old);
        if closing {
            return;
        }
    }
}

/// A connection lent to one of sqlmq's transactions; dropped, it is kept for the next one
/// or given back to the pool (see the module's rules).
pub(crate) struct Lent<B: Backend> {
    /// Always `Some` until dropped or closed.
    conn: Option<PoolConnection<B>>,
    home: Arc<Home<B>>,
    keep: bool,
    /// A unit of work runs on it: dropped now, it was abandoned half-way (see the module).
    in_use: bool,
}

impl<B: Backend> Lent<B> {
    /// Mark (`true`) or unmark the connection as in the middle of a unit of work: dropped while
    /// marked, it is closed instead of kept or given back (see the module).
    pub(crate) fn in_use(&mut self, in_use: bool) {
        self.in_use = in_use;
    }

    /// Close the connection now.
    pub(crate) async fn close(mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.close().await;
        }
    }
}

impl<B: Backend> std::ops::Deref for Lent<B> {
    type Target = B::Connection;

    fn deref(&self) -> &B::Connection {
        self.conn.as_ref().expect("lent connection present")
    }
}

impl<B: Backend> std::ops::DerefMut for Lent<B> {
    fn deref_mut(&mut self) -> &mut B::Connection {
        self.conn.as_mut().expect("lent connection present")
    }
}

impl<B: Backend> Drop for Lent<B> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if self.in_use {
            // Abandoned half-way: closing it (no read; the server rolls back what it had
            // open) is the only safe end.
            conn.close_on_drop();
            return;
        }
        if !self.keep {
            return;
        }
        let Some(shelf) = self.home.shelf.as_ref() else {
            return;
        };
        let pool = &self.home.pool;
        if pool.is_closed() || !has_spare(pool) {
            return;
        }
        shelf.lock().expect("poisoned").push(Kept {
            conn,
            since: Instant::now(),
        });
    }
}

// On SQLite: nothing to set up.
#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::*;
    use sqlx::Sqlite;
    use sqlx::sqlite::SqlitePoolOptions;

    #[tokio::test]
    async fn one_writer_keeps_nothing() {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .unwrap();
        let conns = Conns::<Sqlite>::new(pool.clone(), pool.clone());
        let lent = conns.take().await.unwrap();
        drop(lent);
        assert_eq!(conns.kept(), 0);
        // The writer went back to the pool: the next caller gets it.
        let again = tokio::time::timeout(Duration::from_secs(1), pool.acquire()).await;
        assert!(again.is_ok());
    }
}
