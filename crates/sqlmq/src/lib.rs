//! # sqlmq: durable, transactional queues and topics stored in your database
//!
//! Messages live in the database your application already runs, so a message can be sent in
//! the same transaction as the business data it belongs to ([`Queue::send_in`]) and acked in
//! the same transaction as the handler's writes ([`Queue::ack_in`]): no dual writes, no outbox
//! relay, exactly-once effects. The database is MySQL 8.0+, MariaDB 10.6+ ([`MySql`], the
//! default backend) or SQLite (`Sqlite`: `Client::<Sqlite>::open("sqlite://app.db")`, or
//! `sqlite::memory:` for tests). Each backend is a cargo feature, `mysql` (on by default) and
//! `sqlite`: a build compiles only the drivers it names.
//!
//! ```no_run
//! use std::time::Duration;
//! use sqlmq::{Client, Message, QueueConfig};
//!
//! # async fn demo() -> sqlmq::Result<()> {
//! let client = Client::connect("mysql://root@127.0.0.1:3306/test").await?;
//! client.migrate().await?;
//! let jobs = client.create_queue("jobs", QueueConfig::default()).await?;
//!
//! jobs.send(Message::new("resize image 42").priority(-1)).await?;
//!
//! for job in jobs.receive(10, Duration::from_secs(30)).await? {
//!     match std::str::from_utf8(&job.body) {
//!         Ok(text) => { println!("working on {text}"); jobs.ack(job.receipt()).await? }
//!         Err(e) => { jobs.nack(job.receipt(), None, &e.to_string()).await?; }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! ## Guarantees
//!
//! Durable once `send` returns (or the caller's transaction commits); atomic batches of any size;
//! at-least-once delivery whatever the point at which a consumer dies; exclusive leases with
//! fencing tokens (a consumer whose lease ended can neither ack nor extend); exactly-once effects
//! with `ack_in`; FIFO by priority, and strict FIFO per ordering key; idempotent sends. The
//! README lists them with the tests that check each.
//!
//! ## Layout
//!
//! The engine (the first six modules) decides; the store reads and writes rows; the domain is
//! the plain types both share (see `docs/ARCHITECTURE.md` for which way the arrows point).
//!
//! | module | concept |
//! |---|---|
//! | `client` | [`Client`]: connecting, the schema, lookups, wakeups and housekeeping schedules |
//! | `queue` | [`Queue`]: send, receive, admin |
//! | `topic` | [`Topic`], [`Group`], [`BroadcastReader`]: streams, gap-free offsets, consumer groups |
//! | `consume` | one consumption path for queues and groups: ack, nack, extend, releases, the retry-or-dead decision |
//! | `source` | [`Source`], [`SourceName`]: "a queue, or a topic's group", above both |
//! | `worker` | [`Worker`]: typed handlers, liveness, graceful shutdown, wakeups |
//! | `flow` | [`Batch`]: batches with callbacks, workflows (dependencies), results |
//! | `job` | [`Job`]: typed payloads, `enqueue` |
//! | `coalesce` | group commit: concurrent single sends and publishes of one handle share a transaction |
//! | `outage` | [`Outage`]: a wait for an unavailable database, reported once; `wait_out` retries through it |
//! | `tx` | our own transactions: the backend's BEGIN, bounded retries, unknown-commit resolution |
//! | `store` | the backend interface ([`Backend`] and one trait per concept) and the backends; `store::mysql` and `store::sqlite` hold every statement and the migrations |
//! | `domain` | plain types: [`Message`], [`Delivery`], [`Receipt`], [`MessageId`], configs, [`Backoff`], stats, reports, [`Error`] |
//! | `nodelay` | workaround for sqlx 0.9.0's missing `TCP_NODELAY` |
//! | `telemetry` | trace context in message headers; [`telemetry::catalogue`]: every metric with its help text |
//!
//! The library emits `tracing` events and `metrics` facade calls (under the names of
//! [`telemetry::catalogue`]); it installs neither a subscriber nor a recorder.

#![warn(missing_docs)]

