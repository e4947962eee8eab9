//! `sqlmq::Error` as Python exceptions: one class per kind of mistake a caller can match on,
//! under one base, [`Error`].
//!
//! ```text
//! Error
//! ├── InvalidInput          a bad name, argument or payload: nothing was written
//! │   ├── InvalidName
//! │   └── PayloadTooLarge
//! ├── NotFound              what the call names does not exist (any more)
//! │   ├── UnknownQueue, UnknownTopic, UnknownGroup, UnknownSchedule
//! │   ├── MessageNotFound, DependencyNotFound, BatchNotFound
//! │   └── Deleted           a worker's queue or group was deleted while it ran
//! ├── LeaseLost             the receipt's lease ended or was taken over: roll back
//! │   └── Cancelled         the message was cancelled while in flight
//! ├── Conflict              the message is in flight, the batch sealed
//! ├── SchemaMismatch        the schema is newer or older than this sqlmq
//! └── DatabaseError         the database failed; `retryable` says whether trying again can help
//! ```
//!
//! Every exception carries the library's message; a `DatabaseError` also `retryable` and
//! `error_class` (`retry_statement`, `retry_transaction`, `reconnect`, `busy`, `fatal`).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_sqlmq, Error, PyException, "Base of every sqlmq error.");
create_exception!(
    _sqlmq,
    InvalidInput,
    Error,
    "A bad name, argument or payload; nothing was written."
);
create_exception!(
    _sqlmq,
    InvalidName,
    InvalidInput,
    "A name that is not 1 to 128 characters of A-Z a-z 0-9 . _ -."
);
create_exception!(
    _sqlmq,
    PayloadTooLarge,
    InvalidInput,
    "A body larger than the client's limit (1 MiB by default)."
);
create_exception!(
    _sqlmq,
    NotFound,
    Error,
    "What the call names does not exist (any more)."
);
create_exception!(_sqlmq, UnknownQueue, NotFound, "No queue of that name.");
create_exception!(_sqlmq, UnknownTopic, NotFound, "No topic of that name.");
create_exception!(
    _sqlmq,
    UnknownGroup,
    NotFound,
    "No consumer group of that name on the topic."
);
create_exception!(
    _sqlmq,
    UnknownSchedule,
    NotFound,
    "No schedule of that name."
);
create_exception!(
    _sqlmq,
    MessageNotFound,
    NotFound,
    "The message is unknown, or no longer in the state the call needs."
);
create_exception!(
    _sqlmq,
    DependencyNotFound,
    NotFound,
    "A message named as a dependency is not stored (or was cancelled)."
);
create_exception!(_sqlmq, BatchNotFound, NotFound, "The batch is unknown.");
create_exception!(
    _sqlmq,
    Deleted,
    NotFound,
    "A worker's queue or group was deleted while it ran, or its id went to another one."
);
create_exception!(
    _sqlmq,
    LeaseLost,
    Error,
    "The receipt's lease ended or was taken over; nothing was changed (roll back)."
);
create_exception!(
    _sqlmq,
    Cancelled,
    LeaseLost,
    "The message was cancelled while in flight; nothing was changed (roll back)."
);
create_exception!(
    _sqlmq,
    Conflict,
    Error,
    "The message is in flight, or the batch is sealed."
);
create_exception!(
    _sqlmq,
    SchemaMismatch,
    Error,
    "The database schema is newer or older than this sqlmq (run migrate, or upgrade)."
);
create_exception!(
    _sqlmq,
    DatabaseError,
    Error,
    "The database failed; `retryable` says whether trying again can help."
);

/// The Python exception for a library error.
pub(crate) fn to_py(err: sqlmq::Error) -> PyErr {
    use sqlmq::Error as E;
    let message = err.to_string();
    match &err {
        E::InvalidName { .. } => InvalidName::new_err(message),
        E::PayloadTooLarge { .. } => PayloadTooLarge::new_err(message),
        E::InvalidArgument(_) | E::Json(_) => InvalidInput::new_err(message),
        E::UnknownQueue(_) => UnknownQueue::new_err(message),
        E::UnknownTopic(_) => UnknownTopic::new_err(message),
        E::UnknownGroup { .. } => UnknownGroup::new_err(message),
        E::UnknownSchedule(_) => UnknownSchedule::new_err(message),
        E::MessageNotFound(_) => MessageNotFound::new_err(message),
        E::DependencyNotFound(_) => DependencyNotFound::new_err(message),
        E::BatchNotFound(_) => BatchNotFound::new_err(message),
        E::Deleted { .. } => Deleted::new_err(message),
        E::LeaseLost { .. } => LeaseLost::new_err(message),
        E::Cancelled { .. } => Cancelled::new_err(message),
        E::MessageInFlight(_) | E::BatchSealed(_) => Conflict::new_err(message),
        E::SchemaTooNew { .. } | E::SchemaOutdated { .. } | E::DowngradeRefused { .. } => {
            SchemaMismatch::new_err(message)
        }
        _ => database_error(&err, message),
    }
}

/// A [`DatabaseError`] with `retryable` and `error_class` set from the error's class.
fn database_error(err: &sqlmq::Error, message: String) -> PyErr {
    use sqlmq::error::ErrorClass as C;
    let class = match err.class() {
        Some(C::RetryStatement) => "retry_statement",
        Some(C::RetryTransaction) => "retry_transaction",
        Some(C::Reconnect) => "reconnect",
        Some(C::Busy) => "busy",
        Some(C::Fatal) | None => "fatal",
        Some(_) => "fatal",
    };
    let retryable = err.is_retryable();
    Python::attach(|py| {
        let e = DatabaseError::new_err(message);
        let value = e.value(py);
        let _ = value.setattr("retryable", retryable);
        let _ = value.setattr("error_class", class);
        e
    })
}

/// Add every exception class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (name, class) in [
        ("Error", py.get_type::<Error>()),
        ("InvalidInput", py.get_type::<InvalidInput>()),
        ("InvalidName", py.get_type::<InvalidName>()),
        ("PayloadTooLarge", py.get_type::<PayloadTooLarge>()),
        ("NotFound", py.get_type::<NotFound>()),
        ("UnknownQueue", py.get_type::<UnknownQueue>()),
        ("UnknownTopic", py.get_type::<UnknownTopic>()),
        ("UnknownGroup", py.get_type::<UnknownGroup>()),
        ("UnknownSchedule", py.get_type::<UnknownSchedule>()),
        ("MessageNotFound", py.get_type::<MessageNotFound>()),
        ("DependencyNotFound", py.get_type::<DependencyNotFound>()),
        ("BatchNotFound", py.get_type::<BatchNotFound>()),
        ("Deleted", py.get_type::<Deleted>()),
        ("LeaseLost", py.get_type::<LeaseLost>()),
        ("Cancelled", py.get_type::<Cancelled>()),
        ("Conflict", py.get_type::<Conflict>()),
        ("SchemaMismatch", py.get_type::<SchemaMismatch>()),
        ("DatabaseError", py.get_type::<DatabaseError>()),
    ] {
        m.add(name, class)?;
    }
    Ok(())
}
