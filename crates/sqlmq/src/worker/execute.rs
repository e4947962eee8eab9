//! One message's life in the worker: run the handler (catching a panic), keep the lease alive
//! while it runs, enforce the timeout, then settle.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use tokio::sync::watch;

use super::acker::Acker;
use super::batch::DynBatchHandler;
use super::context::{JobContext, Stop};
use super::handler::{Answer, DynHandler, Outcome};
use super::outstanding::Outstanding;
use crate::domain::Delivery;
use crate::domain::{Error, Receipt};
use crate::source::Source;
use crate::store::Backend;
use crate::telemetry::{self, Operation};
use tracing::Instrument;

/// Error text of a message whose handler was stopped at the end of the shutdown grace period.
pub(crate) const KILLED_AT_SHUTDOWN: &str = "the worker shut down before the handler finished";

/// What every job of one source (queue or consumer group) shares.
pub(crate) struct SourceRuntime<B: Backend> {
    pub source: Source<B>,
    pub handler: SourceHandler<B>,
    pub lease: Duration,
    pub timeout: Duration,
    /// How long a handler may take to return after its time was up (`time_up_grace`).
    pub time_up_grace: Duration,
    pub acker: Acker,
    /// Handlers running and acks not committed yet (for `stop_when_drained`).
    pub outstanding: Arc<Outstanding>,
    /// Becomes true when the shutdown grace period is over: stop handlers now.
    pub kill: watch::Receiver<bool>,
    /// The watcher of a queue's cancels that fires running jobs' tokens (`cancel.rs`); none
    /// for a consumer group.
    pub cancels: Option<Arc<super::cancel::CancelWatch>>,
    /// `sqlmq_handler_seconds{queue|group}`, resolved once: the recorder is installed before workers
    /// start, and a handle per message would allocate its labels each time.
    pub handler_seconds: metrics::Histogram,
}

/// A source's handler: of one message at a time, or of whole claims.
pub(crate) enum SourceHandler<B: Backend> {
    Each(Box<dyn DynHandler<B>>),
    Batch(Arc<dyn DynBatchHandler<B>>),
}

/// How a message ended, for the worker's tally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    Acked,
    /// Handed to the batch acker, which counts its outcome.
    AckQueued,
    Retried,
    Snoozed,
    DeadLettered,
    /// Stopped at shutdown and released for an immediate retry.
    Released,
    /// The lease was taken over: the result was discarded.
    LeaseLost,
    /// Settling failed; the message comes back when its lease ends.
    Unsettled,
    /// Cancelled while the handler ran: removed.
    Cancelled,
}

/// How the handler ended (for a batch: every message's end).
#[derive(Clone)]
pub(super) enum Finished {
    Answer(Answer),
    Panicked(String),
    TimedOut,
    /// A message's deadline or run timeout came (for a batch: the earliest of them).
    TimeUp,
    Killed,
}

/// The handler's future, under `catch_unwind`.
pub(super) type Handling =
    std::pin::Pin<Box<dyn Future<Output = std::thread::Result<super::handler::Answer>> + Send>>;

/// Lease extensions under way: whether one failed.
type Extension<'a> = std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// Run `delivery` through the queue's handler and settle it.
///
/// The handler runs inside this task, under `catch_unwind`: a panic ends it like an error, and
/// stopping it (timeout, end of the grace period) is dropping its future. Only the common path
/// — the handler done at its first poll, its ack handed to the acker — lives in this future;
/// supervision (timers, lease extension, the kill signal) and the settlement of failures are
/// boxed and allocated only when needed, which keeps every spawned task small.
pub(crate) async fn execute<B: Backend>(rt: Arc<SourceRuntime<B>>, delivery: Delivery) -> Settled {
    // The handler's span continues the trace the message was sent in (see `telemetry/mod.rs`).
    let span = telemetry::process(&rt.source, &delivery);
    run(rt, delivery).instrument(span).await
}

