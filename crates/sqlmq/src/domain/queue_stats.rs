//! A queue's counts by state ([`QueueStats`]).

use std::time::Duration;

use serde::Serialize;

/// Counts of one queue's messages by state.
///
/// ```
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// for q in client.queue_stats().await? {
///     println!("{}: {} ready, {} in flight, {} dead", q.name, q.ready, q.in_flight, q.dead);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct QueueStats {
    /// Queue name.
    pub name: String,
    /// Whether consumers are paused.
    pub paused: bool,
    /// Claimable now.
    pub ready: u64,
    /// Waiting for their time: delayed sends and retries in backoff.
    pub scheduled: u64,
    /// Keyed messages waiting for an earlier message with their key.
    pub blocked: u64,
    /// Waiting for their dependencies to be acked, or for their batch to finish (callbacks).
    pub waiting: u64,
    /// Claimed and not yet acked (cancelled ones included until their handler ends).
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// Age of the oldest ready message (database clock), in milliseconds.
    pub oldest_ready_age_ms: Option<u64>,
}

impl QueueStats {
    /// Messages not yet acked or dead: ready + scheduled + blocked + waiting + in flight.
    ///
    /// ```
    /// let s = sqlmq::queue::QueueStats::default();
    /// assert_eq!(s.pending(), 0);
    /// ```
    pub fn pending(&self) -> u64 {
        self.ready + self.scheduled + self.blocked + self.waiting + self.in_flight
    }

    /// The oldest ready message's age as a `Duration`.
    ///
    /// ```
    /// assert_eq!(sqlmq::queue::QueueStats::default().oldest_ready_age(), None);
    /// ```
    pub fn oldest_ready_age(&self) -> Option<Duration> {
        self.oldest_ready_age_ms.map(Duration::from_millis)
    }
}