mod client;
mod coalesce;
mod conns;
mod consume;
mod domain;
mod flow;
// Pause points for sqlmq's own tests: public only with the `failpoints` feature (which only
// sqlmq's dev-dependency on itself enables); without it a crate-private module whose marks are
// empty functions, so that the engine's call sites stay the same.
#[cfg(feature = "failpoints")]
pub mod failpoints;
#[cfg(not(feature = "failpoints"))]
mod failpoints;
mod job;
/// The `TCP_NODELAY` workaround for sqlx 0.9.0, shared with the `sqlmq` binary's bench (its
/// PostgreSQL peer's pool needs the same treatment). Not part of the supported API.
#[doc(hidden)]
pub mod nodelay;
mod outage;
mod queue;
mod schedule;
mod source;
mod store;
pub mod telemetry;
mod topic;
mod tx;
mod worker;

pub use client::{Client, ClientBuilder, NotificationStatus};
pub use domain::{
    AckReport, AttemptError, Backoff, CATCH_UP_GRACE, CatchUp, DeadLetter, Delivery, DeliveryEvent,
    Error, ErrorClass, FIRE_TIME_HEADER, Flavor, GrantRole, GroupConfig, GroupLag,
    GroupMaintenance, GroupMode, GroupTrace, HistoryListLength, MaintenanceReport, MemberLag,
    Message, MessageId, MessagePage, MessageState, MigrationReport, NackOutcome, PartitionInfo,
    PartitionLag, PendingRetry, ProcessInfo, Published, QueueConfig, QueueStats, QueuedMessage,
    RateLimit, Receipt, Record, Result, RetentionReport, SCHEDULE_HEADER, Schedule, ScheduleConfig,
    ScheduleTarget, Sent, ServerInfo, StartAt, StreamRecord, Timing, TopicConfig, TopicStats,
    Trace, TraceState, default_group_ladder, partition_for_key, validate_name,
};
pub use domain::{
    BATCH_HEADER, Batch, BatchCreated, BatchId, BatchState, BatchStatus, BatchStep, FLOW_RETENTION,
    MAX_RESULT_BYTES, Role, StepState,
};
pub use flow::DependencyResult;
pub use job::Job;
pub use outage::{Outage, OutageReport};
pub use queue::Queue;
pub use source::{Source, SourceName};
/// The MySQL/MariaDB backend (feature `mysql`, on by default): `Client<MySql>`.
#[cfg(feature = "mysql")]
pub use sqlx::MySql;
/// The SQLite backend (feature `sqlite`): `Client<Sqlite>`.
#[cfg(feature = "sqlite")]
pub use sqlx::Sqlite;

/// The backend a `Client` (and `Queue`, `Topic`, …) is on when its type does not say:
/// MySQL/MariaDB, or SQLite in a build with the `sqlite` feature only.
///
/// ```
/// let _: Option<sqlmq::Client<sqlmq::DefaultBackend>> = None::<sqlmq::Client>;
/// ```
#[cfg(feature = "mysql")]
pub type DefaultBackend = sqlx::MySql;
/// The backend a `Client` (and `Queue`, `Topic`, …) is on when its type does not say:
/// MySQL/MariaDB, or SQLite in a build with the `sqlite` feature only.
///
/// ```
/// let _: Option<sqlmq::Client<sqlmq::DefaultBackend>> = None::<sqlmq::Client>;
/// ```
#[cfg(all(feature = "sqlite", not(feature = "mysql")))]
pub type DefaultBackend = sqlx::Sqlite;
#[cfg(not(any(feature = "mysql", feature = "sqlite")))]
compile_error!("sqlmq needs a backend: enable its feature `mysql` (the default) or `sqlite`");
pub use store::Backend;
/// The shutdown signal of [`WorkerBuilder::run`] (re-exported from `tokio-util`).
pub use tokio_util::sync::CancellationToken;
pub use topic::{BroadcastReader, Group, Topic};
pub use worker::{
    BatchContext, BatchHandler, Handler, JobContext, JobTransaction, Outcome, Worker,
    WorkerBuilder, WorkerReport, shutdown_on_signals,
};
