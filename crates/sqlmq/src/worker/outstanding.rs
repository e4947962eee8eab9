//! What a source's worker holds that can still make more of the source claimable: messages
//! whose handlers run, and acks handed to the acker but not committed yet.
//!
//! A worker that stops when drained ([`WorkerBuilder::stop_when_drained`]) needs it: an ack
//! can release more work of the same source in its own transaction — the next message of an
//! ordering key, a concurrency key's next message, a dependant, a batch's callback — so an
//! empty claim proves the source drained only if nothing was outstanding when it began. A
//! message's slot is free once its ack is queued (claims overlap with ack commits), so the
//! slots alone cannot tell: the worker once stopped with a key's next messages blocked behind
//! an ack that committed a moment later.
//!
//! One count covers both: a message counts from its start until its handler's task ends, and
//! its queued ack from before the task hands it over until the acker's batch has committed (or
//! failed). The ack is counted before the task's own count ends, so the count never passes
//! through zero while a message is on its way.
//!
//! [`WorkerBuilder::stop_when_drained`]: super::WorkerBuilder::stop_when_drained

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The count of one source's outstanding messages and acks.
pub(crate) struct Outstanding {
    /// Whether anyone looks at the count (a worker that stops when drained). When nobody does,
    /// counting is skipped: every message of a busy worker's hot path would otherwise pay a
    /// shared counter and a wakeup for nothing.
    watched: bool,
    count: AtomicUsize,
    /// Told whenever the count goes down.
    fewer: Notify,
}

impl Outstanding {
    /// A count, kept only when `watched`.
    pub(crate) fn new(watched: bool) -> Outstanding {
        Outstanding {
            watched,
            count: AtomicUsize::new(0),
            fewer: Notify::new(),
        }
    }

    /// `n` more are outstanding.
    pub(crate) fn add(&self, n: usize) {
        if self.watched {
            self.count.fetch_add(n, Ordering::SeqCst);
        }
    }

    /// `n` are settled (a handler's task ended, or a batch of acks committed or failed).
    pub(crate) fn settled(&self, n: usize) {
        if self.watched {
            self.count.fetch_sub(n, Ordering::SeqCst);
            self.fewer.notify_waiters();
        }
    }

    /// Whether nothing is outstanding (always, when not watched).
    pub(crate) fn none(&self) -> bool {
        self.count.load(Ordering::SeqCst) == 0
    }

    /// A future that completes at the next [`settled`](Outstanding::settled); it counts from
    /// when it is enabled (pin it and call `enable` before looking at [`none`](Outstanding::none)).
    pub(crate) fn fewer(&self) -> tokio::sync::futures::Notified<'_> {
        self.fewer.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_and_tells_when_fewer() {
        let o = Outstanding::new(true);
        assert!(o.none());
        o.add(2);
        let fewer = o.fewer();
        tokio::pin!(fewer);
        fewer.as_mut().enable();
        o.settled(1);
        fewer.await;
        assert!(!o.none());
        o.settled(1);
        assert!(o.none());
    }

    #[test]
    fn unwatched_it_counts_nothing() {
        let o = Outstanding::new(false);
        o.add(3);
        assert!(o.none());
    }
}