/// [`execute`] inside the message's span.
async fn run<B: Backend>(rt: Arc<SourceRuntime<B>>, mut delivery: Delivery) -> Settled {
    let SourceHandler::Each(handler) = &rt.handler else {
        unreachable!("the claim loop hands a batch source's claims to execute_batch")
    };
    let ctx = JobContext::new(rt.source.clone(), &mut delivery);
    let started = Instant::now();
    let mut handler: Handling =
        Box::pin(AssertUnwindSafe(handler.call(delivery, ctx.clone())).catch_unwind());
    // Many handlers finish on their first poll: then no timer or watch needs arming.
    let first = std::future::poll_fn(|cx| Poll::Ready(handler.as_mut().poll(cx))).await;
    let finished = match first {
        Poll::Ready(Ok(answer)) => Finished::Answer(answer),
        Poll::Ready(Err(payload)) => Finished::Panicked(panic_text(payload)),
        Poll::Pending => Box::pin(supervise(&rt, std::slice::from_ref(&ctx), handler)).await,
    };
    rt.handler_seconds.record(started.elapsed().as_secs_f64());
    let settled = if ctx.in_hand()
        && !ctx.journaled()
        && !ctx.is_child()
        && matches!(finished, Finished::Answer(Ok(Outcome::Done)))
    {
        ack(&rt, ctx.receipt()).await
    } else {
        Box::pin(settle(&rt, &ctx, finished)).await
    };
    ctx.clear_progress();
    settled
}

/// Hand the ack to the batch acker, in the span of an ack.
async fn ack<B: Backend>(rt: &SourceRuntime<B>, receipt: crate::domain::Receipt) -> Settled {
    let span = telemetry::span(Operation::Settle, &rt.source, 1);
    if rt.acker.ack(receipt).instrument(span).await {
        Settled::AckQueued
    } else {
        Settled::Unsettled
    }
}

/// Wait for a handler that did not finish at once: extend the leases of its messages (one, or
/// a batch) every third of the lease, stop it at its timeout, at its messages' deadline or
/// run timeout (their cancellation fires first, for what the handler started beside it), or
/// at the end of the shutdown grace period. One timer at a time: the next of the extension
/// and the stops.
pub(super) async fn supervise<B: Backend>(
    rt: &SourceRuntime<B>,
    jobs: &[JobContext<B>],
    mut handler: Handling,
) -> Finished {
    let mut kill = rt.kill.clone();
    let now = tokio::time::Instant::now();
    let deadline = now + rt.timeout;
    // The earliest message's time up; past the worker's timeout it changes nothing.
    let time_up = jobs
        .iter()
        .filter_map(|j| j.stop().map(|s| s.at))
        .min()
        .filter(|at| *at < deadline);
    // Extend when a third of the lease has passed: two more chances before it ends.
    let period = rt.lease / 3;
    let mut extend_at = now + period;
    // The extension under way, polled beside the handler, never instead of it: a handler
    // left unpolled while the extension waits for a connection may hold the pool's other
    // connections in its own transactions (`JobContext::begin`), and then nothing moves until
    // the pool's acquire timeout ends the wait.
    let mut extending: Option<Extension<'_>> = None;
    // Cancels reach the jobs' tokens while they run (queues only).
    let _watched: Vec<_> = match &rt.cancels {
        Some(watch) => jobs
            .iter()
            .map(|j| watch.register(j.receipt(), j.cancellation_token()))
            .collect(),
        None => Vec::new(),
    };
    loop {
        let idle = extending.is_none() && jobs.iter().any(JobContext::in_hand);
        tokio::select! {
            answer = &mut handler => return match answer {
                Ok(answer) => Finished::Answer(answer),
                Err(payload) => Finished::Panicked(panic_text(payload)),
            },
            () = tokio::time::sleep_until(deadline) => return Finished::TimedOut,
            () = tokio::time::sleep_until(time_up.unwrap_or(deadline)), if time_up.is_some() => {
                for job in jobs.iter().filter(|j| j.stop().is_some_and(Stop::is_up)) {
                    job.cancellation_token().cancel();
                }
                // Whatever it answers in its grace, its message is dead-lettered. The leases
                // are no longer extended (the jobs are cancelled): the grace ends well before
                // them, and at once when the worker is killed.
                let grace = rt.time_up_grace.min(rt.lease / 2);
                tokio::select! {
                    _ = tokio::time::timeout(grace, &mut handler) => {},
                    true = async { kill.wait_for(|k| *k).await.is_ok() } => {},
                }
                return Finished::TimeUp;
            },
            () = tokio::time::sleep_until(extend_at), if idle => {
                extending = Some(Box::pin(extend_all(rt, jobs)));
            },
            failed = async { extending.as_mut().expect("guarded by the branch").await },
                if extending.is_some() =>
            {
                extending = None;
                extend_at = tokio::time::Instant::now() + if failed {
                    // Try again soon; the leases still have two thirds to go.
                    period.min(Duration::from_secs(1)) / 2
                } else {
                    period
                };
            },
            // (the guard `wait_for` returns is not Send: drop it inside the branch future)
            true = async { kill.wait_for(|k| *k).await.is_ok() } => return Finished::Killed,
        }
    }
}

