//! What a handler knows about the message it handles, and the transaction helper.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Transaction;

use crate::domain::{Delivery, MessageId, Receipt};
use crate::domain::{Error, Result};
use crate::queue::Queue;
use crate::source::Source;
use crate::store::Backend;
use crate::topic::Group;

/// The handler's view of its message: id, attempt, headers, lease, and a transaction whose
/// commit includes the ack. Cheap to clone.
///
/// ```
/// # async fn handler(job: serde_json::Value, ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
/// // Exactly-once effects in one line of user code: the writes and the ack commit together.
/// let mut tx = ctx.begin().await?;
/// sqlx::query("INSERT INTO audit (message) VALUES (?)").bind(ctx.id().to_string()).execute(&mut *tx).await?;
/// tx.commit().await?;
/// Ok(sqlmq::Outcome::Done)
/// # }
/// ```
pub struct JobContext<B: Backend = crate::DefaultBackend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for JobContext<B> {
    fn clone(&self) -> Self {
        JobContext {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// Where a handled message came from.
enum Origin<B: Backend> {
    /// A queue or a cluster group: settled by receipt.
    Source(Source<B>),
    /// A broadcast group's member: "settled" by moving the member's position past it.
    Member { group: Group<B>, member: String },
}

impl<B: Backend> Origin<B> {
    fn client(&self) -> &crate::Client<B> {
        match self {
            Origin::Source(s) => s.client(),
            Origin::Member { group, .. } => group.topic().client(),
        }
    }

    fn name(&self) -> String {
        match self {
            Origin::Source(s) => s.name(),
            Origin::Member { group, .. } => group.label(),
        }
    }
}

struct Inner<B: Backend> {
    origin: Origin<B>,
    receipt: Receipt,
    attempt: u32,
    headers: BTreeMap<String, String>,
    ordering_key: Option<String>,
    partition: Option<u32>,
    offset: Option<i64>,
    /// The lease was found taken over: the message belongs to another consumer now.
    lost: AtomicBool,
    /// A [`JobTransaction`] committed the ack: the worker must not settle again.
    acked: AtomicBool,
    /// The run suspended itself (a durable sleep or event wait): the message is back in the
    /// queue, and the worker must not settle it.
    suspended: AtomicBool,
    /// The run has a journal (`durable.rs`): its ack forgets it.
    journaled: AtomicBool,
    /// The run's journal as this delivery knows it.
    journal: tokio::sync::Mutex<super::durable::Journal>,
    /// Fired when the message is cancelled while this handler runs (`cancel.rs`).
    cancel: tokio_util::sync::CancellationToken,
    /// When the progress was last written, and a value not written yet (`progress.rs`).
    progress: std::sync::Mutex<super::progress::ProgressState>,
    /// When this attempt must stop (its message's deadline or run timeout), on this process's
    /// clock and the database's, and the reason recorded then.
    time_up: Option<Stop>,
}

/// When an attempt must stop, and why.
pub(crate) struct Stop {
    /// On this process's monotonic clock: the claim's time up plus the allowance.
    pub at: tokio::time::Instant,
    /// On the database's clock.
    pub wall: std::time::SystemTime,
    pub reason: String,
}

impl Stop {
    /// Whether the stop has come.
    pub fn is_up(&self) -> bool {
        self.at <= tokio::time::Instant::now()
    }

    fn of(delivery: &Delivery) -> Option<Stop> {
        crate::domain::time_up(delivery).map(|up| Stop {
            at: tokio::time::Instant::now() + up.after,
            wall: delivery.claimed_at + up.after,
            reason: up.reason,
        })
    }
}

impl<B: Backend> std::fmt::Debug for JobContext<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("source", &self.inner.origin.name())
            .field("receipt", &self.inner.receipt)
            .field("attempt", &self.inner.attempt)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> JobContext<B> {
    /// The context of `delivery`, which keeps its headers (raw handlers get them back).
    pub(crate) fn new(source: Source<B>, delivery: &mut Delivery) -> JobContext<B> {
        Self::with_origin(Origin::Source(source), delivery)
    }

    /// The context of a broadcast record handled by `member` of `group`.
    pub(crate) fn for_member(group: Group<B>, member: String, delivery: &mut Delivery) -> Self {
        Self::with_origin(Origin::Member { group, member }, delivery)
    }

    fn with_origin(origin: Origin<B>, delivery: &mut Delivery) -> JobContext<B> {
        JobContext {
            inner: Arc::new(Inner {
                origin,
                receipt: delivery.receipt(),
                attempt: delivery.attempt,
                headers: std::mem::take(&mut delivery.headers),
                ordering_key: delivery.ordering_key.clone(),
                partition: delivery.partition,
                offset: delivery.offset,
                lost: AtomicBool::new(false),
                acked: AtomicBool::new(false),
                suspended: AtomicBool::new(false),
                journaled: AtomicBool::new(false),
                journal: tokio::sync::Mutex::default(),
                cancel: tokio_util::sync::CancellationToken::new(),
                progress: std::sync::Mutex::default(),
                time_up: Stop::of(delivery),
            }),
        }
    }

    /// The message id.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { println!("{}", ctx.id()); }
    /// ```
    pub fn id(&self) -> MessageId {
        self.inner.receipt.id
    }

    /// The receipt (id and fencing token) of this claim.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { assert_eq!(ctx.receipt().id, ctx.id()); }
    /// ```
    pub fn receipt(&self) -> Receipt {
        self.inner.receipt
    }

    /// 1 for the first delivery.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if ctx.attempt() > 3 { println!("struggling") } }
    /// ```
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The headers the message was sent with.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { let trace = ctx.headers().get("trace-id"); }
    /// ```
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.inner.headers
    }

    /// The ordering key, if the message has one (for a topic record: its key).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { let key = ctx.ordering_key(); }
    /// ```
    pub fn ordering_key(&self) -> Option<&str> {
        self.inner.ordering_key.as_deref()
    }

    /// The partition of a topic record (`None` for a queue message).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if let Some(p) = ctx.partition() { println!("partition {p}") } }
    /// ```
    pub fn partition(&self) -> Option<u32> {
        self.inner.partition
    }

    /// The offset of a topic record in its partition (`None` for a queue message).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if let Some(o) = ctx.offset() { println!("offset {o}") } }
    /// ```
    pub fn offset(&self) -> Option<i64> {
        self.inner.offset
    }

    /// The queue the message came from, when it came from a queue.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if let Some(q) = ctx.queue() { println!("{}", q.name()) } }
    /// ```
    pub fn queue(&self) -> Option<&Queue<B>> {
        match &self.inner.origin {
            Origin::Source(Source::Queue(q)) => Some(q),
            _ => None,
        }
    }

    /// The consumer group the record came from, when it came from a topic.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if let Some(g) = ctx.group() { println!("{}", g.name()) } }
    /// ```
    pub fn group(&self) -> Option<&Group<B>> {
        match &self.inner.origin {
            Origin::Source(Source::Queue(_)) => None,
            Origin::Source(Source::Group(g)) | Origin::Member { group: g, .. } => Some(g),
        }
    }

    /// The member handling it, when it came from a broadcast group
    /// ([`WorkerBuilder::topic_broadcast`](crate::worker::WorkerBuilder::topic_broadcast)).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if let Some(m) = ctx.member() { println!("member {m}") } }
    /// ```
    pub fn member(&self) -> Option<&str> {
        match &self.inner.origin {
            Origin::Member { member, .. } => Some(member),
            Origin::Source(_) => None,
        }
    }

    /// Where the message came from: the queue's name, or `topic/group`.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { println!("handling a message of {}", ctx.source_name()); }
    /// ```
    pub fn source_name(&self) -> String {
        self.inner.origin.name()
    }

    /// Extend the lease now to `lease` from now. The worker already extends leases on its own
    /// while a handler runs; this is for handlers that know they are about to need longer.
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext) -> sqlmq::Result<()> {
    /// ctx.extend(std::time::Duration::from_secs(600)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let Origin::Source(source) = &self.inner.origin else {
            return Ok(()); // a broadcast member holds no lease: nobody else takes its records
        };
        let result = source.extend(self.inner.receipt, lease).await;
        if let Err(Error::LeaseLost { .. }) = result {
            self.inner.lost.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Ack now and keep `result` for the messages that depend on this one
    /// ([`Queue::ack_with_result`]); the handler's `Outcome` then no longer matters. Queue
    /// messages only.
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext) -> sqlmq::Result<()> {
    /// ctx.ack_with_result(r#"{"pages":12}"#).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_with_result(&self, result: impl Into<Vec<u8>>) -> Result<()> {
        let Some(queue) = self.queue() else {
            return Err(Error::InvalidArgument(
                "results are kept for queue messages only".into(),
            ));
        };
        match queue.ack_with_result(self.inner.receipt, result).await {
            Ok(()) => {
                self.inner.acked.store(true, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                if matches!(e, Error::LeaseLost { .. }) {
                    self.mark_lost();
                }
                Err(e)
            }
        }
    }

    /// The messages this one depends on, each with the result its ack left (a workflow step
    /// reading its inputs); see [`Client::dependency_results`](crate::Client::dependency_results).
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext) -> sqlmq::Result<()> {
    /// for dep in ctx.dependency_results().await? {
    ///     println!("{:?} left {:?}", dep.step, dep.result);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn dependency_results(&self) -> Result<Vec<crate::flow::DependencyResult>> {
        self.inner
            .origin
            .client()
            .dependency_results(self.inner.receipt.id)
            .await
    }

    /// Whether the lease was found lost: another consumer owns the message now and this
    /// handler's result will be discarded. Long handlers may check it and stop early.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) { if ctx.lease_lost() { return } }
    /// ```
    pub fn lease_lost(&self) -> bool {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// Begin a READ COMMITTED transaction on the client's pool whose
    /// [`commit`](JobTransaction::commit) also acks the message: the handler's writes and the
    /// ack commit together or not at all (exactly-once effects). After a successful commit the
    /// handler's `Outcome` no longer matters; if the commit fails with
    /// [`Error::LeaseLost`], nothing was written and another consumer owns the message.
    ///
    /// ```
    /// # async fn f(ctx: sqlmq::JobContext) -> anyhow::Result<()> {
    /// let mut tx = ctx.begin().await?;
    /// sqlx::query("UPDATE stock SET n = n - 1 WHERE sku = 'x'").execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn begin(&self) -> Result<JobTransaction<B>> {
        JobTransaction::begin_for(self.client(), vec![self.clone()]).await
    }

    /// The client of the message's queue or group.
    pub(crate) fn client(&self) -> &crate::Client<B> {
        self.inner.origin.client()
    }

    /// Whether the message still awaits its settling by this worker: its lease not found lost,
    /// its ack not committed by a job transaction, its run not suspended.
    pub(crate) fn in_hand(&self) -> bool {
        !self.lease_lost() && !self.acked() && !self.suspended() && !self.is_cancelled()
    }

    /// Wait until the message is cancelled while this handler runs
    /// ([`Queue::cancel`](crate::Queue::cancel)): from another process within about a quarter
    /// of a second, at once with notifications (the binary log) or from this process. Once it fired, no
    /// settlement of the message takes effect (its ack fails with
    /// [`Error::Cancelled`]): stop, and return anything — the worker removes the message,
    /// without a retry. A handler that ignores it runs on, its result discarded, and the
    /// message is removed when its lease would have ended.
    ///
    /// ```
    /// # async fn handler(ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// for chunk in 0..1000 {
    ///     tokio::select! {
    ///         () = ctx.cancelled() => return Ok(sqlmq::Outcome::Done),
    ///         () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {} // one chunk of work
    ///     }
    /// }
    /// Ok(sqlmq::Outcome::Done)
    /// # }
    /// ```
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.cancel.cancelled()
    }

