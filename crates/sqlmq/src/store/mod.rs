//! The storage seam: everything that knows SQL.
//!
//! The engine (`client`, `queue`, `tx`) validates input, opens transactions, retries and
//! records metrics; it calls into a backend for every read and write. Today the backend is
//! `mysql` (MySQL 8.0+ and MariaDB 10.6+), whose module holds every statement and the
//! migrations. A SQLite backend will sit beside it behind the same calls.

pub(crate) mod mysql;
pub(crate) mod statements;

use crate::domain::{Error, ErrorClass};

/// What to do about a driver error: I/O and pool errors are the same for every backend; a
/// server's own errors are classified by the backend that knows its error numbers.
fn classify(err: &sqlx::Error) -> ErrorClass {
    match err {
        sqlx::Error::Database(db) => {
            mysql::errors::classify(db.as_ref()).unwrap_or(ErrorClass::Fatal)
        }
        sqlx::Error::Io(_) => ErrorClass::Reconnect,
        sqlx::Error::PoolTimedOut => ErrorClass::Busy,
        _ => ErrorClass::Fatal,
    }
}

impl From<sqlx::Error> for Error {
    fn from(source: sqlx::Error) -> Self {
        Error::Database {
            class: classify(&source),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::{Error, ErrorClass};

    #[test]
    fn io_errors_mean_reconnect() {
        let err = Error::from(sqlx::Error::Io(std::io::Error::other("reset")));
        assert_eq!(err.class(), Some(ErrorClass::Reconnect));
        assert!(err.is_retryable());
        assert!(!Error::from(sqlx::Error::PoolClosed).is_retryable());
    }
}
