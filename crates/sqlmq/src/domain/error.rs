//! The error type and the classes of database errors.
//!
//! Every fallible call in sqlmq returns [`Error`]. Client mistakes (bad names, oversized payloads,
//! unknown queues, stale receipts) have their own variants so that callers can match on them;
//! database failures keep the driver error as their `source` and carry an [`ErrorClass`] that
//! says what a caller may do about them. Which server errors fall in which class is each
//! backend's knowledge (`store/mysql/errors.rs`); `store/mod.rs` turns driver errors into
//! [`Error`]s by asking them.

use super::id::MessageId;

/// Shorthand for `Result<T, sqlmq::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in sqlmq.
///
/// ```
/// use sqlmq::Error;
///
/// fn explain(err: &Error) -> &'static str {
///     match err {
///         Error::LeaseLost { .. } => "another consumer owns the message now: roll back",
///         e if e.is_retryable() => "transient: try again",
///         _ => "fatal",
///     }
/// }
/// # let _ = explain;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A queue (or other object) name that is not `[A-Za-z0-9._-]{1,128}`.
    #[error("invalid {kind} name {name:?}: names are 1 to 128 characters of A-Z a-z 0-9 . _ -")]
    InvalidName {
        /// What was being named: "queue", "table prefix", ...
        kind: &'static str,
        /// The rejected name.
        name: String,
    },

    /// A message body larger than the configured limit.
    #[error("payload of {size} bytes exceeds the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Size of the rejected body in bytes.
        size: usize,
        /// The limit in force.
        limit: usize,
    },

    /// An argument out of its documented range (batch size, lease, key length, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The queue does not exist (create it with `Client::create_queue` or `sqlmq queue create`).
    #[error("unknown queue {0:?} (create it first: `sqlmq queue create {0}`)")]
    UnknownQueue(String),

    /// The topic does not exist (create it with `Client::create_topic` or `sqlmq topic create`).
    #[error("unknown topic {0:?} (create it first: `sqlmq topic create {0}`)")]
    UnknownTopic(String),

    /// The schedule does not exist (create it with `Client::create_schedule` or
    /// `sqlmq schedule create`).
    #[error("unknown schedule {0:?}")]
    UnknownSchedule(String),

    /// The consumer group does not exist on that topic.
    #[error("unknown consumer group {group:?} of topic {topic:?}")]
    UnknownGroup {
        /// The topic.
        topic: String,
        /// The group.
        group: String,
    },

    /// The queue or consumer group a worker serves was deleted while the worker ran, or its id
    /// now belongs to another queue or group (the database was re-created or restored): a
    /// handle keeps the id it looked up. The worker stopped claiming at once, touching nothing
    /// of the other one; start it again to look the name up anew.
    ///
    /// ```
    /// let e = sqlmq::Error::Deleted { what: "queue \"old\"".into(), now: Some("queue \"new\"".into()) };
    /// assert_eq!(
    ///     e.to_string(),
    ///     "queue \"old\" was deleted while in use; its id now belongs to queue \"new\""
    /// );
    /// ```
    #[error("{what} was deleted while in use{}", now.as_ref().map(|n| format!("; its id now belongs to {n}")).unwrap_or_default())]
    Deleted {
        /// What was deleted: `queue "name"`, or `consumer group "g" of topic "t"`.
        what: String,
        /// What holds its id now, if anything.
        now: Option<String>,
    },

    /// The message is unknown, or no longer in the state the call needs.
    #[error("message {0} not found")]
    MessageNotFound(MessageId),

    /// A message names a dependency that is neither stored (pending or dead) nor a tracked
    /// message acked within the flow retention, or one that was cancelled.
    #[error(
        "dependency {0} not found: it is not stored, or was cancelled or acked without being tracked"
    )]
    DependencyNotFound(MessageId),

    /// The batch is unknown (never created, or past the flow retention).
    #[error("batch {0} not found")]
    BatchNotFound(crate::domain::BatchId),

    /// The batch was sealed: no member can be added any more.
    #[error("batch {0} is sealed: no member can be added")]
    BatchSealed(crate::domain::BatchId),

    /// The call needs a message that is waiting, but it is being processed right now.
    #[error("message {0} is in flight and cannot be changed until its lease ends")]
    MessageInFlight(MessageId),

    /// The receipt's lease is no longer valid: it expired, the message was released or claimed
    /// again (a new fencing token was issued), or it was already acked. Nothing was changed.
    /// Inside `ack_in`/`nack_in`, roll back the transaction: another consumer owns the message.
    #[error("lease lost for message {id} (token {token}): it expired or was claimed again")]
    LeaseLost {
        /// The message.
        id: MessageId,
        /// The stale fencing token.
        token: u64,
    },

    /// The message was cancelled while a consumer held it ([`Queue::cancel`](crate::Queue::cancel)):
    /// no settlement of its receipt takes effect, and it is never delivered
    /// again. Inside `ack_in`, roll the transaction back. A worker's handler sees it coming
    /// through [`JobContext::cancelled`](crate::JobContext::cancelled).
    ///
    /// ```
    /// let e = sqlmq::Error::Cancelled { id: sqlmq::MessageId::new(), reason: "by operator".into() };
    /// assert!(e.to_string().contains("cancelled"));
    /// ```
    #[error("message {id} was cancelled while in flight: {reason}")]
    Cancelled {
        /// The message.
        id: MessageId,
        /// Why (the cancel's reason).
        reason: String,
    },

    /// A durable run suspended itself — a [`sleep`](crate::JobContext::sleep) or an
    /// [`event wait`](crate::JobContext::wait_for_event) that is not over: its message is back
    /// in the queue until then, and the handler should return this error as it is (`?`). The
    /// worker does not count it as a failure.
    ///
    /// ```
    /// let e = sqlmq::Error::Suspended { id: sqlmq::MessageId::new() };
    /// assert!(e.to_string().contains("suspended"));
    /// ```
    #[error("the run of message {id} is suspended until its sleep ends or its event comes")]
    Suspended {
        /// The message.
        id: MessageId,
    },

    /// A durable run reached a different step than its journal recorded at this place: the
    /// handler's path changed between deliveries (new code, or a decision that is not itself
    /// a step). Nothing was replayed; the attempt fails.
    ///
    /// ```
    /// let e = sqlmq::Error::StepMismatch {
    ///     id: sqlmq::MessageId::new(),
    ///     seq: 1,
    ///     recorded: "step \"charge\"".into(),
    ///     requested: "step \"refund\"".into(),
    /// };
    /// assert!(e.to_string().contains("charge"));
    /// ```
    #[error(
        "message {id}'s run reached {requested} where its journal has {recorded} (call {seq}): the handler's steps changed order"
    )]
    StepMismatch {
        /// The message.
        id: MessageId,
        /// The place of the call in the run (0 for the first).
        seq: u32,
        /// What the journal recorded there.
        recorded: String,
        /// What the handler called.
        requested: String,
    },

    /// A durable step's work failed: nothing was recorded (a [`step_in`](crate::JobContext::step_in)'s
    /// writes rolled back), and the step runs again on the next attempt.
    ///
    /// ```
    /// let e = sqlmq::Error::StepFailed { step: "charge".into(), source: "card declined".into() };
    /// assert_eq!(e.to_string(), "step \"charge\" failed: card declined");
    /// ```
    #[error("step {step:?} failed: {source}")]
    StepFailed {
        /// The step's name.
        step: String,
        /// The work's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A child run a parent [`join`](crate::JobContext::join)ed became a dead letter. The
    /// parent's join is recorded as failed: it fails the same way on every later delivery
    /// (redrive the child, then the parent, to run both again).
    ///
    /// ```
    /// let e = sqlmq::Error::ChildFailed { id: sqlmq::MessageId::new() };
    /// assert!(e.to_string().contains("dead letter"));
    /// ```
    #[error("child run {id} became a dead letter")]
    ChildFailed {
        /// The child's message.
        id: MessageId,
    },

    /// The database schema was written by a newer sqlmq; this binary refuses to touch it.
    #[error(
        "the database schema is at version {found}, newer than the {supported} this sqlmq \
         understands: upgrade sqlmq"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Highest version this build knows.
        supported: i64,
    },

    /// The schema is missing or older than this build needs.
    #[error(
        "the database schema is at version {found} but this sqlmq needs {required}: run \
         `sqlmq migrate` (or `Client::migrate`)"
    )]
    SchemaOutdated {
        /// Version found in the database (0: no schema).
        found: i64,
        /// Version this build needs.
        required: i64,
    },

    /// `migrate_to` (`sqlmq migrate --to`) refused to take the schema back to an earlier
    /// version: a table it would drop holds rows, processes of this version are running, or a
    /// migration on the way cannot be reversed. Nothing was dropped.
    #[error("cannot migrate the schema down to version {target}: {reason}")]
    DowngradeRefused {
        /// The version asked for.
        target: i64,
        /// Why, and what to do about it.
        reason: String,
    },

    /// The database user lacks a privilege the call needs (MySQL/MariaDB errors 1044, 1142,
    /// 1143, 1227). The server's message names the privilege and the table; `needs` says which
    /// grants sqlmq needs for this kind of call (the guide, "Least privilege";
    /// [`Client::grants`](crate::Client::grants) prints them).
    #[error("permission denied: {source}; {needs}")]
    PermissionDenied {
        /// The grants the call needs.
        needs: &'static str,
        /// The server's refusal.
        #[source]
        source: sqlx::Error,
    },

    /// The server cannot run sqlmq safely (too old, no working `SKIP LOCKED`, ...).
    #[error("unsupported database server: {0}")]
    UnsupportedServer(String),

    /// A payload could not be (de)serialised as JSON.
    #[error("JSON (de)serialisation failed: {0}")]
    Json(#[from] serde_json::Error),

    /// A value read from the database did not have the expected shape.
    #[error("corrupt data in the database: {0}")]
    Corrupt(String),

    /// The database server refused a new connection at one of its limits: MySQL/MariaDB
    /// `max_connections` (error 1040), `max_user_connections` (1203) or a per-user resource
    /// limit (1226). A moment's condition — a deploy starting many processes, another
    /// application's spike — so it is retryable ([`ErrorClass::Busy`]): sqlmq's long-running
    /// processes (workers, `sqlmq consume`, `subscribe`, `serve`) wait it out. For good, give
    /// each process fewer connections ([`ClientBuilder::max_connections`](crate::client::ClientBuilder::max_connections),
    /// `--max-connections`) or raise the server's limit.
    ///
    /// ```
    /// let err = sqlmq::Error::ConnectionLimit {
    ///     limit: "max_connections",
    ///     source: sqlx::Error::Protocol("Too many connections".into()),
    /// };
    /// assert!(err.is_retryable());
    /// assert!(err.to_string().contains("max_connections"));
    /// ```
    #[error(
        "the database server refuses new connections: its {limit} is reached ({source}); \
         sqlmq's long-running processes wait and retry. Lower the connections per process \
         (--max-connections) or raise the server's limit"
    )]
    ConnectionLimit {
        /// The server's limit that was reached (`max_connections`, ...).
        limit: &'static str,
        /// The server's refusal.
        #[source]
        source: sqlx::Error,
    },

    /// The database is out of space: MySQL/MariaDB "table is full" (1114) or "disk full"
    /// (1021), SQLite's `SQLITE_FULL`. Nothing of the failed call was written (its
    /// transaction rolled back). Sends fail until space is freed on the server — disk, or the
    /// tablespace's limit. Claims and acks go on while the server can still write, which it
    /// may not once the last of the space is gone (an InnoDB delete needs an undo page too);
    /// sqlmq's workers retry them. Retryable ([`ErrorClass::Busy`]), but only once space is
    /// back.
    ///
    /// ```
    /// let err = sqlmq::Error::DatabaseFull {
    ///     source: sqlx::Error::Protocol("The table 'sqlmq_messages' is full".into()),
    /// };
    /// assert!(err.is_retryable());
    /// assert!(err.to_string().starts_with("the database is out of space"));
    /// ```
    #[error(
        "the database is out of space ({source}): nothing of this call was written. Free disk \
         space on the database server (or raise the tablespace's limit); sends fail until \
         then, claims and acks too once the last of the space is gone, and sqlmq's workers \
         retry"
    )]
    DatabaseFull {
        /// The server's refusal.
        #[source]
        source: sqlx::Error,
    },

    /// The database failed. `class` tells whether retrying can help.
    #[error("database error ({class:?}): {source}")]
    Database {
        /// What a caller can do about it.
        class: ErrorClass,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
}

