//! Fair queues: weighted fair shares across fairness keys (tenants), by start-time fair
//! queueing.
//!
//! Each message of a fair queue gets a virtual start time when it becomes ready (sent, due,
//! retried, released by its key): the later of its key's last finish time and the queue's
//! virtual clock (the earliest start time still waiting), and its key's finish time moves on by
//! one message's cost over the key's weight. Claims take ready messages in start-time order
//! within a priority, so every key with messages waiting gets its weight's share of claims
//! whatever its backlog: a key that sent a million messages had them spread far into virtual
//! time when they were sent, and a new key's first message starts at the clock, at the head.
//! The claim reads one index in that order; its cost depends on neither the number of keys nor
//! the backlog.

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// One message's cost in virtual time at weight 1: large, so that dividing it by any weight up
/// to [`MAX_WEIGHT`] rounds off less than 10 ppm, and small enough for 8 × 10⁹ messages of one
/// key before a `BIGINT` overflows.
pub(crate) const MESSAGE_COST: i64 = 1 << 30;

/// The heaviest weight a fairness key may have; the lightest is 1 (the default).
///
/// ```
/// assert_eq!(sqlmq::queue::MAX_WEIGHT, 10_000);
/// ```
pub const MAX_WEIGHT: u32 = 10_000;

/// The key a message of a fair queue without a fairness key counts under.
pub(crate) const NO_KEY: &str = "";

/// The start time of a message whose key last finished at `last`, on a queue whose clock reads
/// `clock`, and the key's new finish time at `weight`. Start times are positive: 0 is a
/// first-in, first-out queue's (ready's `vt`, which messages placed without a start time get).
pub(crate) fn start_time(last: i64, clock: i64, weight: u32) -> (i64, i64) {
    let start = last.max(clock).max(1);
    (
        start,
        start + MESSAGE_COST / i64::from(weight.clamp(1, MAX_WEIGHT)),
    )
}

/// Check a fairness key's weight: 1 to [`MAX_WEIGHT`].
pub(crate) fn check_weight(weight: u32) -> Result<()> {
    if (1..=MAX_WEIGHT).contains(&weight) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "weight {weight}: between 1 and {MAX_WEIGHT}"
        )))
    }
}

/// A fairness key of a fair queue: its weight and what it has waiting.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
/// for k in q.fairness_keys(20).await? {
///     println!("{}: weight {}, {} ready", k.key, k.weight, k.ready);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FairnessKey {
    /// The key (empty: the messages sent without one).
    pub key: String,
    /// Its weight (default 1): its share of claims while other keys have messages waiting is
    /// its weight over the sum of theirs.
    pub weight: u32,
    /// Its messages ready to be claimed now.
    pub ready: u64,
    /// Its messages claimed and not yet settled (leased).
    pub in_flight: u64,
    /// Age of its oldest ready message, in milliseconds (0 when none).
    pub oldest_ready_ms: u64,
    /// Its messages made ready so far: sent, due after a delay, back after a retry's backoff
    /// (a retried message counts each time). A counter: its rate is the key's arrival rate.
    pub arrived: u64,
    /// Its messages that left so far: `arrived` less those ready or in flight now — acked,
    /// dead-lettered, cancelled, purged, or gone back to wait for a retry. A counter: its rate
    /// is the key's completion rate.
    pub settled: u64,
}

impl FairnessKey {
    /// Key `key` with weight 1 and nothing counted.
    pub(crate) fn named(key: String) -> Self {
        FairnessKey {
            key,
            weight: 1,
            ready: 0,
            in_flight: 0,
            oldest_ready_ms: 0,
            arrived: 0,
            settled: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_starts_at_the_clock_or_after_its_last_message() {
        assert_eq!(start_time(0, 500, 1), (500, 500 + MESSAGE_COST));
        assert_eq!(start_time(900, 500, 1), (900, 900 + MESSAGE_COST));
        // Never 0, a first-in, first-out queue's start time.
        assert_eq!(start_time(0, 0, 1), (1, 1 + MESSAGE_COST));
    }

    #[test]
    fn weights_divide_the_cost() {
        let (start, heavy) = start_time(0, 0, 3);
        let (_, light) = start_time(0, 0, 1);
        assert_eq!((light - start) / (heavy - start), 3);
        // Out of range weights are clamped, not trusted.
        assert_eq!(start_time(0, 0, 0).1, start + MESSAGE_COST);
        assert!(check_weight(0).is_err());
        assert!(check_weight(MAX_WEIGHT + 1).is_err());
        assert!(check_weight(3).is_ok());
    }
}