    /// Whether the message was cancelled while this handler runs (see
    /// [`cancelled`](Self::cancelled)).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) -> anyhow::Result<()> {
    /// if ctx.is_cancelled() { anyhow::bail!("cancelled") }
    /// # Ok(()) }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// When this attempt will be stopped, on the database's clock: the earlier of its message's
    /// [deadline](crate::Message::deadline) and its claim plus its
    /// [run timeout](crate::Message::run_timeout); `None` without either. Then
    /// [`cancelled`](Self::cancelled) fires, the handler is dropped and the message becomes a
    /// dead letter.
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) {
    /// if let Some(at) = ctx.deadline() {
    ///     println!("must be done by {at:?}");
    /// }
    /// # }
    /// ```
    pub fn deadline(&self) -> Option<std::time::SystemTime> {
        self.inner.time_up.as_ref().map(|stop| stop.wall)
    }

    /// When and why this attempt must stop, for the worker (`execute.rs`).
    pub(crate) fn stop(&self) -> Option<&Stop> {
        self.inner.time_up.as_ref()
    }

    /// The token [`cancelled`](Self::cancelled) waits on, to hand to code that takes a
    /// [`CancellationToken`](crate::worker::CancellationToken).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::JobContext) {
    /// let token = ctx.cancellation_token();
    /// tokio::spawn(async move { token.cancelled().await; /* stop a child task */ });
    /// # }
    /// ```
    pub fn cancellation_token(&self) -> tokio_util::sync::CancellationToken {
        self.inner.cancel.clone()
    }

    /// The progress of this job, for `progress.rs`.
    pub(crate) fn progress_state(&self) -> &std::sync::Mutex<super::progress::ProgressState> {
        &self.inner.progress
    }

    /// Whether the run suspended itself (a durable sleep or event wait).
    pub(crate) fn suspended(&self) -> bool {
        self.inner.suspended.load(Ordering::Relaxed)
    }

    pub(super) fn suspended_flag(&self) -> &AtomicBool {
        &self.inner.suspended
    }

    /// Whether the run has a journal to forget when it ends.
    pub(crate) fn journaled(&self) -> bool {
        self.inner.journaled.load(Ordering::Relaxed)
    }

    pub(super) fn inner_journaled(&self) {
        self.inner.journaled.store(true, Ordering::Relaxed);
    }

    pub(super) fn journal(&self) -> &tokio::sync::Mutex<super::durable::Journal> {
        &self.inner.journal
    }

    /// Whether the message is a child run ([`JobContext::spawn`]): its end wakes its parent.
    pub(crate) fn is_child(&self) -> bool {
        self.inner.headers.contains_key(crate::flow::PARENT_HEADER)
    }

    /// Wake the parent joining this child run, which then looks at how it ended (best effort:
    /// a parent not woken looks again on its own within a minute).
    pub(crate) async fn wake_parent(&self) {
        if !self.is_child() {
            return;
        }
        let name = crate::domain::child_event(self.id());
        if let Err(e) = self.client().wake_waiters(&name).await {
            tracing::warn!(message = %self.id(), "could not wake the parent run: {e}");
        }
    }

    pub(crate) fn mark_lost(&self) {
        self.inner.lost.store(true, Ordering::Relaxed);
    }

    pub(crate) fn acked(&self) -> bool {
        self.inner.acked.load(Ordering::Relaxed)
    }
}