/// Extend the leases of `jobs` still held and not settled, in one transaction. A lease found
/// lost marks its job so. Returns whether the extension failed otherwise (to try again soon).
async fn extend_all<B: Backend>(rt: &SourceRuntime<B>, jobs: &[JobContext<B>]) -> bool {
    let held: Vec<&JobContext<B>> = jobs.iter().filter(|j| j.in_hand()).collect();
    let receipts: Vec<Receipt> = held.iter().map(|j| j.receipt()).collect();
    match rt.source.consumer().extend_each(&receipts, rt.lease).await {
        Ok(live) => {
            for (job, live) in held.into_iter().zip(live) {
                // Acked meanwhile by the handler's job transaction (the extension ran beside
                // it): nothing was lost. A cancelled job's lease is gone on purpose.
                if !live && !job.acked() && !job.is_cancelled() {
                    tracing::warn!(source = rt.source.name(), message = %job.receipt().id,
                        "lease lost while the handler runs: its result will be discarded");
                    job.mark_lost();
                }
            }
            false
        }
        Err(e) => {
            tracing::warn!(source = rt.source.name(), "lease extension failed: {e}");
            true
        }
    }
}

/// Turn the handler's end into an ack, a nack, a snooze or a dead letter.
pub(super) async fn settle<B: Backend>(
    rt: &SourceRuntime<B>,
    ctx: &JobContext<B>,
    finished: Finished,
) -> Settled {
    let (source, receipt) = (&rt.source, ctx.receipt());
    if ctx.acked() {
        // Committed with the handler's JobTransaction<B>, or by its `ack_with_result`.
        ctx.wake_parent().await;
        return Settled::Acked;
    }
    // A time up fires the cancellation itself: it is settled below, as a dead letter.
    if ctx.is_cancelled() && !matches!(finished, Finished::TimeUp) {
        return end_cancel(source, ctx).await;
    }
    if ctx.lease_lost() {
        return Settled::LeaseLost;
    }
    if ctx.suspended() {
        return Settled::Snoozed; // the run put its message back itself (`durable.rs`)
    }
    let result = match finished {
        // A run's journal goes with its ack; a child's ack must have committed before it
        // wakes its parent: neither goes through the batch acker.
        Finished::Answer(Ok(Outcome::Done)) if ctx.journaled() || ctx.is_child() => {
            ack_run(source, ctx).await.map(|()| Settled::Acked)
        }
        Finished::Answer(Ok(Outcome::Done)) => return ack(rt, receipt).await,
        Finished::Answer(Ok(Outcome::Settled)) => return Settled::Acked,
        Finished::Answer(Ok(Outcome::Retry { after, reason })) => source
            .nack(receipt, Some(after), &reason)
            .await
            .map(|_| Settled::Retried),
        Finished::Answer(Ok(Outcome::Snooze(after))) => source
            .snooze(receipt, after)
            .await
            .map(|()| Settled::Snoozed),
        Finished::Answer(Ok(Outcome::DeadLetter(reason))) => source
            .dead_letter(receipt, &reason)
            .await
            .map(|()| Settled::DeadLettered),
        Finished::Answer(Err(error)) => nack(source, ctx, &error).await,
        Finished::Panicked(text) => nack(source, ctx, &format!("handler panicked: {text}")).await,
        Finished::TimedOut => {
            nack(
                source,
                ctx,
                &format!("handler timed out after {:?}", rt.timeout),
            )
            .await
        }
        Finished::Killed => source
            .nack(receipt, Some(Duration::ZERO), KILLED_AT_SHUTDOWN)
            .await
            .map(|_| Settled::Released),
        Finished::TimeUp => time_up(source, ctx).await,
    };
    match result {
        Ok(settled) => {
            if matches!(settled, Settled::Acked | Settled::DeadLettered) {
                ctx.wake_parent().await;
            }
            settled
        }
        Err(Error::LeaseLost { .. }) => Settled::LeaseLost,
        Err(Error::Cancelled { .. }) => end_cancel(source, ctx).await,
        Err(e) => {
            tracing::warn!(source = source.name(), message = %receipt.id, "could not settle: {e}");
            Settled::Unsettled
        }
    }
}

