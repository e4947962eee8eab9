//! What a handler is and what it may answer.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::context::JobContext;
use crate::domain::{Delivery, Message};
use crate::job::Job;
use crate::store::Backend;

/// What became of a message, as decided by its handler.
///
/// Returning `Err(e)` from a handler is a failure too: the message is retried with the queue's
/// backoff (and dead-lettered when its attempts are used up), with `e`'s text in its history.
///
/// ```
/// use std::time::Duration;
/// use sqlmq::Outcome;
///
/// fn decide(status: u16) -> Outcome {
///     match status {
///         200 => Outcome::Done,
///         429 => Outcome::Snooze(Duration::from_secs(30)), // not a failure
///         503 => Outcome::Retry { after: Duration::from_secs(5), reason: "upstream busy".into() },
///         _ => Outcome::DeadLetter(format!("rejected with {status}")),
///     }
/// }
/// # let _ = decide(200);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Handled: ack.
    Done,
    /// A failed attempt: retry after this wait (counts toward the queue's max attempts).
    Retry {
        /// Wait before the next attempt.
        after: Duration,
        /// Recorded in the error history.
        reason: String,
    },
    /// Not now: deliver again after this wait, without counting the attempt as a failure.
    Snooze(Duration),
    /// Give up: dead-letter now with this reason, whatever the attempts left.
    DeadLetter(String),
    /// The handler settled the message itself, in a transaction of its own that the runtime
    /// does not see — acked it through the SQL contract (`CALL sqlmq_ack(queue, receipt)`,
    /// MySQL/MariaDB) together with its writes, say: the runtime leaves the message as it is.
    /// Should that transaction have rolled back, the message comes back when its lease ends.
    /// (A handler that commits through [`JobContext::begin`](crate::JobContext::begin) needs
    /// none of this: the runtime sees that commit.) The worker's report counts it as acked; a
    /// broadcast member passes the record, as for [`Outcome::Done`].
    Settled,
}

/// A message handler. Implement it for a struct, or pass an `async` closure
/// `|input, ctx| async move { … }`.
///
/// `I` is the job type for [`WorkerBuilder::queue`](super::WorkerBuilder::queue), or
/// [`Delivery`] for [`WorkerBuilder::queue_raw`](super::WorkerBuilder::queue_raw).
///
/// ```
/// use sqlmq::{JobContext, Outcome};
/// use sqlmq::worker::Handler;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Resize { image: u64 }
/// impl sqlmq::Job for Resize { const NAME: &'static str = "resize"; }
///
/// struct Resizer;
///
/// impl Handler<Resize> for Resizer {
///     type Error = std::io::Error;
///     async fn handle(&self, job: Resize, ctx: JobContext) -> Result<Outcome, Self::Error> {
///         println!("resizing {} (attempt {})", job.image, ctx.attempt());
///         Ok(Outcome::Done)
///     }
/// }
/// ```
///
/// `B` is the backend of the worker's client (MySQL by default): the context's transactions
/// are of that database.
pub trait Handler<I, B: Backend = crate::DefaultBackend>: Send + Sync + 'static {
    /// The handler's error: its `Display` text goes into the message's error history.
    type Error: Display + Send;

    /// Handle one message.
    fn handle(
        &self,
        input: I,
        ctx: JobContext<B>,
    ) -> impl Future<Output = Result<Outcome, Self::Error>> + Send;
}

impl<I, B: Backend, F, Fut, E> Handler<I, B> for F
where
    F: Fn(I, JobContext<B>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Outcome, E>> + Send,
    E: Display + Send,
{
    type Error = E;

    fn handle(
        &self,
        input: I,
        ctx: JobContext<B>,
    ) -> impl Future<Output = Result<Outcome, E>> + Send {
        self(input, ctx)
    }
}

/// A handler's answer with its error as text.
pub(crate) type Answer = Result<Outcome, String>;

/// A boxed, `'static` future.
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A handler with its input type erased, so that one worker can run several queues.
pub(crate) trait DynHandler<B: Backend>: Send + Sync {
    fn call(&self, delivery: Delivery, ctx: JobContext<B>) -> BoxFuture<Answer>;
}

/// Decodes the body as `J`, then calls the handler.
pub(crate) struct Typed<J, H> {
    handler: Arc<H>,
    job: PhantomData<fn() -> J>,
}

impl<J, H> Typed<J, H> {
    pub(crate) fn new(handler: H) -> Typed<J, H> {
        Typed {
            handler: Arc::new(handler),
            job: PhantomData,
        }
    }
}

impl<B: Backend, J: Job, H: Handler<J, B>> DynHandler<B> for Typed<J, H> {
    fn call(&self, delivery: Delivery, ctx: JobContext<B>) -> BoxFuture<Answer> {
        // A message of another job type, or one that does not decode, can never succeed here:
        // dead-letter it at once (redrive it once a worker that understands it runs).
        // (the context holds the headers: see `JobContext::new`)
        if let Some(name) = ctx
            .headers()
            .get(Message::JOB_HEADER)
            .filter(|n| n.as_str() != J::NAME)
        {
            let reason = format!("job {name:?} sent to a worker of {:?}", J::NAME);
            return Box::pin(std::future::ready(Ok(Outcome::DeadLetter(reason))));
        }
        let job: J = match serde_json::from_slice(&delivery.body) {
            Ok(job) => job,
            Err(e) => {
                let reason = format!("cannot decode job {:?}: {e}", J::NAME);
                return Box::pin(std::future::ready(Ok(Outcome::DeadLetter(reason))));
            }
        };
        let handler = Arc::clone(&self.handler);
        Box::pin(async move { handler.handle(job, ctx).await.map_err(|e| e.to_string()) })
    }
}

/// Calls the handler with the delivery itself.
pub(crate) struct Raw<H>(Arc<H>);

impl<H> Raw<H> {
    pub(crate) fn new(handler: H) -> Raw<H> {
        Raw(Arc::new(handler))
    }
}

impl<B: Backend, H: Handler<Delivery, B>> DynHandler<B> for Raw<H> {
    fn call(&self, mut delivery: Delivery, ctx: JobContext<B>) -> BoxFuture<Answer> {
        // The context took the headers; a raw handler sees the whole delivery.
        delivery.headers = ctx.headers().clone();
        let handler = Arc::clone(&self.0);
        Box::pin(async move {
            handler
                .handle(delivery, ctx)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
