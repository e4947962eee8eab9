//! Driver errors as [`Error`]s: I/O and pool errors mean the same on every backend; a server's
//! own errors are classified by the backend that knows its error numbers ([`Driver`]).
//!
//! sqlmq's statements convert their errors knowing their backend ([`db_error`]). A driver
//! error converted without it — `?` on a sqlx result, in the engine or in a caller's own code
//! — asks the drivers of the backends this process has opened a store of ([`register`]), as
//! sqlx's `Any` asks the drivers installed with `install_default_drivers`.

use std::any::TypeId;
use std::sync::RwLock;

use sqlx::error::DatabaseError;

use super::body::{Driver, Refusal};
use crate::domain::{Error, ErrorClass, RUNTIME_GRANTS_NEEDED};

/// What to do about a driver error that is not a server's own: the same for every backend.
fn generic_class(err: &sqlx::Error) -> ErrorClass {
    match err {
        sqlx::Error::Io(_) => ErrorClass::Reconnect,
        sqlx::Error::PoolTimedOut => ErrorClass::Busy,
        _ => ErrorClass::Fatal,
    }
}

/// One backend's answers about its errors.
#[derive(Clone, Copy)]
struct Facts {
    backend: TypeId,
    classify: fn(&dyn DatabaseError) -> Option<ErrorClass>,
    is_permission_denied: fn(&dyn DatabaseError) -> bool,
    refusal: fn(&dyn DatabaseError) -> Option<Refusal>,
    connection_failed: fn(),
}

impl Facts {
    fn of<B: Driver>() -> Facts {
        Facts {
            backend: TypeId::of::<B>(),
            classify: B::classify,
            is_permission_denied: B::is_permission_denied,
            refusal: B::refusal,
            connection_failed: B::connection_failed,
        }
    }
}

/// The backends this process has opened a store of.
static DRIVERS: RwLock<Vec<Facts>> = RwLock::new(Vec::new());

/// Make `From<sqlx::Error>` know backend `B`'s errors (done by every store it opens).
pub(crate) fn register<B: Driver>() {
    let known = |drivers: &[Facts]| drivers.iter().any(|d| d.backend == TypeId::of::<B>());
    if known(&DRIVERS.read().expect("poisoned")) {
        return;
    }
    let mut drivers = DRIVERS.write().expect("poisoned");
    if !known(&drivers) {
        drivers.push(Facts::of::<B>());
    }
}

/// `err` as an [`Error`], with the facts of the backends that may have raised it.
fn convert(err: sqlx::Error, drivers: &[Facts]) -> Error {
    if let sqlx::Error::Database(db) = &err
        && drivers
            .iter()
            .any(|d| (d.is_permission_denied)(db.as_ref()))
    {
        return Error::PermissionDenied {
            needs: RUNTIME_GRANTS_NEEDED,
            source: err,
        };
    }
    if let sqlx::Error::Database(db) = &err
        && let Some(refusal) = drivers.iter().find_map(|d| (d.refusal)(db.as_ref()))
    {
        return match refusal {
            Refusal::Connections(limit) => Error::ConnectionLimit { limit, source: err },
            Refusal::Space => Error::DatabaseFull { source: err },
        };
    }
    let class = match &err {
        sqlx::Error::Database(db) => drivers
            .iter()
            .find_map(|d| (d.classify)(db.as_ref()))
            .unwrap_or(ErrorClass::Fatal),
        sqlx::Error::Io(_) => {
            for d in drivers {
                (d.connection_failed)();
            }
            ErrorClass::Reconnect
        }
        _ => generic_class(&err),
    };
    Error::Database { class, source: err }
}

/// A driver error of backend `B` as an [`Error`], classified by that backend.
pub(crate) fn db_error<B: Driver>(err: sqlx::Error) -> Error {
    convert(err, &[Facts::of::<B>()])
}

impl From<sqlx::Error> for Error {
    fn from(source: sqlx::Error) -> Self {
        convert(source, &DRIVERS.read().expect("poisoned"))
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