/// The handler was stopped at a message's time up: that message becomes a dead letter with the
/// reason, never retried; the others of its batch, whose time was not up, fail this attempt.
async fn time_up<B: Backend>(source: &Source<B>, ctx: &JobContext<B>) -> crate::Result<Settled> {
    match ctx.stop() {
        Some(stop) if stop.is_up() => source
            .dead_letter(ctx.receipt(), &stop.reason)
            .await
            .map(|()| Settled::DeadLettered),
        _ => nack(source, ctx, STOPPED_WITH_BATCH).await,
    }
}

/// The failure recorded for a batch's message stopped because another's time was up.
const STOPPED_WITH_BATCH: &str = "stopped with its batch: another message's deadline or run \
    timeout came";

/// The handler of a message cancelled in flight ended (whatever it answered): remove the
/// message now rather than when its lease would have ended, so that its key and slot move on.
async fn end_cancel<B: Backend>(source: &Source<B>, ctx: &JobContext<B>) -> Settled {
    let Source::Queue(queue) = source else {
        return Settled::LeaseLost; // only queue messages are cancelled in flight
    };
    if let Err(e) = queue.end_cancel(ctx.receipt()).await {
        // Housekeeping ends it when its lease would have ended.
        tracing::warn!(source = source.name(), message = %ctx.id(), "could not end the cancel: {e}");
    }
    Settled::Cancelled
}

/// Ack a durable run's message (or a child run's) and forget its journal, in one transaction
/// shared with the queue's other runs' acks, committed before this returns (a child's parent
/// is woken after it). Runs are queue messages.
async fn ack_run<B: Backend>(source: &Source<B>, ctx: &JobContext<B>) -> crate::Result<()> {
    match source {
        Source::Queue(queue) => queue.ack_run(ctx.receipt()).await,
        Source::Group(_) => source.ack(ctx.receipt()).await,
    }
}

async fn nack<B: Backend>(
    source: &Source<B>,
    ctx: &JobContext<B>,
    error: &str,
) -> crate::Result<Settled> {
    source
        .nack(ctx.receipt(), None, error)
        .await
        .map(|outcome| match outcome {
            crate::domain::NackOutcome::DeadLettered => Settled::DeadLettered,
            _ => Settled::Retried,
        })
}

/// The message of a panic payload (`panic!` gives a `&str` or a `String`).
pub(super) fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => "a non-string panic payload".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::panic_text;

    #[test]
    fn panic_payloads_become_text() {
        let caught = std::panic::catch_unwind(|| panic!("boom {}", 42)).unwrap_err();
        assert_eq!(panic_text(caught), "boom 42");
        let caught = std::panic::catch_unwind(|| panic!("static boom")).unwrap_err();
        assert_eq!(panic_text(caught), "static boom");
    }
}