/// What to do about a database error.
///
/// ```
/// use sqlmq::error::ErrorClass;
/// assert!(ErrorClass::for_mysql_error_number(1213).is_retryable());
/// assert!(!ErrorClass::for_mysql_error_number(1064).is_retryable());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Only the statement failed (1205 lock wait timeout); the transaction is still open. Roll it
    /// back explicitly, then retry the whole unit.
    RetryStatement,
    /// The server rolled back the whole transaction (deadlock 1213, 1020, certification 3101):
    /// retry it.
    RetryTransaction,
    /// The connection is gone or points at a read-only/not-ready node (2006, 2013, 1290, 1792,
    /// 1836, 1047, 4031, I/O): discard it, reconnect and retry. If it happened during COMMIT the
    /// outcome is unknown and must be resolved (sqlmq does this through message ids).
    Reconnect,
    /// The database cannot take the work now: the pool had no free connection in time, the
    /// server is at its connection limit ([`Error::ConnectionLimit`]) or out of space
    /// ([`Error::DatabaseFull`]). Retry later: sqlmq does not retry these within a call (the
    /// wait is the caller's), and its long-running processes wait them out.
    Busy,
    /// Retrying will not help.
    Fatal,
}

impl ErrorClass {
    /// Whether retrying the failed unit of work can succeed.
    ///
    /// ```
    /// assert!(sqlmq::error::ErrorClass::Busy.is_retryable());
    /// ```
    pub fn is_retryable(self) -> bool {
        !matches!(self, ErrorClass::Fatal)
    }
}

