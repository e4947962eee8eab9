//! Batch handlers: one call, and at most one transaction, for every message of a claim.
//!
//! A handler whose effects are writes to this database pays a transaction per message when it
//! handles messages one at a time: `BEGIN`, its writes, the ack, `COMMIT` — four round trips and
//! a commit for each. A batch handler gets the whole claim (up to the free slots and
//! [`WorkerBuilder::max_batch`](super::WorkerBuilder::max_batch)) and one
//! [`BatchContext::begin`] whose commit acks all of it: the exactly-once pipeline of a stream
//! processor that commits a batch of inputs with their outputs, as Kafka's transactions do.
//! Everything else is the one-message path's: the leases are extended while the handler runs,
//! the timeout and the shutdown grace stop it, and a failure settles every message of the batch
//! with the handler's outcome (`execute.rs`).

use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use futures_util::future::join_all;
use tracing::Instrument;

use super::context::{JobContext, JobTransaction};
use super::execute::{Settled, SourceRuntime, settle, supervise};
use super::handler::{Answer, BoxFuture, Outcome};
use crate::domain::{Delivery, Result};
use crate::store::Backend;
use crate::telemetry::{self, Operation};

/// A handler of whole batches: every message of a claim in one call. Implement it for a
/// struct, or pass an `async` closure `|batch, ctx| async move { … }` to
/// [`WorkerBuilder::source_batch`](super::WorkerBuilder::source_batch).
///
/// The handler's [`Outcome`] applies to every message of the batch that it did not settle
/// itself (through [`BatchContext::begin`], or a message's own [`JobContext`]). (Not to be
/// confused with [`Batch`](crate::flow::Batch), jobs sent together with a callback for when they are
/// all done.)
///
/// ```
/// use sqlmq::{Delivery, Outcome};
/// use sqlmq::worker::{BatchContext, BatchHandler};
///
/// struct Totals;
///
/// impl BatchHandler for Totals {
///     type Error = sqlmq::Error;
///     async fn handle(&self, batch: Vec<Delivery>, ctx: BatchContext) -> Result<Outcome, Self::Error> {
///         let bytes: usize = batch.iter().map(|d| d.body.len()).sum();
///         let mut tx = ctx.begin().await?;
///         sqlx::query("UPDATE totals SET bytes = bytes + ?").bind(bytes as u64).execute(&mut *tx).await?;
///         tx.commit().await?; // the update and the acks of the whole batch, together
///         Ok(Outcome::Done)
///     }
/// }
/// ```
pub trait BatchHandler<B: Backend = crate::DefaultBackend>: Send + Sync + 'static {
    /// The handler's error: its `Display` text goes into each message's error history.
    type Error: Display + Send;

    /// Handle a batch of messages (never empty; in claim order).
    fn handle(
        &self,
        batch: Vec<Delivery>,
        ctx: BatchContext<B>,
    ) -> impl Future<Output = std::result::Result<Outcome, Self::Error>> + Send;
}

impl<B: Backend, F, Fut, E> BatchHandler<B> for F
where
    F: Fn(Vec<Delivery>, BatchContext<B>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<Outcome, E>> + Send,
    E: Display + Send,
{
    type Error = E;

    fn handle(
        &self,
        batch: Vec<Delivery>,
        ctx: BatchContext<B>,
    ) -> impl Future<Output = std::result::Result<Outcome, E>> + Send {
        self(batch, ctx)
    }
}

/// A batch handler's view of its messages: each one's [`JobContext`], and a transaction whose
/// commit acks them all. Cheap to clone.
///
/// ```
/// # async fn f(batch: Vec<sqlmq::Delivery>, ctx: sqlmq::worker::BatchContext) -> sqlmq::Result<()> {
/// for (d, job) in batch.iter().zip(ctx.jobs()) {
///     assert_eq!(d.id, job.id());
/// }
/// # Ok(()) }
/// ```
pub struct BatchContext<B: Backend = crate::DefaultBackend> {
    jobs: Arc<[JobContext<B>]>,
}

impl<B: Backend> Clone for BatchContext<B> {
    fn clone(&self) -> Self {
        BatchContext {
            jobs: Arc::clone(&self.jobs),
        }
    }
}

impl<B: Backend> std::fmt::Debug for BatchContext<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchContext")
            .field("jobs", &self.jobs.len())
            .finish()
    }
}

