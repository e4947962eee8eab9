//! One source's claim loop (a queue or a consumer group): claim batches sized to the free slots,
//! start each message at once.
//!
//! Slots are the permits of a semaphore: each running message holds one and returns it when it
//! has been settled. The slot rule — a claim never asks for more messages than there are free
//! slots — means no message is ever claimed without being started, so shutdown has nothing to
//! release but the handlers still running, and it knows they are done when every permit is
//! back.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::batch::execute_batch;
use super::budget::Budget;
use super::execute::{SourceHandler, SourceRuntime, execute};
use super::poll::PollState;
use super::tally::Tally;
use crate::domain::{Delivery, Error, Result};
use crate::outage::{Outage, sleep_unless_stopped};
use crate::source::Source;
use crate::store::Backend;

/// How one queue's claim loop runs.
#[derive(Clone)]
pub(crate) struct ConsumerConfig {
    pub concurrency: usize,
    pub max_batch: usize,
    /// Stop claiming once the source is drained (see [`run_consumer`]).
    pub stop_when_drained: bool,
    /// Messages the whole worker may still claim (shared by its queues).
    pub budget: Arc<Budget>,
}

/// The running messages of one queue: `concurrency` slots, of which the free ones are the
/// semaphore's permits.
pub(crate) struct Slots {
    free: Arc<Semaphore>,
    concurrency: usize,
}

impl Slots {
    pub(crate) fn new(concurrency: usize) -> Slots {
        Slots {
            free: Arc::new(Semaphore::new(concurrency)),
            concurrency,
        }
    }

    fn running(&self) -> usize {
        self.concurrency - self.free.available_permits()
    }

    /// Take one slot for as long as the permit lives; `None` when all are taken.
    pub(crate) fn hold(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.free).try_acquire_owned().ok()
    }

    /// Wait until at least `n` slots are free (all of them at most), in the semaphore's own
    /// queue: the wait costs nothing while it lasts. (Taking one permit and giving it straight
    /// back, as the consumer once did, returns at once whenever one slot is free: the consumer
    /// spun through its loop, a core's worth of CPU, until enough handlers finished.)
    async fn until_free(&self, n: usize) {
        // Never closed, so this only fails if the semaphore were closed.
        let _ = self.free.acquire_many(n.min(self.concurrency) as u32).await;
    }

    /// Wait until no message runs (every permit is back).
    pub(crate) async fn all_done(&self) {
        // Never closed, so this only fails if the semaphore were closed.
        let _ = self.free.acquire_many(self.concurrency as u32).await;
    }
}

/// Scheduler turns a claim loop lets pass once enough slots are free, before it claims. Two
/// took a cluster group's no-op worker from 8 500–8 900 to 12 500–13 000 records/s
/// (`topic.pipeline.consume`; docs/BENCHMARKS.md, "The worker's claim loop"); more gained
/// nothing.
const LINGER_TURNS: usize = 2;

