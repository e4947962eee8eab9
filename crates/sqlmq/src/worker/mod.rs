//! The worker runtime: queues and consumer groups in, handled jobs out.
//!
//! ```no_run
//! use sqlmq::{Client, JobContext, Outcome, Worker};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct SendEmail { to: String }
//! impl sqlmq::Job for SendEmail { const NAME: &'static str = "send_email"; }
//!
//! # async fn f(client: Client) -> sqlmq::Result<()> {
//! let report = Worker::builder(&client)
//!     .queue("emails", |job: SendEmail, ctx: JobContext| async move {
//!         println!("mailing {} (attempt {})", job.to, ctx.attempt());
//!         Ok::<_, std::io::Error>(Outcome::Done)
//!     })
//!     .concurrency(8)
//!     .run(sqlmq::worker::shutdown_on_signals())
//!     .await?;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Worker`], [`shutdown_on_signals`] |
//! | `builder.rs` | [`WorkerBuilder`]: sources, handlers, settings and their defaults, `run` |
//! | `start.rs` | starting: resolve, register, spawn every task |
//! | `shutdown.rs` | the shutdown protocol: stop claiming, drain, flush acks, deregister |
//! | `handler.rs` | [`Handler`], [`Outcome`], type erasure of typed and raw handlers |
//! | `batch.rs` | [`BatchHandler`], [`BatchContext`]: a claim per call, one transaction for it |
//! | `context.rs` | [`JobContext`], [`JobTransaction`] (commit includes the ack) |
//! | `durable.rs` | durable execution on [`JobContext`]: steps, sleeps, event waits and their replay |
//! | `consumer.rs` | one source's claim loop (batch claims sized to free slots) |
//! | `broadcast.rs` | broadcast members: a task per partition, retries in place, checkpoints |
//! | `execute.rs` | one message: panic capture, lease extension, timeout, settlement |
//! | `cancel.rs` | a queue's cancels of running messages reaching their handlers' tokens |
//! | `progress.rs` | [`JobContext::progress`]: rate-limited writes, cleared at settlement |
//! | `acker.rs` | the batch acker |
//! | `outstanding.rs` | a source's running handlers and uncommitted acks: when "drained" is true |
//! | `budget.rs` | the message budget (`max_messages`) shared by every loop |
//! | `pipeline.rs` | `JobTransaction::send`/`publish`: exactly-once pipelines |
//! | `poll.rs` | the one-query prober, maintenance triggers |
//! | `liveness.rs` | process registry, heartbeats, release of dead processes' claims |
//! | `schema.rs` | across a schema upgrade: wait for `migrate` at start, stop cleanly after a newer one |
//! | `tally.rs` | [`WorkerReport`] |

mod acker;
mod batch;
mod broadcast;
mod budget;
mod builder;
mod cancel;
mod consumer;
mod context;
mod durable;
mod execute;
mod handler;
mod liveness;
mod outstanding;
mod pipeline;
mod poll;
mod progress;
mod schema;
mod shutdown;
mod start;
mod tally;

use std::time::Duration;

/// The shutdown signal of [`WorkerBuilder::run`] (re-exported from `tokio-util`).
pub use tokio_util::sync::CancellationToken;

pub use batch::{BatchContext, BatchHandler};
pub use builder::WorkerBuilder;
pub use context::{JobContext, JobTransaction};
pub use handler::{Handler, Outcome};
pub use tally::WorkerReport;

pub use crate::domain::MAX_PROGRESS;
pub use crate::job::Job;

use crate::client::Client;
use crate::store::Backend;

/// The worker runtime. Build one with [`Worker::builder`].
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// let worker = sqlmq::Worker::builder(&client)
///     .queue_raw("raw", |d: sqlmq::Delivery, _ctx| async move {
///         println!("{} bytes", d.body.len());
///         Ok::<_, std::convert::Infallible>(sqlmq::Outcome::Done)
///     });
/// worker.run(shutdown).await?;
/// # Ok(()) }
/// ```
pub struct Worker;

impl Worker {
    /// Start describing a worker on `client`'s database.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { let builder = sqlmq::Worker::builder(&client); }
    /// ```
    pub fn builder<B: Backend>(client: &Client<B>) -> WorkerBuilder<B> {
        WorkerBuilder {
            client: client.clone(),
            sources: Vec::new(),
            members: Vec::new(),
            checkpointing: broadcast::Checkpointing {
                every: 1,
                interval: Duration::from_secs(1),
            },
            concurrency: WorkerBuilder::DEFAULT_CONCURRENCY,
            per_queue_concurrency: Default::default(),
            lease: WorkerBuilder::DEFAULT_LEASE,
            timeout: WorkerBuilder::DEFAULT_TIMEOUT,
            time_up_grace: Duration::ZERO,
            max_batch: WorkerBuilder::DEFAULT_MAX_BATCH,
            claimers: WorkerBuilder::DEFAULT_CLAIMERS,
            poll_floor: WorkerBuilder::DEFAULT_POLL_FLOOR,
            poll_ceiling: WorkerBuilder::DEFAULT_POLL_CEILING,
            maintenance_interval: WorkerBuilder::DEFAULT_MAINTENANCE_INTERVAL,
            heartbeat_interval: WorkerBuilder::DEFAULT_HEARTBEAT_INTERVAL,
            grace: WorkerBuilder::DEFAULT_SHUTDOWN_GRACE,
            stop_when_drained: false,
            max_messages: None,
            kill: None,
            fire_schedules: true,
        }
    }
}

/// A token cancelled on SIGTERM or SIGINT (Ctrl-C), for [`WorkerBuilder::run`].
///
/// ```no_run
/// # async fn f(b: sqlmq::worker::WorkerBuilder) -> sqlmq::Result<()> {
/// b.run(sqlmq::worker::shutdown_on_signals()).await?;
/// # Ok(()) }
/// ```
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown signal received");
        cancel.cancel();
    });
    token
}

/// Compile-time check: `run`'s future can be spawned on a multi-threaded runtime.
#[allow(dead_code)]
fn run_is_send(b: WorkerBuilder) -> impl Send {
    b.run(CancellationToken::new())
}
