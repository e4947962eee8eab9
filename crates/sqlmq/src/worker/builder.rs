//! [`WorkerBuilder`]: a worker's sources, handlers and settings.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::batch::{BatchHandler, Batched};
use super::broadcast::{Checkpointing, MemberSpec};
use super::execute::SourceHandler;
use super::handler::{DynHandler, Handler, Raw, Typed};
use super::tally::WorkerReport;
use crate::client::Client;
use crate::domain::{Delivery, Error, Result};
use crate::job::Job;
use crate::source::SourceName;
use crate::store::Backend;

/// How a [`Worker`](super::Worker) runs: its queues and consumer groups with their handlers, and its settings (all with named defaults).
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
pub struct WorkerBuilder<B: Backend = crate::DefaultBackend> {
    pub(super) client: Client<B>,
    pub(super) sources: Vec<(SourceName, SourceHandler<B>)>,
    pub(super) members: Vec<(MemberSpec, Box<dyn DynHandler<B>>)>,
    pub(super) checkpointing: Checkpointing,
    pub(super) concurrency: usize,
    pub(super) per_queue_concurrency: HashMap<String, usize>,
    pub(super) lease: Duration,
    pub(super) timeout: Duration,
    pub(super) time_up_grace: Duration,
    pub(super) max_batch: usize,
    pub(super) claimers: usize,
    pub(super) poll_floor: Duration,
    pub(super) poll_ceiling: Duration,
    pub(super) maintenance_interval: Duration,
    pub(super) heartbeat_interval: Duration,
    pub(super) grace: Duration,
    pub(super) stop_when_drained: bool,
    pub(super) max_messages: Option<u64>,
    pub(super) kill: Option<CancellationToken>,
    pub(super) fire_schedules: bool,
}