/// Claim and start messages of one queue until `stop` (or until the queue is drained, or the
/// budget spent, when so configured). Returns early with an error retrying cannot fix (the
/// queue was deleted, the schema changed); the messages already started keep running in
/// `slots` either way.
///
/// Drained means: a claim found nothing, nothing of the source was outstanding when it began
/// (no handler of any of the source's loops running, no ack waiting to commit: see
/// `outstanding.rs`), and a look at the source finds nothing ready and nothing maintenance
/// would make ready now.
pub(crate) async fn run_consumer<B: Backend>(
    rt: Arc<SourceRuntime<B>>,
    config: &ConsumerConfig,
    slots: &Slots,
    poll: &PollState,
    tally: &Arc<Tally>,
    stop: &CancellationToken,
) -> Result<()> {
    let wakeup = rt.source.client().wakeup(rt.source.subject());
    let mut failures = 0u32;
    loop {
        if stop.is_cancelled() {
            return Ok(());
        }
        let free = slots.free.available_permits();
        // Claim in full batches: while some of this loop's messages still run, wait until at
        // least half a batch of slots is free, rather than claiming slot by slot (many small
        // claim transactions cost the server more per message than a few large ones).
        let worth_claiming = config.max_batch.min(slots.concurrency).div_ceil(2);
        if free < worth_claiming && slots.running() > 0 {
            tokio::select! {
                () = slots.until_free(worth_claiming) => {}
                _ = stop.cancelled() => return Ok(()),
            }
            // Handlers that finished in the same instant give their slots back within a turn
            // or two of the scheduler: claim after them, fuller (fewer claims per message; no
            // timer, so nothing waits when nothing else is runnable).
            for _ in 0..LINGER_TURNS {
                tokio::task::yield_now().await;
            }
            continue;
        }
        let Some(reserved) = config
            .budget
            .reserve(free.min(config.max_batch), stop)
            .await
        else {
            // The worker's message budget is spent (or the worker stops): the whole worker is
            // done, including consumers of other queues that may be waiting for work.
            stop.cancel();
            return Ok(());
        };
        // Register for the wakeup, and for the source's next settlement, before claiming, so
        // that a send or an ack committed between an empty claim and the wait is not missed.
        let notified = wakeup.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let fewer = rt.outstanding.fewer();
        tokio::pin!(fewer);
        if config.stop_when_drained {
            fewer.as_mut().enable();
        }
        let quiet = rt.outstanding.none();
        let started = std::time::Instant::now();
        let claimed = rt.source.claim(reserved.len(), rt.lease).await;
        reserved.spend(claimed.as_ref().map_or(0, Vec::len));
        match claimed {
            Ok(batch) if !batch.is_empty() => {
                failures = 0;
                rt.source.client().outage().succeeded();
                poll.activity.store(true, Ordering::Relaxed);
                start(&rt, batch, slots, tally);
            }
            Ok(_) if config.stop_when_drained && quiet => {
                match rt.source.may_have_work().await {
                    Ok(false) => return Ok(()),
                    Ok(true) => {}
                    Err(e) if e.is_retryable() => {}
                    Err(e) => {
                        tracing::error!(source = rt.source.name(), "claiming stopped: {e}");
                        return Err(e);
                    }
                }
                // Rows were there but held by another transaction for a moment, or maintenance
                // just gave some back: look again.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                    _ = stop.cancelled() => {}
                }
            }
            Ok(_) => {
                failures = 0;
                rt.source.client().outage().succeeded();
                poll.enter_idle();
                let woken = tokio::select! {
                    _ = &mut notified => true,
                    _ = stop.cancelled() => false,
                    // A message of the source settled: with `stop_when_drained`, its ack may
                    // have released more, or it was the last one.
                    () = &mut fewer, if config.stop_when_drained => false,
                };
                poll.leave_idle();
                // Woken for the source's id — by the prober, a send, a notification — look
                // whether the id still names the source before claiming: a database
                // re-created or restored gives the ids to other queues and groups (see
                // `Error::Deleted`). One light read per wakeup from idle; a busy loop, which
                // claims back to back, never pays it. (Skipping it after the prober's own
                // probe is not enough: a probe that ran before the id changed may be the last
                // one when a send for the new owner wakes the loop.)
                if woken {
                    stop_if_gone(&rt.source).await?;
                }
            }
            Err(e) if e.is_retryable() => {
                failures += 1;
                // An unavailable database is logged once, by the client's outage.
                if !rt.source.client().outage().failed_since(&e, started) {
                    tracing::warn!(source = rt.source.name(), "claim failed, retrying: {e}");
                }
                sleep_unless_stopped(Outage::pause(failures), stop).await;
                // The database may have been re-created (or restored) meanwhile, its ids given
                // to other queues: claim again only from the same queue.
                stop_if_gone(&rt.source).await?;
            }
            Err(e) => {
                tracing::error!(source = rt.source.name(), "claiming stopped: {e}");
                return Err(e);
            }
        }
    }
}

/// [`Error::Deleted`] (logged) when `source` was deleted or its id went to another; a look
/// that fails otherwise is left to the claim, which meets the same database.
async fn stop_if_gone<B: Backend>(source: &Source<B>) -> Result<()> {
    match source.verify().await {
        Err(e) if matches!(e, Error::Deleted { .. }) => {
            tracing::error!(source = source.name(), "claiming stopped: {e}");
            Err(e)
        }
        _ => Ok(()),
    }
}

/// Start the claimed `batch`: a task per message, or one for the whole claim when the source
/// has a batch handler. Each message holds a slot until it is settled.
fn start<B: Backend>(
    rt: &Arc<SourceRuntime<B>>,
    batch: Vec<Delivery>,
    slots: &Slots,
    tally: &Arc<Tally>,
) {
    let permits = Arc::clone(&slots.free)
        .try_acquire_many_owned(batch.len() as u32)
        .expect("claims never exceed the free slots");
    rt.outstanding.add(batch.len());
    match &rt.handler {
        SourceHandler::Each(_) => {
            let mut permits = permits;
            for delivery in batch {
                let permit = permits.split(1).expect("a permit per message");
                let (rt, tally) = (Arc::clone(rt), Arc::clone(tally));
                tokio::spawn(async move {
                    tally.add(execute(Arc::clone(&rt), delivery).await, 1);
                    drop(permit);
                    rt.outstanding.settled(1);
                });
            }
        }
        SourceHandler::Batch(handler) => {
            let (rt, tally, handler) = (Arc::clone(rt), Arc::clone(tally), Arc::clone(handler));
            let n = batch.len();
            tokio::spawn(async move {
                for settled in execute_batch(Arc::clone(&rt), handler.as_ref(), batch).await {
                    tally.add(settled, 1);
                }
                drop(permits);
                rt.outstanding.settled(n);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_count_running_messages_and_report_when_all_are_done() {
        let slots = Slots::new(2);
        let permit = Arc::clone(&slots.free).try_acquire_owned().unwrap();
        assert_eq!(slots.running(), 1);
        let done = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(permit);
        });
        slots.all_done().await;
        assert_eq!(slots.running(), 0);
        done.await.unwrap();
    }
}
