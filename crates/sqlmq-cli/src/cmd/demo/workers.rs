//! The demo's producers and consumers, and the counters they share with the progress bar.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use sqlmq::queue::{NackOutcome, Receipt};
use sqlmq::{Backend, Delivery, Message, MessageId, Queue};
use tokio::sync::watch;

use crate::poll::PollDelay;

/// Messages per `send_batch` of a producer.
pub const SEND_BATCH: usize = 100;
/// Messages per claim of a consumer.
pub const RECEIVE_BATCH: usize = 32;
/// Lease of the consumers' claims: far longer than handling takes.
pub const LEASE: Duration = Duration::from_secs(10);

/// What the demo has done so far; read by the progress bar and the summary.
#[derive(Debug, Default)]
pub struct Counters {
    /// Messages committed by producers.
    pub sent: AtomicU64,
    /// Messages acked.
    pub processed: AtomicU64,
    /// Failed attempts that will be retried.
    pub retried: AtomicU64,
    /// Messages dead-lettered.
    pub dead: AtomicU64,
    /// The attempt on which the flaky message succeeded (0: not yet).
    pub flaky_attempt: AtomicU32,
}

impl Counters {
    /// Messages done with for good: acked or dead.
    pub fn settled(&self) -> u64 {
        self.processed.load(Ordering::Relaxed) + self.dead.load(Ordering::Relaxed)
    }
}

/// The two messages that fail on purpose.
#[derive(Clone, Copy, Debug)]
pub struct Specials {
    /// Fails on every attempt: ends in the dead letters.
    pub poison: MessageId,
    /// Fails on its first attempt only: processed on the second.
    pub flaky: MessageId,
}

/// Send `messages` in batches of [`SEND_BATCH`], each batch atomically.
pub async fn produce<B: Backend>(
    queue: Queue<B>,
    messages: Vec<Message>,
    counters: &Counters,
) -> sqlmq::Result<()> {
    for chunk in messages.chunks(SEND_BATCH) {
        queue.send_batch(chunk.to_vec()).await?;
        counters
            .sent
            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Claim, handle and settle until `stop` turns true: failures are nacked one by one (the
/// queue's backoff decides when they come back), successes acked together per claim.
pub async fn consume<B: Backend>(
    queue: Queue<B>,
    specials: Specials,
    counters: &Counters,
    mut stop: watch::Receiver<bool>,
) -> sqlmq::Result<()> {
    let mut poll = PollDelay::default();
    while !*stop.borrow() {
        let batch = queue.receive(RECEIVE_BATCH, LEASE).await?;
        if batch.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep(poll.next_delay()) => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        poll.reset();
        let mut acks: Vec<Receipt> = Vec::with_capacity(batch.len());
        for d in &batch {
            match handle(d, &specials) {
                Ok(()) => {
                    if d.id == specials.flaky {
                        counters.flaky_attempt.store(d.attempt, Ordering::Relaxed);
                    }
                    acks.push(d.receipt());
                }
                Err(error) => match queue.nack(d.receipt(), None, &error).await? {
                    NackOutcome::DeadLettered => {
                        counters.dead.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        counters.retried.fetch_add(1, Ordering::Relaxed);
                    }
                },
            }
        }
        let report = queue.ack_batch(&acks).await?;
        counters
            .processed
            .fetch_add(report.acked as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// The demo's "business logic": everything succeeds but the two special messages.
fn handle(d: &Delivery, specials: &Specials) -> Result<(), String> {
    if d.id == specials.poison {
        Err("cannot parse order: unexpected end of input".to_owned())
    } else if d.id == specials.flaky && d.attempt == 1 {
        Err("payment service timed out (transient)".to_owned())
    } else {
        Ok(())
    }
}