/// A worker's defaults and fixed limits, the same on every backend (declared on the default
/// backend's `WorkerBuilder` so that `WorkerBuilder::DEFAULT_LEASE` needs no type annotation).
impl WorkerBuilder {
    /// Default handlers running at once per queue: 10 (see [`WorkerBuilder::concurrency`]).
    ///
    /// ```
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_CONCURRENCY, 10);
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.concurrency(4 * WorkerBuilder::DEFAULT_CONCURRENCY)
    /// # }
    /// ```
    pub const DEFAULT_CONCURRENCY: usize = 10;

    /// Default lease of a claim: 30 s, extended automatically while the handler runs (see
    /// [`WorkerBuilder::lease`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_LEASE, Duration::from_secs(30));
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.lease(2 * WorkerBuilder::DEFAULT_LEASE)
    /// # }
    /// ```
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

    /// Default time a handler may run before it is stopped and its message retried: 10 min
    /// (see [`WorkerBuilder::timeout`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_TIMEOUT, Duration::from_secs(600));
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.timeout(WorkerBuilder::DEFAULT_TIMEOUT / 10)
    /// # }
    /// ```
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

    /// Default time in-flight handlers get to finish at shutdown: 30 s (see
    /// [`WorkerBuilder::shutdown_grace`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_SHUTDOWN_GRACE, Duration::from_secs(30));
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.shutdown_grace(WorkerBuilder::DEFAULT_SHUTDOWN_GRACE / 3)
    /// # }
    /// ```
    pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

    /// Default most messages per claim: 100; claims are also limited to the free slots (see
    /// [`WorkerBuilder::max_batch`]).
    ///
    /// ```
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_MAX_BATCH, 100);
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.max_batch(WorkerBuilder::DEFAULT_MAX_BATCH / 10)
    /// # }
    /// ```
    pub const DEFAULT_MAX_BATCH: usize = 100;

    /// Default claim loops per queue: 2 (see [`WorkerBuilder::claimers`]). A claim is a short
    /// transaction whose time is mostly round trips and a commit on one server thread; a second
    /// loop overlaps one claim's waits with the next claim's work (measured by `sqlmq bench
    /// worker.e2e`: about 1.3× the throughput of one loop on a 2-core server; more loops only
    /// added contention there).
    ///
    /// ```
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_CLAIMERS, 2);
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.claimers(WorkerBuilder::DEFAULT_CLAIMERS + 1)
    /// # }
    /// ```
    pub const DEFAULT_CLAIMERS: usize = 2;

    /// Default shortest wait between probes (while work keeps turning up): 10 ms (see
    /// [`WorkerBuilder::poll_interval`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_POLL_FLOOR, Duration::from_millis(10));
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.poll_interval(WorkerBuilder::DEFAULT_POLL_FLOOR, Duration::from_secs(1))
    /// # }
    /// ```
    pub const DEFAULT_POLL_FLOOR: Duration = Duration::from_millis(10);

    /// Default longest wait between probes of an idle process: 100 ms (see
    /// [`WorkerBuilder::poll_interval`]). It bounds the wakeup latency of a message sent by
    /// another process (about half of it on average), and costs about one query per interval.
    /// See the trade-off table in docs/BENCHMARKS.md.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_POLL_CEILING, Duration::from_millis(100));
    /// // A tenth of the idle queries, for up to a second of wakeup latency:
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.poll_interval(WorkerBuilder::DEFAULT_POLL_FLOOR, 10 * WorkerBuilder::DEFAULT_POLL_CEILING)
    /// # }
    /// ```
    pub const DEFAULT_POLL_CEILING: Duration = Duration::from_millis(100);

    /// Default longest wait between two maintenance runs (promotion of due messages, release
    /// of expired leases) of a busy process: 1 s (see [`WorkerBuilder::maintenance_interval`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_MAINTENANCE_INTERVAL, Duration::from_secs(1));
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.maintenance_interval(WorkerBuilder::DEFAULT_MAINTENANCE_INTERVAL / 2)
    /// # }
    /// ```
    pub const DEFAULT_MAINTENANCE_INTERVAL: Duration = Duration::from_secs(1);

    /// Default interval between heartbeats: 5 s (EMS renews client leases every 5 s; see
    /// [`WorkerBuilder::heartbeat_interval`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::DEFAULT_HEARTBEAT_INTERVAL, Duration::from_secs(5));
    /// # fn f(b: WorkerBuilder) -> WorkerBuilder {
    /// b.heartbeat_interval(WorkerBuilder::DEFAULT_HEARTBEAT_INTERVAL / 5)
    /// # }
    /// ```
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

    /// Heartbeats a process may miss before its peers declare it dead and release its claims:
    /// 3. A dead worker's messages thus come back after about three
    /// [heartbeat intervals](WorkerBuilder::heartbeat_interval), however long their leases.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::worker::WorkerBuilder;
    /// let silence = WorkerBuilder::DEFAULT_HEARTBEAT_INTERVAL * WorkerBuilder::MISSED_HEARTBEATS;
    /// assert_eq!(silence, Duration::from_secs(15));
    /// ```
    pub const MISSED_HEARTBEATS: u32 = 3;

    /// Most receipts a worker acks in one transaction: 256. Acks of handlers that finish at
    /// about the same time share a transaction, up to this many.
    ///
    /// ```
    /// use sqlmq::worker::WorkerBuilder;
    /// assert_eq!(WorkerBuilder::MAX_ACK_BATCH, 256);
    /// // A full default claim is acked in one transaction when its handlers end together:
    /// assert!(WorkerBuilder::DEFAULT_MAX_BATCH <= WorkerBuilder::MAX_ACK_BATCH);
    /// ```
    pub const MAX_ACK_BATCH: usize = 256;
}