impl<B: Backend> BatchContext<B> {
    /// Each message's context, in the batch's order: its attempt, lease, headers, and its own
    /// settling (a message acked through its own context before [`BatchContext::begin`] is left
    /// out of the batch's transaction).
    ///
    /// ```
    /// # fn f(ctx: sqlmq::worker::BatchContext) {
    /// let retried = ctx.jobs().iter().filter(|j| j.attempt() > 1).count();
    /// # }
    /// ```
    pub fn jobs(&self) -> &[JobContext<B>] {
        &self.jobs
    }

    /// Begin a READ COMMITTED transaction on the client's pool whose
    /// [`commit`](JobTransaction::commit) also acks every message of the batch not settled
    /// otherwise: the handler's writes and the acks commit together or not at all. If any
    /// message's lease was lost, the commit fails with [`Error::LeaseLost`](crate::Error) and
    /// nothing is written.
    ///
    /// ```
    /// # async fn f(batch: Vec<sqlmq::Delivery>, ctx: sqlmq::worker::BatchContext, out: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let mut tx = ctx.begin().await?;
    /// for d in batch {
    ///     tx.publish(&out, sqlmq::Record::new(d.body)).await?;
    /// }
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn begin(&self) -> Result<JobTransaction<B>> {
        let jobs = self.jobs.iter().filter(|j| !j.acked()).cloned().collect();
        JobTransaction::begin_for(self.jobs[0].client(), jobs).await
    }
}

/// A batch handler with its error turned into text.
pub(crate) trait DynBatchHandler<B: Backend>: Send + Sync {
    fn call(&self, batch: Vec<Delivery>, ctx: BatchContext<B>) -> BoxFuture<Answer>;
}

/// Calls a [`BatchHandler`].
pub(crate) struct Batched<H>(Arc<H>);

impl<H> Batched<H> {
    pub(crate) fn new(handler: H) -> Batched<H> {
        Batched(Arc::new(handler))
    }
}

impl<B: Backend, H: BatchHandler<B>> DynBatchHandler<B> for Batched<H> {
    fn call(&self, batch: Vec<Delivery>, ctx: BatchContext<B>) -> BoxFuture<Answer> {
        let handler = Arc::clone(&self.0);
        Box::pin(async move { handler.handle(batch, ctx).await.map_err(|e| e.to_string()) })
    }
}

/// Run a claimed `batch` through the source's batch handler, then settle each message: the
/// handler's outcome for those it did not settle itself. Returns how each message ended.
pub(crate) async fn execute_batch<B: Backend>(
    rt: Arc<SourceRuntime<B>>,
    handler: &dyn DynBatchHandler<B>,
    mut batch: Vec<Delivery>,
) -> Vec<Settled> {
    let span = telemetry::span(Operation::Process, &rt.source, batch.len());
    async move {
        let jobs: Arc<[JobContext<B>]> = batch
            .iter_mut()
            .map(|d| {
                let job = JobContext::new(rt.source.clone(), d);
                // The context took the headers; the handler sees whole deliveries.
                d.headers = job.headers().clone();
                job
            })
            .collect();
        let ctx = BatchContext {
            jobs: Arc::clone(&jobs),
        };
        let started = Instant::now();
        let handling = Box::pin(AssertUnwindSafe(handler.call(batch, ctx)).catch_unwind());
        let finished = supervise(&rt, &jobs, handling).await;
        rt.handler_seconds.record(started.elapsed().as_secs_f64());
        // Concurrently: acks handed to the acker share its transactions.
        join_all(jobs.iter().map(|job| settle(&rt, job, finished.clone()))).await
    }
    .instrument(span)
    .await
}