/// A transaction whose commit acks the handler's message. Use it like a sqlx transaction
/// (`&mut *tx` is a `&mut B::Connection`, a `&mut MySqlConnection` by default); dropping it
/// rolls back.
///
/// ```
/// # async fn f(ctx: sqlmq::JobContext) -> anyhow::Result<()> {
/// let mut tx = ctx.begin().await?;
/// sqlx::query("INSERT INTO sent (id) VALUES (?)").bind(ctx.id().to_string()).execute(&mut *tx).await?;
/// tx.commit().await?;
/// # Ok(()) }
/// ```
pub struct JobTransaction<B: Backend = crate::DefaultBackend> {
    pub(super) tx: Transaction<'static, B>,
    /// The messages its commit settles: one, or a batch handler's.
    jobs: Vec<JobContext<B>>,
    /// Wakeups of local consumers of what this transaction sent or published, run after
    /// its commit (see `pipeline.rs`).
    pub(super) after_commit: Vec<Box<dyn FnOnce() + Send>>,
}

impl<B: Backend> JobTransaction<B> {
    /// A transaction on `client`'s pool whose commit settles `jobs`.
    pub(super) async fn begin_for(
        client: &crate::Client<B>,
        jobs: Vec<JobContext<B>>,
    ) -> Result<JobTransaction<B>> {
        let tx = crate::tx::begin_for_caller(client.pool()).await?;
        Ok(JobTransaction {
            tx,
            jobs,
            after_commit: Vec::new(),
        })
    }

