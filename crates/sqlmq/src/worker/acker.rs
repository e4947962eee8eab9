//! The batch acker: acks of handlers that finish at about the same time share one `ack_batch`
//! transaction.
//!
//! Batching is natural rather than timed: the acker takes the first waiting ack plus whatever
//! else is already queued (up to [`WorkerBuilder::MAX_ACK_BATCH`]) and commits them together,
//! so an idle worker acks at once and a busy one pays one commit per batch instead of one per
//! message.
//!
//! A handled message frees its slot as soon as its ack is queued here, so that claims overlap
//! with ack commits instead of waiting for them. Back-pressure: the queue is bounded, so when the
//! database falls behind, jobs wait to hand over their acks, slots stay taken, and claiming
//! slows down instead of piling up acks. The acker counts each ack's outcome in the worker's
//! tally itself. At shutdown, dropping every handle makes the task commit what is queued and end.
//!
//! A batch that fails for a reason retrying can fix (the database unreachable, or out of space:
//! an InnoDB tablespace without a free extent refuses even a delete, whose undo log needs a
//! page) is retried, with backoff, until the messages' leases would have ended: a handled
//! message is acked once space or the server is back instead of coming back and running again.
//! Past the lease an ack could only be refused (the message is someone else's by then). Once
//! the worker is stopping, a failed batch is not retried, so that shutdown never waits on a
//! database that is away.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::WorkerBuilder;
use super::execute::Settled;
use super::outstanding::Outstanding;
use super::tally::Tally;
use crate::domain::Receipt;
use crate::outage::{Outage, sleep_unless_stopped};
use crate::source::Source;
use crate::store::Backend;

/// The jobs' handle to a source's acker task.
#[derive(Clone)]
pub(crate) struct Acker {
    requests: mpsc::Sender<Receipt>,
    /// The source's outstanding count: a queued ack counts until its batch commits.
    outstanding: Arc<Outstanding>,
}

impl Acker {
    /// Start the acker task of `source`, whose claims hold messages for `lease`, counting
    /// outcomes in `tally` and each ack in `outstanding` until its batch has committed;
    /// `stopping` is the worker's signal to stop claiming.
    pub(crate) fn start<B: Backend>(
        source: Source<B>,
        lease: Duration,
        stopping: CancellationToken,
        tally: Arc<Tally>,
        outstanding: Arc<Outstanding>,
    ) -> (Acker, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(WorkerBuilder::MAX_ACK_BATCH * 4);
        let retry = Retry { lease, stopping };
        let task = tokio::spawn(run(source, retry, rx, tally, Arc::clone(&outstanding)));
        let acker = Acker {
            requests: tx,
            outstanding,
        };
        (acker, task)
    }

    /// Queue `receipt` for the next batch (waits while the queue is full). Returns false when
    /// the acker is gone (then the message comes back when its lease ends).
    pub(crate) async fn ack(&self, receipt: Receipt) -> bool {
        // Counted before the handler's task ends its own count (see `outstanding.rs`).
        self.outstanding.add(1);
        let queued = self.requests.send(receipt).await.is_ok();
        if !queued {
            self.outstanding.settled(1);
        }
        queued
    }
}

/// How long a failed batch is retried: until its leases would have ended, or the worker stops.
struct Retry {
    lease: Duration,
    stopping: CancellationToken,
}

async fn run<B: Backend>(
    source: Source<B>,
    retry: Retry,
    mut requests: mpsc::Receiver<Receipt>,
    tally: Arc<Tally>,
    outstanding: Arc<Outstanding>,
) {
    let mut batch: Vec<Receipt> = Vec::with_capacity(WorkerBuilder::MAX_ACK_BATCH);
    let (label, name) = source.metric_label();
    let batch_size = metrics::histogram!(crate::telemetry::catalogue::ACK_BATCH_SIZE.name(), label => name.clone());
    while requests
        .recv_many(&mut batch, WorkerBuilder::MAX_ACK_BATCH)
        .await
        > 0
    {
        batch_size.record(batch.len() as f64);
        // No lease in the batch outlasts this (each was last extended before its handler ended).
        let give_up = tokio::time::Instant::now() + retry.lease;
        let outage = source.client().outage();
        let mut failures = 0;
        loop {
            let started = std::time::Instant::now();
            match source.ack_batch(&batch).await {
                Ok(report) => {
                    outage.succeeded();
                    tally.add(Settled::Acked, report.acked as u64);
                    tally.add(Settled::LeaseLost, report.lost.len() as u64);
                }
                Err(e) => {
                    failures += 1;
                    let wait = Outage::pause(failures);
                    if e.is_retryable()
                        && !retry.stopping.is_cancelled()
                        && tokio::time::Instant::now() + wait < give_up
                    {
                        // An unavailable database is logged once, by the client's outage.
                        if !outage.failed_since(&e, started) {
                            tracing::warn!(
                                source = name,
                                acks = batch.len(),
                                "batch ack failed, retrying: {e}"
                            );
                        }
                        sleep_unless_stopped(wait, &retry.stopping).await;
                        continue;
                    }
                    // The messages come back when their leases end.
                    tracing::warn!(source = name, acks = batch.len(), "batch ack failed: {e}");
                    tally.add(Settled::Unsettled, batch.len() as u64);
                }
            }
            break;
        }
        outstanding.settled(batch.len());
        batch.clear();
    }
}
