//! MySQL/MariaDB error numbers and what sqlmq does about them.
//!
//! The classes (see [`ErrorClass`]) follow the servers' documented behaviour: a lock wait timeout
//! rolls back only the statement; deadlocks and certification failures roll back the whole
//! transaction; a lost connection or a node that became read-only (failover) needs a new
//! connection, and during COMMIT leaves the outcome unknown.

use sqlx::error::DatabaseError;
use sqlx::mysql::{MySqlDatabaseError, MySqlQueryResult};

use crate::domain::{Error, ErrorClass};
use crate::store::body::{Driver, Refusal};

impl ErrorClass {
    /// Classify a MySQL or MariaDB server/client error number.
    ///
    /// ```
    /// use sqlmq::error::ErrorClass;
    /// assert_eq!(ErrorClass::for_mysql_error_number(1205), ErrorClass::RetryStatement);
    /// assert_eq!(ErrorClass::for_mysql_error_number(2013), ErrorClass::Reconnect);
    /// ```
    pub fn for_mysql_error_number(number: u16) -> ErrorClass {
        // A limit of the server's (connections, space): wait, then retry.
        if refusal_of(number).is_some() {
            return ErrorClass::Busy;
        }
        match number {
            // ER_LOCK_WAIT_TIMEOUT: only the statement is rolled back (unless
            // innodb_rollback_on_timeout), so the caller must roll back itself.
            1205 => ErrorClass::RetryStatement,
            // Deadlock (also Galera certification), MariaDB snapshot isolation "record has
            // changed", Group Replication certification, prepared statement needs re-prepare
            // (sqlx#2394: the connection is dropped by us, the transaction retried).
            1213 | 1020 | 3101 | 1615 => ErrorClass::RetryTransaction,
            // Server gone / lost, read-only after failover, node not ready, idle disconnect.
            2006 | 2013 | 1290 | 1792 | 1836 | 1047 | 4031 | 1053 | 1927 => ErrorClass::Reconnect,
            _ => ErrorClass::Fatal,
        }
    }
}

impl Error {
    /// The MySQL/MariaDB error number behind a database error, if any.
    ///
    /// ```
    /// assert_eq!(sqlmq::Error::UnknownQueue("q".into()).mysql_error_number(), None);
    /// ```
    pub fn mysql_error_number(&self) -> Option<u16> {
        match self {
            Error::Database {
                source: sqlx::Error::Database(db),
                ..
            }
            | Error::ConnectionLimit {
                source: sqlx::Error::Database(db),
                ..
            }
            | Error::DatabaseFull {
                source: sqlx::Error::Database(db),
            }
            | Error::PermissionDenied {
                source: sqlx::Error::Database(db),
                ..
            } => db
                .try_downcast_ref::<MySqlDatabaseError>()
                .map(|e| e.number()),
            _ => None,
        }
    }
}

/// Whether a server error is a refusal for want of a privilege: ER_DBACCESS_DENIED_ERROR (1044),
/// ER_TABLEACCESS_DENIED_ERROR (1142), ER_COLUMNACCESS_DENIED_ERROR (1143),
/// ER_SPECIFIC_ACCESS_DENIED_ERROR (1227), ER_PROCACCESS_DENIED_ERROR (1370).
pub(crate) fn is_permission_denied(db: &dyn DatabaseError) -> bool {
    db.try_downcast_ref::<MySqlDatabaseError>()
        .is_some_and(|e| matches!(e.number(), 1044 | 1142 | 1143 | 1227 | 1370))
}

/// The resource a server error refuses the work for want of: ER_CON_COUNT_ERROR (1040),
/// ER_TOO_MANY_USER_CONNECTIONS (1203), ER_USER_LIMIT_REACHED (1226) — new connections;
/// ER_RECORD_FILE_FULL (1114: InnoDB cannot extend a tablespace, on a full disk or at the
/// data file's `max`), ER_DISK_FULL (1021) — space.
pub(crate) fn refusal(db: &dyn DatabaseError) -> Option<Refusal> {
    refusal_of(db.try_downcast_ref::<MySqlDatabaseError>()?.number())
}

/// [`refusal`] by error number.
fn refusal_of(number: u16) -> Option<Refusal> {
    match number {
        1040 => Some(Refusal::Connections("max_connections")),
        1203 => Some(Refusal::Connections("max_user_connections")),
        1226 => Some(Refusal::Connections("per-user resource limit")),
        1114 | 1021 => Some(Refusal::Space),
        _ => None,
    }
}

/// The class of a server error, if it is a MySQL/MariaDB one.
pub(crate) fn classify(db: &dyn DatabaseError) -> Option<ErrorClass> {
    db.try_downcast_ref::<MySqlDatabaseError>()
        .map(|e| ErrorClass::for_mysql_error_number(e.number()))
}

impl Driver for sqlx::MySql {
    fn rows_affected(done: &MySqlQueryResult) -> u64 {
        done.rows_affected()
    }

    fn classify(db: &dyn DatabaseError) -> Option<ErrorClass> {
        classify(db)
    }

    fn is_permission_denied(db: &dyn DatabaseError) -> bool {
        is_permission_denied(db)
    }

    fn refusal(db: &dyn DatabaseError) -> Option<Refusal> {
        refusal(db)
    }

    /// ER_NO_SUCH_TABLE.
    fn is_missing_table(db: &dyn DatabaseError) -> bool {
        db.try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|e| e.number() == 1146)
    }

    /// ER_DUP_FIELDNAME (an added column exists), ER_CANT_DROP_FIELD_OR_KEY (a dropped one
    /// does not), ER_BAD_FIELD_ERROR (a column read is not there).
    fn is_column_change_done(db: &dyn DatabaseError) -> bool {
        db.try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|e| matches!(e.number(), 1060 | 1061 | 1091 | 1054))
    }

    fn connection_failed() {
        super::connect::connection_failed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_documented_numbers() {
        use ErrorClass::*;
        for (n, class) in [
            (1205, RetryStatement),
            (1213, RetryTransaction),
            (1020, RetryTransaction),
            (3101, RetryTransaction),
            (2006, Reconnect),
            (2013, Reconnect),
            (1290, Reconnect),
            (1792, Reconnect),
            (1836, Reconnect),
            (1047, Reconnect),
            (1040, Busy),
            (1203, Busy),
            (1226, Busy),
            (1114, Busy),
            (1021, Busy),
            (1062, Fatal),
            (1146, Fatal),
        ] {
            assert_eq!(ErrorClass::for_mysql_error_number(n), class, "error {n}");
        }
    }
}