    /// Ack the message (a batch's messages) in this transaction, then commit. On
    /// [`Error::LeaseLost`] or [`Error::Cancelled`] the transaction is rolled back: none of
    /// its writes happen.
    ///
    /// ```
    /// # async fn f(tx: sqlmq::worker::JobTransaction) -> sqlmq::Result<()> { tx.commit().await }
    /// ```
    pub async fn commit(mut self) -> Result<()> {
        let jobs = std::mem::take(&mut self.jobs);
        if let Err(e) = settle_all_in(&jobs, &mut self.tx).await {
            let _ = self.tx.rollback().await;
            return Err(e);
        }
        self.tx.commit().await?;
        for job in &jobs {
            job.inner.acked.store(true, Ordering::Relaxed);
        }
        for wake in self.after_commit {
            wake();
        }
        Ok(())
    }

    /// Roll back: neither the writes nor the ack happen.
    ///
    /// ```
    /// # async fn f(tx: sqlmq::worker::JobTransaction) -> sqlmq::Result<()> { tx.rollback().await }
    /// ```
    pub async fn rollback(self) -> Result<()> {
        Ok(self.tx.rollback().await?)
    }
}

/// Settle `jobs` — a message's context, or a batch handler's, all of one origin — in the
/// caller's transaction: receipts of a queue or a cluster group are acked in one pass (one
/// receipt is `ack_in`), and a lost lease marks its message and fails the whole; a broadcast
/// member's position moves past its record.
async fn settle_all_in<B: Backend>(jobs: &[JobContext<B>], conn: &mut B::Connection) -> Result<()> {
    let Some(first) = jobs.first() else {
        return Ok(());
    };
    match &first.inner.origin {
        Origin::Source(source) => {
            let receipts: Vec<Receipt> = jobs.iter().map(JobContext::receipt).collect();
            let report = source.ack_batch_in(conn, &receipts).await?;
            let store = source.client().store();
            for job in jobs.iter().filter(|j| j.journaled()) {
                store.forget_run(conn, job.id()).await?;
            }
            let lost: Vec<&JobContext<B>> = jobs
                .iter()
                .filter(|j| report.lost.contains(&j.receipt()))
                .collect();
            let result = source
                .consumer()
                .explained(crate::consume::lost_to_error(report))
                .await;
            for job in lost {
                match &result {
                    // Cancelled in flight: the worker ends the cancel when the handler returns.
                    Err(Error::Cancelled { id, .. }) if *id == job.id() => {
                        job.inner.cancel.cancel()
                    }
                    _ => job.mark_lost(),
                }
            }
            result
        }
        Origin::Member { group, member } => {
            let positions = jobs
                .iter()
                .map(|j| match (j.inner.partition, j.inner.offset) {
                    (Some(p), Some(offset)) => Ok((p as i32, offset + 1)),
                    _ => Err(Error::Corrupt(
                        "a broadcast record without its offset".into(),
                    )),
                })
                .collect::<Result<Vec<_>>>()?;
            let store = group.topic().client().store();
            store
                .save_positions(conn, group.id(), member, &positions)
                .await
        }
    }
}

impl<B: Backend> Deref for JobTransaction<B> {
    type Target = B::Connection;
    fn deref(&self) -> &B::Connection {
        &self.tx
    }
}

impl<B: Backend> DerefMut for JobTransaction<B> {
    fn deref_mut(&mut self) -> &mut B::Connection {
        &mut self.tx
    }
}
