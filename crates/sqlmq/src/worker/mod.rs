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
//!     .run(sqlmq::shutdown_on_signals())
//!     .await?;
//! println!("{report:?}");
//! # Ok(()) }
//! ```
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Worker`], [`WorkerBuilder`], the run and shutdown protocol |
//! | `handler.rs` | [`Handler`], [`Outcome`], type erasure of typed and raw handlers |
//! | `context.rs` | [`JobContext`], [`JobTransaction`] (commit includes the ack) |
//! | `source.rs` | a queue or a cluster-mode consumer group, behind one interface |
//! | `consumer.rs` | one source's claim loop (batch claims sized to free slots) |
//! | `execute.rs` | one message: panic capture, lease extension, timeout, settlement |
//! | `acker.rs` | the batch acker |
//! | `poll.rs` | adaptive polling, the one-query prober, maintenance triggers |
//! | `liveness.rs` | process registry, heartbeats, release of dead processes' claims |
//! | `tally.rs` | [`WorkerReport`] |

mod acker;
mod consumer;
mod context;
mod execute;
mod handler;
mod liveness;
mod poll;
mod source;
mod tally;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use acker::MAX_ACK_BATCH;
pub use context::{JobContext, JobTransaction};
pub use handler::{Handler, Outcome};
pub use liveness::{DEFAULT_HEARTBEAT_INTERVAL, MISSED_HEARTBEATS};
pub use poll::{DEFAULT_MAINTENANCE_INTERVAL, DEFAULT_POLL_CEILING, DEFAULT_POLL_FLOOR};
pub use tally::WorkerReport;

use self::acker::Acker;
use self::consumer::{ConsumerConfig, Slots};
use self::execute::SourceRuntime;
use self::handler::{DynHandler, Raw, Typed};
use self::liveness::Registration;
use self::poll::{PollState, ProberConfig};
use self::source::SourceSpec;
use self::tally::Tally;
use crate::client::Client;
use crate::domain::Delivery;
use crate::domain::{Error, Result};
use crate::job::Job;

/// Default handlers running at once per queue.
pub const DEFAULT_CONCURRENCY: usize = 10;
/// Default lease of a claim; extended automatically while the handler runs.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default time a handler may run before it is stopped and its message retried.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default time in-flight handlers get to finish at shutdown.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// Default most messages per claim (claims are also limited to the free slots).
pub const DEFAULT_MAX_BATCH: usize = 100;
/// Default claim loops per queue. A claim is a short transaction whose time is mostly round
/// trips and a commit on one server thread; a second loop overlaps one claim's waits with the
/// next claim's work (measured by `sqlmq bench worker.e2e`: about 1.3× the throughput of one
/// loop on a 2-core server; more loops only added contention there).
pub const DEFAULT_CLAIMERS: usize = 2;

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
    pub fn builder(client: &Client) -> WorkerBuilder {
        WorkerBuilder {
            client: client.clone(),
            sources: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            per_queue_concurrency: HashMap::new(),
            lease: DEFAULT_LEASE,
            timeout: DEFAULT_TIMEOUT,
            max_batch: DEFAULT_MAX_BATCH,
            claimers: DEFAULT_CLAIMERS,
            poll_floor: DEFAULT_POLL_FLOOR,
            poll_ceiling: DEFAULT_POLL_CEILING,
            maintenance_interval: DEFAULT_MAINTENANCE_INTERVAL,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            grace: DEFAULT_SHUTDOWN_GRACE,
            stop_when_drained: false,
            max_messages: None,
            kill: None,
        }
    }
}

/// How a [`Worker`] runs: its queues and consumer groups with their handlers, and its settings (all with named defaults).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// use std::time::Duration;
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Resize;
/// # impl sqlmq::Job for Resize { const NAME: &'static str = "resize"; }
/// let worker = sqlmq::Worker::builder(&client)
///     .queue("images", |_job: Resize, _ctx| async { Ok::<_, String>(sqlmq::Outcome::Done) })
///     .queue_concurrency("images", 4)
///     .lease(Duration::from_secs(60))
///     .timeout(Duration::from_secs(300))
///     .poll_interval(Duration::from_millis(10), Duration::from_millis(200))
///     .shutdown_grace(Duration::from_secs(10));
/// # Ok(()) }
/// ```
pub struct WorkerBuilder {
    client: Client,
    sources: Vec<(SourceSpec, Box<dyn DynHandler>)>,
    concurrency: usize,
    per_queue_concurrency: HashMap<String, usize>,
    lease: Duration,
    timeout: Duration,
    max_batch: usize,
    claimers: usize,
    poll_floor: Duration,
    poll_ceiling: Duration,
    maintenance_interval: Duration,
    heartbeat_interval: Duration,
    grace: Duration,
    stop_when_drained: bool,
    max_messages: Option<u64>,
    kill: Option<CancellationToken>,
}