impl Error {
    /// Whether retrying the same call can succeed (transient database failures).
    ///
    /// ```
    /// let err = sqlmq::Error::InvalidArgument("n must be > 0".into());
    /// assert!(!err.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        self.class().is_some_and(ErrorClass::is_retryable)
    }

    /// The class of a database error (including [`Error::ConnectionLimit`] and
    /// [`Error::DatabaseFull`]), `None` for other errors.
    ///
    /// ```
    /// assert_eq!(sqlmq::Error::UnknownQueue("q".into()).class(), None);
    /// ```
    pub fn class(&self) -> Option<ErrorClass> {
        match self {
            Error::Database { class, .. } => Some(*class),
            Error::ConnectionLimit { .. } | Error::DatabaseFull { .. } => Some(ErrorClass::Busy),
            _ => None,
        }
    }

    /// A transient conflict sqlmq detected itself (not reported by the server): the
    /// transaction must be rolled back and run again, like after a deadlock.
    pub(crate) fn retry_transaction(reason: &str) -> Error {
        Error::Database {
            class: ErrorClass::RetryTransaction,
            source: sqlx::Error::Protocol(reason.to_owned()),
        }
    }

    /// Whether this is a unique-key violation (MySQL 1062, SQLite's UNIQUE constraint).
    pub(crate) fn is_duplicate_key(&self) -> bool {
        matches!(self, Error::Database { source: sqlx::Error::Database(db), .. }
            if db.kind() == sqlx::error::ErrorKind::UniqueViolation)
    }
}

/// Refuse a schema written by a newer sqlmq (`found` above the `supported` version).
pub(crate) fn check_not_newer(found: i64, supported: i64) -> Result<()> {
    if found > supported {
        Err(Error::SchemaTooNew { found, supported })
    } else {
        Ok(())
    }
}
