//! A queue's settings ([`QueueConfig`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backoff::Backoff;
use super::error::{Error, Result};
use super::rate_limit::RateLimit;

/// Per-queue settings.
///
/// ```
/// use std::time::Duration;
/// let config = sqlmq::QueueConfig::default()
///     .max_attempts(10)
///     .backoff("1s,10s,1m".parse().unwrap())
///     .dedup_window(Duration::from_secs(3600));
/// assert_eq!(config.max_attempts, 10);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Deliveries before a failing message becomes a dead letter (default 25,
    /// [`QueueConfig::DEFAULT_MAX_ATTEMPTS`]). Every claim counts, so a message whose consumer
    /// keeps crashing also ends up dead instead of looping.
    pub max_attempts: u32,
    /// Wait before the next attempt after a nack without an explicit delay.
    pub backoff: Backoff,
    /// How long an idempotency key is remembered (default 24 h,
    /// [`QueueConfig::DEFAULT_DEDUP_WINDOW`]).
    #[serde(rename = "dedup_window_ms", with = "super::millis")]
    pub dedup_window: Duration,
    /// At most this many messages in flight (claimed, not yet settled) in the whole queue,
    /// every process together (default: no limit).
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// At most this many deliveries in any window of this length, every process together
    /// (default: no limit).
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// At most this many messages of one concurrency key admitted at once (default: no
    /// limit; see [`Message::concurrency_key`](crate::Message::concurrency_key)).
    #[serde(default)]
    pub concurrency_limit: Option<u32>,
    /// At most this many deliveries of one concurrency key in any window of this length,
    /// every process together (default: no limit).
    #[serde(default)]
    pub rate_limit_per_key: Option<RateLimit>,
    /// Hand out ready messages across fairness keys by weight within a priority, instead of
    /// first in, first out (default: `false`; see [`QueueConfig::fair`]).
    #[serde(default)]
    pub fair: bool,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            dedup_window: Self::DEFAULT_DEDUP_WINDOW,
            max_in_flight: None,
            rate_limit: None,
            concurrency_limit: None,
            rate_limit_per_key: None,
            fair: false,
        }
    }
}

impl QueueConfig {
    /// Default number of attempts before a queue's message is dead-lettered: 25 (River's and
    /// delayed_job's default; see [`QueueConfig::max_attempts`]).
    ///
    /// ```
    /// use sqlmq::QueueConfig;
    /// assert_eq!(QueueConfig::DEFAULT_MAX_ATTEMPTS, 25);
    /// assert_eq!(QueueConfig::default().max_attempts, QueueConfig::DEFAULT_MAX_ATTEMPTS);
    /// // Fewer retries for a queue of cheap, idempotent jobs:
    /// let c = QueueConfig::default().max_attempts(QueueConfig::DEFAULT_MAX_ATTEMPTS / 5);
    /// # let _ = c;
    /// ```
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;

    /// Default time an idempotency key is remembered: 24 h (see
    /// [`QueueConfig::dedup_window`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::QueueConfig;
    /// assert_eq!(QueueConfig::DEFAULT_DEDUP_WINDOW, Duration::from_secs(24 * 3600));
    /// let c = QueueConfig::default().dedup_window(7 * QueueConfig::DEFAULT_DEDUP_WINDOW);
    /// # let _ = c;
    /// ```
    pub const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(24 * 3600);