impl WorkerBuilder {
    /// Handle the typed jobs `J` of queue `name` with `handler` (a [`Handler<J>`] or an `async`
    /// closure `|job: J, ctx: JobContext| async move { … }`). Messages of another job type, or
    /// whose body does not decode as `J`, are dead-lettered at once.
    ///
    /// ```no_run
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping;
    /// # impl sqlmq::Job for Ping { const NAME: &'static str = "ping"; }
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).queue("pings", |_: Ping, _ctx| async { Ok::<_, String>(sqlmq::Outcome::Done) });
    /// # }
    /// ```
    pub fn queue<J: Job, H: Handler<J>>(mut self, name: &str, handler: H) -> Self {
        let spec = SourceSpec::Queue(name.to_owned());
        self.sources
            .push((spec, Box::new(Typed::<J, H>::new(handler))));
        self
    }

    /// Handle the messages of queue `name` as raw [`Delivery`]s.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).queue_raw("bytes", |d: sqlmq::Delivery, _ctx| async move {
    ///     Ok::<_, String>(if d.body.is_empty() { sqlmq::Outcome::DeadLetter("empty".into()) } else { sqlmq::Outcome::Done })
    /// });
    /// # }
    /// ```
    pub fn queue_raw<H: Handler<Delivery>>(mut self, name: &str, handler: H) -> Self {
        let spec = SourceSpec::Queue(name.to_owned());
        self.sources.push((spec, Box::new(Raw::new(handler))));
        self
    }

    /// Handle the records of the cluster-mode consumer group `group` of topic `topic` as typed
    /// jobs `J` (JSON payloads), exactly like a queue's: each record goes to one member, is
    /// acked when the handler returns [`Outcome::Done`], and is retried on the group's ladder
    /// otherwise. The group must exist (see [`Topic::create_group`](crate::Topic::create_group)).
    ///
    /// ```no_run
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct OrderPlaced { id: u64 }
    /// # impl sqlmq::Job for OrderPlaced { const NAME: &'static str = "order_placed"; }
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).topic_group("orders", "billing", |o: OrderPlaced, ctx: sqlmq::JobContext| async move {
    ///     println!("bill order {} (offset {:?})", o.id, ctx.offset());
    ///     Ok::<_, String>(sqlmq::Outcome::Done)
    /// });
    /// # }
    /// ```
    pub fn topic_group<J: Job, H: Handler<J>>(
        mut self,
        topic: &str,
        group: &str,
        handler: H,
    ) -> Self {
        let spec = SourceSpec::group(topic, group);
        self.sources
            .push((spec, Box::new(Typed::<J, H>::new(handler))));
        self
    }

    /// Handle the records of consumer group `group` of topic `topic` as raw [`Delivery`]s
    /// (with their partition, offset and key).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).topic_group_raw("clicks", "counter", |d: sqlmq::Delivery, _ctx| async move {
    ///     println!("partition {:?} offset {:?}: {} bytes", d.partition, d.offset, d.body.len());
    ///     Ok::<_, String>(sqlmq::Outcome::Done)
    /// });
    /// # }
    /// ```
    pub fn topic_group_raw<H: Handler<Delivery>>(
        mut self,
        topic: &str,
        group: &str,
        handler: H,
    ) -> Self {
        let spec = SourceSpec::group(topic, group);
        self.sources.push((spec, Box::new(Raw::new(handler))));
        self
    }

    /// Handlers running at once, per queue, for every queue without its own setting (default
    /// 10).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.concurrency(32); }
    /// ```
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Handlers running at once for queue `name` (or consumer group `"topic/group"`).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.queue_concurrency("emails", 2); }
    /// ```
    pub fn queue_concurrency(mut self, name: &str, n: usize) -> Self {
        self.per_queue_concurrency.insert(name.to_owned(), n);
        self
    }

    /// Lease of each claim (default 30 s), extended every third of it while the handler runs.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.lease(std::time::Duration::from_secs(120)); }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Longest a handler may run (default 10 min); then it is stopped and its message retried.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.timeout(std::time::Duration::from_secs(60)); }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Most messages per claim (default 100; claims never exceed the free slots).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.max_batch(20); }
    /// ```
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n;
        self
    }

    /// Claim loops per queue (default 2); the queue's slots are split between them.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.claimers(1); }
    /// ```
    pub fn claimers(mut self, n: usize) -> Self {
        self.claimers = n;
        self
    }

    /// Polling of an idle worker: from `floor` (default 10 ms) doubling up to `ceiling`
    /// (default 100 ms). The ceiling bounds how long a message sent by another process waits
    /// for an idle worker; an idle process sends about one query per ceiling.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.poll_interval(std::time::Duration::from_millis(10), std::time::Duration::from_secs(1)); }
    /// ```
    pub fn poll_interval(mut self, floor: Duration, ceiling: Duration) -> Self {
        self.poll_floor = floor;
        self.poll_ceiling = ceiling;
        self
    }

    /// Longest wait between maintenance runs of a busy worker (default 1 s): promotion of due
    /// delayed messages and release of expired leases.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.maintenance_interval(std::time::Duration::from_millis(500)); }
    /// ```
    pub fn maintenance_interval(mut self, interval: Duration) -> Self {
        self.maintenance_interval = interval;
        self
    }

    /// Heartbeat interval (default 5 s). A process that misses three heartbeats is declared dead
    /// by its peers, which release its claims.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.heartbeat_interval(std::time::Duration::from_secs(2)); }
    /// ```
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Time in-flight handlers get to finish at shutdown (default 30 s); those still running
    /// then are stopped and their messages released for an immediate retry.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.shutdown_grace(std::time::Duration::from_secs(5)); }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Stop (gracefully) once every queue is drained: a claim found nothing while none of the
    /// queue's handlers was running. For batch jobs and scripts; a service keeps waiting.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.stop_when_drained(); }
    /// ```
    pub fn stop_when_drained(mut self) -> Self {
        self.stop_when_drained = true;
        self
    }

    /// Stop (gracefully) after claiming `n` messages in all.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.max_messages(1000); }
    /// ```
    pub fn max_messages(mut self, n: u64) -> Self {
        self.max_messages = Some(n);
        self
    }

    /// A token that ends the shutdown grace period early when cancelled (a second Ctrl-C):
    /// handlers still running are stopped and their messages released at once.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::WorkerBuilder) { b.kill_on(sqlmq::CancellationToken::new()); }
    /// ```
    pub fn kill_on(mut self, token: CancellationToken) -> Self {
        self.kill = Some(token);
        self
    }

    fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if self.sources.is_empty() {
            return bad("a worker needs at least one queue or consumer group".into());
        }
        for (i, (spec, _)) in self.sources.iter().enumerate() {
            spec.validate()?;
            if self.sources[..i].iter().any(|(s, _)| s == spec) {
                return bad(format!("{:?} is listed twice", spec.key()));
            }
        }
        if let Some(name) = self
            .per_queue_concurrency
            .keys()
            .find(|n| !self.sources.iter().any(|(s, _)| s.key() == **n))
        {
            return bad(format!(
                "concurrency set for {name:?}, which the worker does not consume"
            ));
        }
        let concurrencies =
            std::iter::once(self.concurrency).chain(self.per_queue_concurrency.values().copied());
        if concurrencies.clone().any(|c| c == 0 || c > 10_000) {
            return bad("concurrency must be 1..=10000".into());
        }
        if self.claimers == 0 || self.claimers > 64 {
            return bad("claimers must be 1..=64".into());
        }
        if self.max_batch == 0 || self.max_batch > crate::MAX_RECEIVE {
            return bad(format!("max_batch must be 1..={}", crate::MAX_RECEIVE));
        }
        if self.lease < Duration::from_millis(300) || self.lease > crate::MAX_LEASE {
            return bad("the worker's lease must be between 300 ms and 24 h".into());
        }
        if self.poll_floor.is_zero()
            || self.maintenance_interval.is_zero()
            || self.heartbeat_interval.is_zero()
        {
            return bad("poll, maintenance and heartbeat intervals must be positive".into());
        }
        Ok(())
    }

    /// Run until `shutdown` is cancelled, then shut down gracefully (see the protocol below) and
    /// return what was done. Fails at once on bad settings, an unknown queue or group, or a
    /// broadcast group; fails after a graceful shutdown if a source became unusable while
    /// running (deleted, schema changed).
    ///
    /// ## Shutdown protocol
    ///
    /// 1. **Who signals**: whoever holds `shutdown` (see [`shutdown_on_signals`] for SIGTERM and
    ///    Ctrl-C), or a consumer that met an error retrying cannot fix, which cancels the
    ///    worker's own token.
    /// 2. **Stop claiming**: every consumer loop checks the token before each claim and wakes
    ///    from its waits when it is cancelled; it hands its running jobs to the worker. By the
    ///    slot rule no message is claimed without having been started, so nothing claimed is
    ///    left waiting.
    /// 3. **Drain**: in-flight handlers run on, leases still extended, for up to the grace
    ///    period; then the `kill` signal stops the rest, and each of their messages is released
    ///    (nack with no delay) for another worker to take at once.
    /// 4. **Flush acks**: when the last job has settled, the runtimes (and their acker handles)
    ///    are dropped; each acker commits what it has queued and ends; the worker awaits them.
    /// 5. **Deregister**: the heartbeat and prober tasks stop; leases this process still holds
    ///    (none in a clean run) are released; its process row is deleted.
    ///
    /// Completion is proven by joining every job, acker and service task before `run` returns.
    ///
    /// ```no_run
    /// # async fn f(builder: sqlmq::WorkerBuilder) -> sqlmq::Result<()> {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let stopper = token.clone();
    /// tokio::spawn(async move { tokio::time::sleep(std::time::Duration::from_secs(60)).await; stopper.cancel() });
    /// let report = builder.run(token).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(self, shutdown: CancellationToken) -> Result<WorkerReport> {
        self.validate()?;
        let mut sources = Vec::new();
        for (spec, _) in &self.sources {
            sources.push(spec.resolve(&self.client).await?);
        }
        let registration = Registration {
            client: self.client.clone(),
            sources: sources.clone(),
            interval: self.heartbeat_interval,
        };
        registration.register().await?;

        // The worker's own token: cancelled by `shutdown` or by a consumer's fatal error.
        let stop = shutdown.child_token();
        let services = CancellationToken::new();
        let (kill_tx, kill_rx) = watch::channel(false);
        let poll = Arc::new(PollState::default());
        let tally = Arc::new(Tally::default());
        let mut ackers = Vec::new();
        let mut consumers = JoinSet::new();
        let mut all_slots = Vec::new();
        let budget = Arc::new(AtomicU64::new(self.max_messages.unwrap_or(u64::MAX)));
        for ((spec, handler), source) in self.sources.into_iter().zip(sources.iter()) {
            let name = spec.key();
            let (acker, acker_task) = Acker::start(source.clone(), tally.clone());
            ackers.push(acker_task);
            let (label, value) = source.metric_label();
            let rt = Arc::new(SourceRuntime {
                source: source.clone(),
                handler,
                lease: self.lease,
                timeout: self.timeout,
                acker,
                kill: kill_rx.clone(),
                handler_seconds: metrics::histogram!("sqlmq_handler_seconds", label => value),
            });
            let config = ConsumerConfig {
                concurrency: self
                    .per_queue_concurrency
                    .get(&name)
                    .copied()
                    .unwrap_or(self.concurrency),
                max_batch: self.max_batch,
                stop_when_drained: self.stop_when_drained,
                budget: budget.clone(),
            };
            // The queue's slots, split between its claim loops.
            let loops = self.claimers.min(config.concurrency);
            for i in 0..loops {
                let share =
                    config.concurrency / loops + usize::from(i < config.concurrency % loops);
                let config = ConsumerConfig {
                    concurrency: share,
                    budget: budget.clone(),
                    ..config
                };
                let slots = Arc::new(Slots::new(share));
                all_slots.push(Arc::clone(&slots));
                let (poll, tally, stop, rt) =
                    (poll.clone(), tally.clone(), stop.clone(), rt.clone());
                consumers.spawn(async move {
                    let result =
                        consumer::run_consumer(rt, &config, &slots, &poll, &tally, &stop).await;
                    if result.is_err() {
                        stop.cancel();
                    }
                    result
                });
            }
        }
        let prober = tokio::spawn(poll::run_prober(
            sources.clone(),
            poll,
            ProberConfig {
                floor: self.poll_floor,
                ceiling: self.poll_ceiling,
                maintenance_interval: self.maintenance_interval,
            },
            services.clone(),
        ));
        let registration = Arc::new(registration);
        let heartbeat = {
            let (registration, services) = (registration.clone(), services.clone());
            tokio::spawn(async move { registration.run(services).await })
        };
        tracing::info!(
            process = self.client.owner_id(),
            sources = sources.len(),
            "worker started"
        );

        // 2. Stop claiming. (Consumers that drained their queue or spent the budget stop on
        // their own; once all have, the worker stops as if signalled.)
        let mut finished = Vec::new();
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = async {
                while let Some(joined) = consumers.join_next().await {
                    finished.push(joined);
                }
            } => {}
        }
        stop.cancel();
        tracing::info!("worker stopping: no new claims; draining in-flight handlers");
        let mut fatal = None;
        while let Some(joined) = match finished.pop() {
            Some(joined) => Some(joined),
            None => consumers.join_next().await,
        } {
            // A consumer task that panicked is an error to report, after the shutdown below:
            // returning now would skip the drain, the ack flush and the deregistration.
            let result = joined
                .unwrap_or_else(|e| Err(Error::Corrupt(format!("consumer task failed: {e}"))));
            fatal = fatal.or(result.err());
        }
        // 3. Drain within the grace period (messages keep running, leases still extended, until
        // every slot is free), then stop the rest: each stopped handler's message is released.
        let kill_early = self.kill.clone().unwrap_or_default();
        let grace = async move {
            tokio::select! {
                _ = tokio::time::sleep(self.grace) => {}
                _ = kill_early.cancelled() => {}
            }
        };
        let drained = async {
            for slots in &all_slots {
                slots.all_done().await;
            }
        };
        tokio::pin!(drained);
        tokio::select! {
            _ = &mut drained => {}
            _ = grace => {
                tracing::warn!("shutdown grace period over: stopping the handlers still running");
                let _ = kill_tx.send(true);
                drained.await;
            }
        }
        // 4. Flush acks: every runtime (and acker handle) is gone with its jobs and consumer.
        for acker in ackers {
            let _ = acker.await;
        }
        // 5. Deregister.
        services.cancel();
        let _ = prober.await;
        let _ = heartbeat.await;
        match registration.deregister().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(released = n, "released leases still held at exit"),
            Err(e) => tracing::warn!("deregistration failed (peers will release our claims): {e}"),
        }
        let report = tally.report();
        tracing::info!(?report, "worker stopped");
        match fatal {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }
}

/// A token cancelled on SIGTERM or SIGINT (Ctrl-C), for [`WorkerBuilder::run`].
///
/// ```no_run
/// # async fn f(b: sqlmq::WorkerBuilder) -> sqlmq::Result<()> {
/// b.run(sqlmq::shutdown_on_signals()).await?;
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
