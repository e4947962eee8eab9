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
//! guide (docs/guide/src/guarantees.md) lists them with the tests that check each.
//!
//! ## Where things are
//!
//! The crate root holds what a first program uses: [`Client`], [`Queue`] and its
//! [`QueueConfig`], [`Message`], [`Delivery`], [`MessageId`], [`Topic`], [`Group`] with their
//! configs and [`Record`], the worker runtime's [`Worker`], [`JobContext`], [`Outcome`] and
//! [`Job`], and [`Error`]/[`Result`]. Everything else lives in the module of its concept, which
//! also re-exports the root names it builds on:
//!
//! | module | what you find there |
//! |---|---|
//! | [`client`] | [`Client`], [`client::ClientBuilder`] (pool, timeouts, TLS), [`client::Outage`]: waiting out an unavailable database |
//! | [`queue`] | [`Queue`]: send, receive, ack, nack; [`queue::Receipt`], [`queue::Backoff`], [`queue::RateLimit`], dead letters, stats, ack and nack reports |
//! | [`topic`] | [`Topic`], [`Group`], [`topic::BroadcastReader`]: streams with gap-free offsets, consumer groups, [`topic::StartAt`], lag |
//! | [`source`] | [`source::Source`]: "a queue, or a topic's group", for code that consumes either |
//! | [`worker`] | [`Worker`]: typed and raw handlers, batch handlers, [`worker::JobTransaction`] (exactly-once), shutdown |
//! | [`flow`] | [`flow::Batch`]: batches with callbacks, workflows whose steps depend on each other, results |
//! | [`schedule`] | [`schedule::ScheduleConfig`]: recurring sends to a queue or a topic |
//! | [`inspect`] | looking at messages: pages by state, one message's [`inspect::Trace`] of attempts |
//! | [`admin`] | operating a database: the server's facts, migrations, maintenance, grants, processes |
//! | [`error`] | [`Error`], its [`error::ErrorClass`] (retry or not), [`Result`] |
//! | [`telemetry`] | trace context in message headers; [`telemetry::catalogue`]: every metric with its help text |
//!
//! How the engine, the store and the backends are layered is `docs/ARCHITECTURE.md`'s subject.
//!
//! The library emits `tracing` events and `metrics` facade calls (under the names of
//! [`telemetry::catalogue`]); it installs neither a subscriber nor a recorder.

#![warn(missing_docs)]

pub mod admin;
pub mod client;
mod coalesce;
mod conns;
mod consume;
mod domain;
pub mod error;
pub mod flow;
// Pause points for sqlmq's own tests: public only with the `failpoints` feature (which only
// sqlmq's dev-dependency on itself enables); without it a crate-private module whose marks are
// empty functions, so that the engine's call sites stay the same.
#[cfg(feature = "failpoints")]
pub mod failpoints;
#[cfg(not(feature = "failpoints"))]
mod failpoints;
pub mod inspect;
mod job;
/// The `TCP_NODELAY` workaround for sqlx 0.9.0, shared with the `sqlmq` binary's bench (its
/// PostgreSQL peer's pool needs the same treatment). Not part of the supported API.
#[doc(hidden)]
pub mod nodelay;
mod outage;
pub mod queue;
pub mod schedule;
pub mod source;
mod store;
pub mod telemetry;
pub mod topic;
mod tx;
pub mod worker;

pub use client::Client;
pub use domain::{
    Delivery, Error, GroupConfig, Message, MessageId, QueueConfig, Record, Result, TopicConfig,
};
pub use job::Job;
pub use queue::Queue;
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
pub use topic::{Group, Topic};
pub use worker::{JobContext, Outcome, Worker};
