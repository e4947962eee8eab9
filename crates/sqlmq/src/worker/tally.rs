//! Counting what became of the worker's messages.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::execute::Settled;

/// What a worker did, returned by [`WorkerBuilder::run`](super::WorkerBuilder::run).
///
/// ```no_run
/// # async fn f(report: sqlmq::worker::WorkerReport) { println!("{} acked, {} retried", report.acked, report.retried); }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Handled and acked.
    pub acked: u64,
    /// Failed and scheduled for another attempt.
    pub retried: u64,
    /// Postponed without counting as a failure.
    pub snoozed: u64,
    /// Failed for the last time, or given up on by the handler.
    pub dead_lettered: u64,
    /// Stopped at the end of the shutdown grace period and released for an immediate retry.
    pub released: u64,
    /// Results discarded because another consumer had taken the message over.
    pub lease_lost: u64,
    /// Could not be settled (database unavailable); they come back when their leases end.
    pub unsettled: u64,
    /// Cancelled while their handlers ran ([`Queue::cancel`](crate::Queue::cancel)): removed.
    pub cancelled: u64,
}

#[derive(Default)]
pub(crate) struct Tally {
    counts: [AtomicU64; 8],
}

impl Tally {
    /// Count `n` messages that ended as `settled` (a job that handed its ack to the acker is
    /// counted by the acker).
    pub(crate) fn add(&self, settled: Settled, n: u64) {
        let i = match settled {
            Settled::AckQueued => return,
            Settled::Acked => 0,
            Settled::Retried => 1,
            Settled::Snoozed => 2,
            Settled::DeadLettered => 3,
            Settled::Released => 4,
            Settled::LeaseLost => 5,
            Settled::Unsettled => 6,
            Settled::Cancelled => 7,
        };
        self.counts[i].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn report(&self) -> WorkerReport {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        WorkerReport {
            acked: c(0),
            retried: c(1),
            snoozed: c(2),
            dead_lettered: c(3),
            released: c(4),
            lease_lost: c(5),
            unsettled: c(6),
            cancelled: c(7),
        }
    }
}