    /// Set the attempts before dead-lettering (at least 1).
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().max_attempts(3);
    /// # let _ = c;
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Set the retry backoff.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().backoff(sqlmq::queue::Backoff::Ladder(vec![std::time::Duration::from_secs(5)]));
    /// # let _ = c;
    /// ```
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Set how long idempotency keys are remembered.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().dedup_window(std::time::Duration::from_secs(600));
    /// # let _ = c;
    /// ```
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = window;
        self
    }

    /// Limit the messages in flight in the whole queue, every process together (`None`: no
    /// limit). A claim takes at most what is left; a consumer whose message is never settled
    /// gives its slot back when the lease ends.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().max_in_flight(Some(5));
    /// assert_eq!(c.max_in_flight, Some(5));
    /// ```
    pub fn max_in_flight(mut self, n: Option<u32>) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Limit the deliveries per window, every process together (`None`: no limit).
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().rate_limit(Some("100/1m".parse().unwrap()));
    /// assert_eq!(c.rate_limit.unwrap().count, 100);
    /// ```
    pub fn rate_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.rate_limit = limit;
        self
    }

    /// Limit each concurrency key to `n` messages admitted at once — ready, in flight or
    /// waiting for a retry — every process together (`None`: no limit). Messages of a full key
    /// wait in line (in send order) and are admitted as earlier ones are acked, dead-lettered
    /// or cancelled; other keys are not held back. A slot is held until its message is done,
    /// so a message waiting out its retry backoff keeps it. A limit raised, lowered or removed
    /// applies from the next admission of each key.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().concurrency_limit(Some(2));
    /// assert_eq!(c.concurrency_limit, Some(2));
    /// ```
    pub fn concurrency_limit(mut self, n: Option<u32>) -> Self {
        self.concurrency_limit = n;
        self
    }

    /// Limit the deliveries of each concurrency key per window, every process together
    /// (`None`: no limit). A claim that finds a key over its limit skips its messages rather
    /// than wait: they are put back, due when the key's window frees (spread over the windows
    /// after it when many wait), and the other keys flow meanwhile. Messages without a
    /// concurrency key are not counted.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().rate_limit_per_key(Some("10/1s".parse().unwrap()));
    /// assert_eq!(c.rate_limit_per_key.unwrap().count, 10);
    /// ```
    pub fn rate_limit_per_key(mut self, limit: Option<RateLimit>) -> Self {
        self.rate_limit_per_key = limit;
        self
    }

    /// Make the queue fair: within a priority it hands out its ready messages across
    /// fairness keys ([`Message::fairness_key`](crate::Message::fairness_key)) so that each
    /// key with messages waiting gets its weight's share of claims
    /// ([`Queue::set_weight`](crate::Queue::set_weight), default 1), however many messages
    /// any key has waiting; messages without a key share the empty key. A message's place is
    /// fixed when it becomes ready (sent, due, retried), so a change of mode or weight applies
    /// to messages that become ready after it (processes read the mode again within
    /// seconds).
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().fair(true);
    /// assert!(c.fair);
    /// ```
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }

    /// Whether the queue has a `queue_limits` row (any limit).
    pub(crate) fn has_limits(&self) -> bool {
        self.is_limited() || self.concurrency_limit.is_some()
    }

    /// Whether claims of this queue go through its limits.
    pub(crate) fn is_limited(&self) -> bool {
        self.max_in_flight.is_some()
            || self.rate_limit.is_some()
            || self.rate_limit_per_key.is_some()
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_in_flight.is_some_and(|n| n == 0 || n > 1_000_000) {
            return Err(Error::InvalidArgument(format!(
                "max_in_flight must be 1..=1000000, got {}",
                self.max_in_flight.unwrap_or_default()
            )));
        }
        if let Some(rate) = &self.rate_limit {
            rate.validate()?;
        }
        if let Some(rate) = &self.rate_limit_per_key {
            rate.validate()?;
        }
        if self
            .concurrency_limit
            .is_some_and(|n| n == 0 || n > 1_000_000)
        {
            return Err(Error::InvalidArgument(format!(
                "concurrency_limit must be 1..=1000000, got {}",
                self.concurrency_limit.unwrap_or_default()
            )));
        }
        if self.max_attempts == 0 || self.max_attempts > 1_000_000 {
            return Err(Error::InvalidArgument(format!(
                "max_attempts must be 1..=1000000, got {}",
                self.max_attempts
            )));
        }
        if self.dedup_window > Duration::from_secs(366 * 24 * 3600) {
            return Err(Error::InvalidArgument(
                "dedup_window is longer than a year".into(),
            ));
        }
        self.backoff.validate()
    }
}
