//! Claims that end without an ack: why ([`Failure`]) and what becomes of them ([`Settlement`]).
//!
//! The engine decides (one function for queues and consumer groups alike, in
//! `consume/fate.rs`); a backend applies the decision to its rows. Backends call the decision
//! through [`Decide`] once they have locked the lease and know how many attempts it made.

use std::time::Duration;

use super::reports::NackOutcome;

/// Why a claim ends without an ack.
#[derive(Clone, Copy, Debug)]
pub enum Failure<'a> {
    /// A failed attempt: retry after `after` (or the backoff of the queue or group, jittered by
    /// `unit` in `[0, 1)`), or dead-letter when the attempts are used up.
    Retry {
        after: Option<Duration>,
        error: &'a str,
        unit: f64,
    },
    /// Not a failure: deliver again after `after`, without counting the attempt.
    Snooze { after: Duration },
    /// Give up now, whatever the attempts left.
    DeadLetter { error: &'a str },
    /// The lease ended before anyone settled it.
    Expired,
    /// Its holder left or died; `reason` says which.
    Released { reason: &'a str },
}

/// What becomes of one claim that ends without an ack.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settlement<'a> {
    /// Deliver again after this wait; `None`: it becomes a dead letter.
    pub retry_after: Option<Duration>,
    /// Attempts to keep on the message (a snooze gives its attempt back).
    pub attempts: u32,
    /// Text for the message's error history; `None` records nothing.
    pub error: Option<&'a str>,
    /// The outcome a consumer group's history records: `failed`, `snoozed`, `dead`,
    /// `expired` or `released`.
    pub outcome: &'static str,
}

impl Settlement<'_> {
    /// The answer a `nack` gives for this settlement.
    pub(crate) fn nack_outcome(&self) -> NackOutcome {
        match self.retry_after {
            Some(after) => NackOutcome::Retry { after },
            None => NackOutcome::DeadLettered,
        }
    }
}

/// The engine's decision for a lease that made `attempts` attempts (called by a backend with
/// the lease locked).
pub type Decide<'a> = dyn Fn(u32) -> Settlement<'a> + Send + Sync + 'a;

/// What a release of leases did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Released {
    /// Back in line (due at once).
    pub released: usize,
    /// On their last attempt: now dead letters.
    pub dead_lettered: usize,
}
