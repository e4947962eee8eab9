//! SQLite result codes and what sqlmq does about them.
//!
//! `SQLITE_BUSY` (another connection holds the write lock past the busy timeout, or a read
//! snapshot went stale for a write) and `SQLITE_LOCKED` (a conflict within one shared cache)
//! leave the transaction to be rolled back and run again, like a deadlock on a server: the
//! engine retries them, so "database is locked" reaches the caller only after every retry.

use sqlx::error::DatabaseError;
use sqlx::sqlite::{SqliteError, SqliteQueryResult};

use crate::domain::ErrorClass;
use crate::store::body::{Driver, Refusal};

/// `SQLITE_BUSY`
const BUSY: i32 = 5;
/// `SQLITE_LOCKED`
const LOCKED: i32 = 6;
/// `SQLITE_FULL`: the disk is full, or the database reached `max_page_count`.
const FULL: i32 = 13;

impl ErrorClass {
    /// Classify a SQLite result code (primary or extended).
    ///
    /// ```
    /// use sqlmq::error::ErrorClass;
    /// assert_eq!(ErrorClass::for_sqlite_code(5), ErrorClass::RetryTransaction); // SQLITE_BUSY
    /// assert_eq!(ErrorClass::for_sqlite_code(517), ErrorClass::RetryTransaction); // BUSY_SNAPSHOT
    /// assert_eq!(ErrorClass::for_sqlite_code(13), ErrorClass::Busy); // SQLITE_FULL
    /// assert_eq!(ErrorClass::for_sqlite_code(2067), ErrorClass::Fatal); // CONSTRAINT_UNIQUE
    /// ```
    pub fn for_sqlite_code(code: i32) -> ErrorClass {
        match code & 0xff {
            BUSY | LOCKED => ErrorClass::RetryTransaction,
            // Out of space: wait, then retry (`refusal`).
            FULL => ErrorClass::Busy,
            _ => ErrorClass::Fatal,
        }
    }
}

/// The SQLite result code of a database error, if it is a SQLite one.
pub(crate) fn code(db: &dyn DatabaseError) -> Option<i32> {
    db.try_downcast_ref::<SqliteError>()
        .and_then(|e| e.code())
        .and_then(|c| c.parse().ok())
}

/// The class of a database error, if it is a SQLite one.
pub(crate) fn classify(db: &dyn DatabaseError) -> Option<ErrorClass> {
    code(db).map(ErrorClass::for_sqlite_code)
}

impl Driver for sqlx::Sqlite {
    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    fn classify(db: &dyn DatabaseError) -> Option<ErrorClass> {
        classify(db)
    }

    fn refusal(db: &dyn DatabaseError) -> Option<Refusal> {
        code(db)
            .is_some_and(|c| c & 0xff == FULL)
            .then_some(Refusal::Space)
    }

    /// `SQLITE_ERROR` with SQLite's message for it (a prepare that names no table).
    fn is_missing_table(db: &dyn DatabaseError) -> bool {
        code(db).is_some_and(|c| c & 0xff == 1) && db.message().starts_with("no such table")
    }

    /// `SQLITE_ERROR` with SQLite's messages for an added column that exists and a dropped one
    /// that does not.
    fn is_column_change_done(db: &dyn DatabaseError) -> bool {
        let message = db.message();
        code(db).is_some_and(|c| c & 0xff == 1)
            && (message.starts_with("duplicate column name")
                || message.starts_with("no such column"))
    }
}
