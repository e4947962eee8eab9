//! The consumer every queue scenario uses: claim a batch and ack it in one `ack_batch` (or, in
//! the lock-held modes, claim and ack it, or take it, in one transaction of its own), record
//! the ids (and, for latency scenarios, the age of each body), and poll with the adaptive delay
//! of `sqlmq consume` (10 ms doubling to 1 s) when the queue is empty.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Result;
use sqlmq::error::ErrorClass;
use sqlmq::queue::{AckReport, Receipt};
use sqlmq::{Delivery, MessageId, Queue};
use tokio::task::JoinSet;

use crate::args::LEASE;
use crate::backend::Db;
use crate::measure::{Latencies, age};
use crate::progress::Bar;
use crate::track::Tracker;
use sqlmq_cli_common::poll::PollDelay;

/// One consumer's settings; clone it once per consumer task.
pub struct Consumer<B: Db> {
    /// The queue to drain.
    pub queue: Queue<B>,
    /// Messages per `receive`.
    pub batch: usize,
    /// Shared bookkeeping; consumers stop when it says so.
    pub tracker: Arc<Tracker<MessageId>>,
    /// Advanced by each acked message.
    pub bar: Bar,
    /// Where to record the age of each body made by `measure::stamped` with this origin.
    pub latency: Option<(Arc<Latencies>, Instant)>,
    /// How batches are claimed and settled.
    pub mode: Mode,
    /// With leases: retry an `ack_batch` the server rolled back (a deadlock, as the error's
    /// class tells its caller to), counting the retries here. `None`: the error ends the
    /// scenario, as every other error does.
    pub retried: Option<Arc<AtomicU64>>,
}

/// How a consumer claims and settles its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `receive`, then one `ack_batch`: two transactions per batch.
    Leases,
    /// `receive_in` and `ack_batch_in` in one transaction per batch.
    LockHeld,
    /// `take_in` and a commit: one transaction per batch, no lease.
    Take,
}

// By hand: a derive would require `B: Clone`.
impl<B: Db> Clone for Consumer<B> {
    fn clone(&self) -> Self {
        Consumer {
            queue: self.queue.clone(),
            batch: self.batch,
            tracker: Arc::clone(&self.tracker),
            bar: self.bar.clone(),
            latency: self.latency.clone(),
            mode: self.mode,
            retried: self.retried.clone(),
        }
    }
}

impl<B: Db> Consumer<B> {
    /// Consume until the tracker says stop. Returns the number of acks that found their lease
    /// lost (always 0 unless something is broken: leases outlive the run).
    pub async fn run(self) -> Result<u64> {
        let mut poll = PollDelay::default();
        let mut lost = 0;
        while !self.tracker.should_stop() {
            let (got, lost_now) = match self.mode {
                Mode::Leases => {
                    let got = self.queue.receive(self.batch, LEASE).await?;
                    let receipts: Vec<Receipt> = got.iter().map(Delivery::receipt).collect();
                    // `ack_batch` of nothing returns at once.
                    let lost = self.ack_batch(&receipts).await?.lost.len();
                    (got, lost)
                }
                Mode::LockHeld => self.claim_and_ack_in_one_transaction().await?,
                Mode::Take => (self.take_in_one_transaction().await?, 0),
            };
            lost += lost_now as u64;
            if got.is_empty() {
                tokio::time::sleep(poll.next_delay()).await;
                continue;
            }
            poll.reset();
            if let Some((latencies, origin)) = &self.latency {
                for d in &got {
                    if let Some(a) = age(*origin, &d.body) {
                        latencies.record(a);
                    }
                }
            }
            // Recorded once acked, so that a scenario's end time includes the last ack.
            self.tracker.record(got.iter().map(|d| d.id));
            self.bar.inc(got.len() as u64);
        }
        Ok(lost)
    }

    /// `ack_batch`, again while the server rolls it back and [`Consumer::retried`] is set.
    async fn ack_batch(&self, receipts: &[Receipt]) -> Result<AckReport> {
        loop {
            match self.queue.ack_batch(receipts).await {
                Err(e) if e.class() == Some(ErrorClass::RetryTransaction) => match &self.retried {
                    Some(retried) => {
                        retried.fetch_add(1, Ordering::Relaxed);
                    }
                    None => return Err(e.into()),
                },
                done => return Ok(done?),
            }
        }
    }

    /// The lock-held mode's unit: claim, ack and commit a batch in one transaction (rolled
    /// back when nothing was claimed). Returns the batch and the acks that lost their lease.
    async fn claim_and_ack_in_one_transaction(&self) -> Result<(Vec<Delivery>, usize)> {
        let mut tx = self.queue.client().begin().await?;
        let got = self.queue.receive_in(&mut tx, self.batch, LEASE).await?;
        if got.is_empty() {
            tx.rollback().await?;
            return Ok((got, 0));
        }
        let receipts: Vec<Receipt> = got.iter().map(Delivery::receipt).collect();
        let report = self.queue.ack_batch_in(&mut tx, &receipts).await?;
        tx.commit().await?;
        Ok((got, report.lost.len()))
    }

    /// The take's unit: take a batch and commit (rolled back when nothing was taken).
    async fn take_in_one_transaction(&self) -> Result<Vec<Delivery>> {
        let mut tx = self.queue.client().begin().await?;
        let got = self.queue.take_in(&mut tx, self.batch).await?;
        if got.is_empty() {
            tx.rollback().await?;
        } else {
            tx.commit().await?;
        }
        Ok(got)
    }

    /// Run `count` consumers like this one until the tracker says stop; returns the lost acks.
    pub async fn run_many(&self, count: usize) -> Result<u64> {
        self.run_each(vec![self.queue.clone(); count]).await
    }

    /// Run one consumer like this one on each of `queues` (handles of the same queue, through
    /// clients of their own) until the tracker says stop; returns the lost acks.
    pub async fn run_each(&self, queues: Vec<Queue<B>>) -> Result<u64> {
        let mut set = JoinSet::new();
        for queue in queues {
            let mut consumer = self.clone();
            consumer.queue = queue;
            set.spawn(consumer.run());
        }
        let mut lost = 0;
        while let Some(done) = set.join_next().await {
            lost += done??;
        }
        Ok(lost)
    }
}