impl<B: Backend> WorkerBuilder<B> {
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
    pub fn queue<J: Job, H: Handler<J, B>>(self, name: &str, handler: H) -> Self {
        self.source(SourceName::queue(name), handler)
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
    pub fn queue_raw<H: Handler<Delivery, B>>(self, name: &str, handler: H) -> Self {
        self.source_raw(SourceName::queue(name), handler)
    }

    /// Handle the records of the cluster-mode consumer group `group` of topic `topic` as typed
    /// jobs `J` (JSON payloads), exactly like a queue's: each record goes to one member, is
    /// acked when the handler returns [`Outcome::Done`](super::Outcome::Done), and is retried on the group's ladder
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
    pub fn topic_group<J: Job, H: Handler<J, B>>(
        self,
        topic: &str,
        group: &str,
        handler: H,
    ) -> Self {
        self.source(SourceName::group(topic, group), handler)
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
    pub fn topic_group_raw<H: Handler<Delivery, B>>(
        self,
        topic: &str,
        group: &str,
        handler: H,
    ) -> Self {
        self.source_raw(SourceName::group(topic, group), handler)
    }

    /// Handle the typed jobs `J` of a queue or a cluster group, by name (`emails`,
    /// `orders/billing`): [`WorkerBuilder::queue`] or [`WorkerBuilder::topic_group`].
    ///
    /// ```no_run
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping;
    /// # impl sqlmq::Job for Ping { const NAME: &'static str = "ping"; }
    /// # fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let name: sqlmq::source::SourceName = "orders/billing".parse()?;
    /// sqlmq::Worker::builder(&client).source(name, |_: Ping, _ctx| async { Ok::<_, String>(sqlmq::Outcome::Done) });
    /// # Ok(()) }
    /// ```
    pub fn source<J: Job, H: Handler<J, B>>(mut self, name: SourceName, handler: H) -> Self {
        let handler = Box::new(Typed::<J, H>::new(handler));
        self.sources.push((name, SourceHandler::Each(handler)));
        self
    }

    /// Handle the deliveries of a queue or a cluster group, by name, as raw [`Delivery`]s:
    /// [`WorkerBuilder::queue_raw`] or [`WorkerBuilder::topic_group_raw`].
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// sqlmq::Worker::builder(&client).source_raw("emails".parse()?, |d: sqlmq::Delivery, _ctx| async move {
    ///     Ok::<_, String>(sqlmq::Outcome::Done)
    /// });
    /// # Ok(()) }
    /// ```
    pub fn source_raw<H: Handler<Delivery, B>>(mut self, name: SourceName, handler: H) -> Self {
        let handler = Box::new(Raw::new(handler));
        self.sources.push((name, SourceHandler::Each(handler)));
        self
    }

    /// Handle a queue or a cluster group, by name, a claim at a time: `handler` (a
    /// [`BatchHandler`] or an `async` closure `|batch: Vec<Delivery>, ctx: BatchContext| async
    /// move { … }`) gets every message of a claim — up to the free slots and
    /// [`WorkerBuilder::max_batch`] — in one call, and [`BatchContext::begin`](crate::worker::BatchContext::begin) a transaction
    /// whose commit acks them all: an exactly-once pipeline at one transaction per batch
    /// rather than per message. The [`concurrency`](WorkerBuilder::concurrency) still counts
    /// messages: with 64 slots and claims of up to 32, two batches run at once. The handler's
    /// [`Outcome`](super::Outcome) applies to each message it did not settle itself; the
    /// [`timeout`](WorkerBuilder::timeout) applies to the whole call.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, out: sqlmq::Topic) -> sqlmq::Result<()> {
    /// sqlmq::Worker::builder(&client)
    ///     .source_batch("orders/enrich".parse()?, move |batch: Vec<sqlmq::Delivery>, ctx: sqlmq::worker::BatchContext| {
    ///         let out = out.clone();
    ///         async move {
    ///             let records = batch.into_iter().map(|d| sqlmq::Record::new(d.body));
    ///             let mut tx = ctx.begin().await?;
    ///             out.publish_batch_in(&mut tx, records.collect()).await?;
    ///             tx.commit().await?; // the outputs and the acks of the whole batch
    ///             Ok::<_, sqlmq::Error>(sqlmq::Outcome::Done)
    ///         }
    ///     })
    ///     .concurrency(64)
    ///     .max_batch(32);
    /// # Ok(()) }
    /// ```
    pub fn source_batch<H: BatchHandler<B>>(mut self, name: SourceName, handler: H) -> Self {
        let handler = Arc::new(Batched::new(handler));
        self.sources.push((name, SourceHandler::Batch(handler)));
        self
    }

    /// Run every record of broadcast group `group` of topic `topic` through `handler` as
    /// member `member`, as typed jobs `J`: each partition in offset order, one record at a
    /// time per partition (partitions in parallel up to the concurrency). A record passes
    /// when the handler returns [`Outcome::Done`](super::Outcome::Done); a failure is
    /// retried in place on the group's backoff and holds back only its partition; after the
    /// group's max attempts the record becomes this member's dead letter
    /// ([`Group::member_dead_letters`](crate::Group::member_dead_letters)) and the member
    /// moves on. The member's position is checkpointed after successes (see
    /// [`WorkerBuilder::checkpoint_every`]); restarted under the same name, it resumes there
    /// (at-least-once: a crash repeats what followed the last checkpoint, never skips). A
    /// [`JobTransaction`](crate::worker::JobTransaction) commits the position with the handler's
    /// writes (exactly-once effects). The group must exist in broadcast mode.
    ///
    /// ```no_run
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct PriceChanged { sku: String }
    /// # impl sqlmq::Job for PriceChanged { const NAME: &'static str = "price_changed"; }
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).topic_broadcast("prices", "caches", "web-1", |p: PriceChanged, _ctx| async move {
    ///     println!("evict {}", p.sku);
    ///     Ok::<_, String>(sqlmq::Outcome::Done)
    /// });
    /// # }
    /// ```
    pub fn topic_broadcast<J: Job, H: Handler<J, B>>(
        self,
        topic: &str,
        group: &str,
        member: &str,
        handler: H,
    ) -> Self {
        self.member(topic, group, member, Box::new(Typed::<J, H>::new(handler)))
    }

    /// [`WorkerBuilder::topic_broadcast`] with raw [`Delivery`]s (partition, offset, key,
    /// headers, body).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).topic_broadcast_raw("config", "nodes", "node-a", |d: sqlmq::Delivery, _ctx| async move {
    ///     println!("{:?}:{:?} {} bytes", d.partition, d.offset, d.body.len());
    ///     Ok::<_, String>(sqlmq::Outcome::Done)
    /// });
    /// # }
    /// ```
    pub fn topic_broadcast_raw<H: Handler<Delivery, B>>(
        self,
        topic: &str,
        group: &str,
        member: &str,
        handler: H,
    ) -> Self {
        self.member(topic, group, member, Box::new(Raw::new(handler)))
    }

    /// Add broadcast member `member` of `topic/group` with its (type-erased) handler.
    fn member(
        mut self,
        topic: &str,
        group: &str,
        member: &str,
        handler: Box<dyn DynHandler<B>>,
    ) -> Self {
        let spec = MemberSpec {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
        };
        self.members.push((spec, handler));
        self
    }

    /// How often broadcast members checkpoint: after every `records` handled records (1, the
    /// default: after each), or once `interval` has passed since the last checkpoint,
    /// whichever comes first. Larger values save round trips; a crash repeats up to that many
    /// records per partition.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) {
    /// sqlmq::Worker::builder(&client).checkpoint_every(100, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    pub fn checkpoint_every(mut self, records: u64, interval: Duration) -> Self {
        self.checkpointing = Checkpointing {
            every: records,
            interval,
        };
        self
    }

    /// Handlers running at once, per queue, for every queue without its own setting (default
    /// 10, [`WorkerBuilder::DEFAULT_CONCURRENCY`]).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.concurrency(32); }
    /// ```
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Handlers running at once for queue `name` (or consumer group `"topic/group"`).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.queue_concurrency("emails", 2); }
    /// ```
    pub fn queue_concurrency(mut self, name: &str, n: usize) -> Self {
        self.per_queue_concurrency.insert(name.to_owned(), n);
        self
    }

    /// Lease of each claim (default 30 s, [`WorkerBuilder::DEFAULT_LEASE`]; 300 ms to
    /// [`Queue::MAX_LEASE`](crate::Queue::MAX_LEASE)), extended every third of it while the
    /// handler runs.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.lease(std::time::Duration::from_secs(120)); }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Longest a handler may run (default 10 min, [`WorkerBuilder::DEFAULT_TIMEOUT`]); then it
    /// is stopped and its message retried.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.timeout(std::time::Duration::from_secs(60)); }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a handler whose message's [deadline](crate::Message::deadline) or
    /// [run timeout](crate::Message::run_timeout) came may take to return after its
    /// cancellation fired, before it is dropped (default none: dropped at once; at most half
    /// the [lease](WorkerBuilder::lease), which is no longer extended then). Its message
    /// becomes a dead letter either way; this is time to clean up, such as a command's
    /// SIGTERM before its SIGKILL (`sqlmq consume --exec` gives it `--grace`).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.time_up_grace(std::time::Duration::from_secs(5)); }
    /// ```
    pub fn time_up_grace(mut self, grace: Duration) -> Self {
        self.time_up_grace = grace;
        self
    }

    /// Most messages per claim (default 100, [`WorkerBuilder::DEFAULT_MAX_BATCH`]; at most
    /// [`Queue::MAX_RECEIVE`](crate::Queue::MAX_RECEIVE); claims never exceed the free slots).
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.max_batch(20); }
    /// ```
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n;
        self
    }

    /// Claim loops per queue (default 2, [`WorkerBuilder::DEFAULT_CLAIMERS`]); the queue's slots
    /// are split between them.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.claimers(1); }
    /// ```
    pub fn claimers(mut self, n: usize) -> Self {
        self.claimers = n;
        self
    }

    /// Polling of an idle worker: from `floor` (default 10 ms,
    /// [`WorkerBuilder::DEFAULT_POLL_FLOOR`]) doubling up to `ceiling` (default 100 ms,
    /// [`WorkerBuilder::DEFAULT_POLL_CEILING`]). The ceiling bounds how long a message sent by
    /// another process waits for an idle worker; an idle process sends about one query per
    /// ceiling.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.poll_interval(std::time::Duration::from_millis(10), std::time::Duration::from_secs(1)); }
    /// ```
    pub fn poll_interval(mut self, floor: Duration, ceiling: Duration) -> Self {
        self.poll_floor = floor;
        self.poll_ceiling = ceiling;
        self
    }

    /// Longest wait between maintenance runs of a busy worker (default 1 s,
    /// [`WorkerBuilder::DEFAULT_MAINTENANCE_INTERVAL`]): promotion of due delayed messages and
    /// release of expired leases.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.maintenance_interval(std::time::Duration::from_millis(500)); }
    /// ```
    pub fn maintenance_interval(mut self, interval: Duration) -> Self {
        self.maintenance_interval = interval;
        self
    }

    /// Heartbeat interval (default 5 s, [`WorkerBuilder::DEFAULT_HEARTBEAT_INTERVAL`]). A
    /// process that misses three heartbeats ([`WorkerBuilder::MISSED_HEARTBEATS`]) is declared
    /// dead by its peers, which release its claims.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.heartbeat_interval(std::time::Duration::from_secs(2)); }
    /// ```
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Time in-flight handlers get to finish at shutdown (default 30 s,
    /// [`WorkerBuilder::DEFAULT_SHUTDOWN_GRACE`]); those still running then are stopped and
    /// their messages released for an immediate retry.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.shutdown_grace(std::time::Duration::from_secs(5)); }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Stop (gracefully) once every queue is drained: a claim found nothing though, when it
    /// began, none of the queue's handlers was running and none of this worker's acks was
    /// waiting to commit — so nothing its own acks release is left behind: the next message of
    /// an ordering key or a concurrency key, a dependant, a batch's callback sent to the same
    /// queue — and nothing is about to come back: no delayed message due, no lease ended (one
    /// this worker lost while the database was slow included): their maintenance runs first.
    /// Messages still leased to other processes, and what their acks will release, are
    /// theirs; a message delayed into the future (a retry's backoff included) does not keep
    /// the worker. For batch jobs and scripts; a service keeps waiting.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.stop_when_drained(); }
    /// ```
    pub fn stop_when_drained(mut self) -> Self {
        self.stop_when_drained = true;
        self
    }

    /// Stop (gracefully) after `n` messages in all were handed to handlers (over every queue
    /// and claim loop; a claim that finds fewer does not use up the rest). The worker waits
    /// for them as long as it takes.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.max_messages(1000); }
    /// ```
    pub fn max_messages(mut self, n: u64) -> Self {
        self.max_messages = Some(n);
        self
    }

    /// A token that ends the shutdown grace period early when cancelled (a second Ctrl-C):
    /// handlers still running are stopped and their messages released at once.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.kill_on(sqlmq::worker::CancellationToken::new()); }
    /// ```
    pub fn kill_on(mut self, token: CancellationToken) -> Self {
        self.kill = Some(token);
        self
    }

    /// Whether this worker fires its database's due recurring schedules (default true; see
    /// [`Client::run_schedules`](crate::Client::run_schedules)). Any number of processes may:
    /// each fire time is sent once.
    ///
    /// ```no_run
    /// # fn f(b: sqlmq::worker::WorkerBuilder) { b.fire_schedules(false); }
    /// ```
    pub fn fire_schedules(mut self, fire: bool) -> Self {
        self.fire_schedules = fire;
        self
    }

    pub(super) fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if self.sources.is_empty() && self.members.is_empty() {
            return bad("a worker needs at least one queue or consumer group".into());
        }
        for (i, (spec, _)) in self.members.iter().enumerate() {
            spec.validate()?;
            if self.members[..i].iter().any(|(s, _)| s == spec) {
                return bad(format!(
                    "member {} of {} is listed twice",
                    spec.member,
                    spec.label()
                ));
            }
        }
        if self.checkpointing.every == 0 || self.checkpointing.interval.is_zero() {
            return bad("checkpoints need a positive record count and interval".into());
        }
        for (i, (spec, _)) in self.sources.iter().enumerate() {
            spec.validate()?;
            if self.sources[..i].iter().any(|(s, _)| s == spec) {
                return bad(format!("{:?} is listed twice", spec.to_string()));
            }
        }
        if let Some(name) = self.per_queue_concurrency.keys().find(|n| {
            !self.sources.iter().any(|(s, _)| s.to_string() == **n)
                && !self.members.iter().any(|(m, _)| m.label() == **n)
        }) {
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
        if self.max_batch == 0 || self.max_batch > crate::consume::MAX_RECEIVE {
            return bad(format!(
                "max_batch must be 1..={}",
                crate::consume::MAX_RECEIVE
            ));
        }
        if self.lease < Duration::from_millis(300) || self.lease > crate::consume::MAX_LEASE {
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

    /// Run until `shutdown` is cancelled, then shut down gracefully (stop claiming, let
    /// in-flight handlers finish within the grace period, flush acks, deregister: see the
    /// protocol in `worker/shutdown.rs`) and return what was done. Fails at once on bad
    /// settings, an unknown queue or group, or a broadcast group; fails after a graceful
    /// shutdown if a source became unusable while running (deleted, schema changed). Never
    /// fails for a database that is unavailable for a while — unreachable, at its connection
    /// limit, out of space — at start or while running: it waits, retries with backoff and
    /// reports the wait once ([`Client::outage`](crate::Client::outage)).
    ///
    /// Across a schema upgrade (the guide, "Upgrading"): on an older schema it waits for
    /// `migrate` before it starts (on none at all it fails with `SchemaOutdated`); when a newer
    /// sqlmq migrates the schema while it runs, it shuts down gracefully as above and then
    /// returns [`Error::SchemaTooNew`](crate::Error::SchemaTooNew).
    ///
    /// ```no_run
    /// # async fn f(builder: sqlmq::worker::WorkerBuilder) -> sqlmq::Result<()> {
    /// let token = tokio_util::sync::CancellationToken::new();
    /// let stopper = token.clone();
    /// tokio::spawn(async move { tokio::time::sleep(std::time::Duration::from_secs(60)).await; stopper.cancel() });
    /// let report = builder.run(token).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run(self, shutdown: CancellationToken) -> Result<WorkerReport> {
        match self.start(shutdown).await? {
            Some(running) => running.until_stopped().await,
            // Stopped while waiting for the database: nothing was claimed.
            None => Ok(WorkerReport::default()),
        }
    }
}
