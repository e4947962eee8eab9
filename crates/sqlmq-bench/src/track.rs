//! Delivery bookkeeping of a consumer scenario: which ids arrived, how often, and when the
//! last one did, so that every scenario reports duplicates and losses it observed.
//!
//! A duplicate is a second delivery of an id. Every consumer of the bench holds leases far
//! longer than a run ([`LEASE`](super::args::LEASE)) and acks everything it receives, so a
//! second delivery is never a legitimate redelivery. A loss is an id that was sent (the send
//! returned Ok) and never delivered before the consumers gave up.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::args::STALL;

/// Deliveries seen by the consumers of one scenario.
pub struct Tracker<K> {
    expected: u64,
    seen: Mutex<Seen<K>>,
    unique: AtomicU64,
    started: Instant,
    /// Nanoseconds after `started` of the last delivery (or of `started`).
    last_ns: AtomicU64,
    /// Set when no more messages will be sent: only then may consumers give up.
    sending_done: AtomicBool,
}

struct Seen<K> {
    ids: HashSet<K>,
    duplicates: u64,
}

/// What the consumers observed, checked against what was sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Deliveries of an id already delivered.
    pub duplicates: u64,
    /// Ids sent and never delivered.
    pub losses: u64,
    /// Ids delivered that were never sent (counted with duplicates in reports: both mean a
    /// broken guarantee).
    pub unexpected: u64,
}

impl<K: Hash + Eq + Clone> Tracker<K> {
    /// A tracker expecting `expected` distinct ids.
    pub fn new(expected: u64) -> Tracker<K> {
        Tracker {
            expected,
            seen: Mutex::new(Seen {
                ids: HashSet::with_capacity(expected as usize),
                duplicates: 0,
            }),
            unique: AtomicU64::new(0),
            started: Instant::now(),
            last_ns: AtomicU64::new(0),
            sending_done: AtomicBool::new(false),
        }
    }

    /// Record delivered ids; returns how many were new.
    pub fn record(&self, ids: impl IntoIterator<Item = K>) -> u64 {
        let mut fresh = 0;
        {
            let mut seen = self.seen.lock().expect("poisoned");
            for id in ids {
                if seen.ids.insert(id) {
                    fresh += 1;
                } else {
                    seen.duplicates += 1;
                }
            }
        }
        self.unique.fetch_add(fresh, Ordering::Relaxed);
        self.last_ns
            .store(self.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        fresh
    }

    /// When the last delivery was recorded (or sending finished, if later).
    pub fn last_delivery(&self) -> Instant {
        self.started + Duration::from_nanos(self.last_ns.load(Ordering::Relaxed))
    }

    /// Distinct ids delivered so far.
    pub fn delivered(&self) -> u64 {
        self.unique.load(Ordering::Relaxed)
    }

    /// Declare that every message has been sent (consumers may now give up on a stall).
    pub fn sending_done(&self) {
        self.last_ns
            .fetch_max(self.started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.sending_done.store(true, Ordering::Relaxed);
    }

    /// Whether consumers should stop: everything arrived, or nothing has arrived for
    /// [`STALL`] since the senders finished.
    pub fn should_stop(&self) -> bool {
        if self.delivered() >= self.expected {
            return true;
        }
        if !self.sending_done.load(Ordering::Relaxed) {
            return false;
        }
        let last = Duration::from_nanos(self.last_ns.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last) > STALL
    }

    /// Compare the deliveries with the ids that were sent.
    pub fn check<'a>(&self, sent: impl IntoIterator<Item = &'a K>) -> Check
    where
        K: 'a,
    {
        let seen = self.seen.lock().expect("poisoned");
        let mut check = Check {
            duplicates: seen.duplicates,
            ..Check::default()
        };
        let mut matched = 0;
        for id in sent {
            if seen.ids.contains(id) {
                matched += 1;
            } else {
                check.losses += 1;
            }
        }
        check.unexpected = (seen.ids.len() as u64).saturating_sub(matched);
        check
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_duplicates_losses_and_strangers() {
        let t = Tracker::new(4);
        assert_eq!(t.record([1u64, 2]), 2);
        assert_eq!(t.record([2u64, 9]), 1);
        assert!(!t.should_stop());
        let check = t.check(&[1, 2, 3]);
        assert_eq!(
            check,
            Check {
                duplicates: 1,
                losses: 1,
                unexpected: 1
            }
        );
        t.record([3u64]);
        assert!(t.should_stop());
    }
}
