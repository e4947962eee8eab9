//! A topic's settings ([`TopicConfig`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// Per-topic settings.
///
/// ```
/// use std::time::Duration;
/// let c = sqlmq::TopicConfig::default()
///     .partitions(8)
///     .retention(Duration::from_secs(7 * 24 * 3600))
///     .retention_keeps_unconsumed(true);
/// assert_eq!(c.partitions, 8);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TopicConfig {
    /// Partitions (default 1). Can grow, never shrink; keys then map to new partitions.
    pub partitions: u32,
    /// Delete records older than this (none by default: keep everything).
    #[serde(rename = "retention_ms", default, with = "super::millis::option")]
    pub retention: Option<Duration>,
    /// Keep at most about this many bytes of bodies per partition (oldest deleted first).
    pub retention_bytes: Option<u64>,
    /// Never delete a record that a consumer group has not consumed yet, whatever the limits.
    pub retention_keeps_unconsumed: bool,
    /// Cluster groups hand out one record per partition at a time (the next only once the
    /// previous one is acked or dead): strict order per key, at the cost of parallelism within
    /// a partition.
    pub strict_order: bool,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            partitions: 1,
            retention: None,
            retention_bytes: None,
            retention_keeps_unconsumed: false,
            strict_order: false,
        }
    }
}

impl TopicConfig {
    /// Most partitions a topic may have: 1024 (see [`TopicConfig::partitions`]).
    ///
    /// ```
    /// use sqlmq::TopicConfig;
    /// assert_eq!(TopicConfig::MAX_PARTITIONS, 1024);
    /// let widest = TopicConfig::default().partitions(TopicConfig::MAX_PARTITIONS);
    /// # let _ = widest;
    /// ```
    pub const MAX_PARTITIONS: u32 = 1024;

    /// How often a client applies a topic's retention on its own, from its groups' maintenance:
    /// once a minute (see [`TopicConfig::retention`] and
    /// [`Topic::apply_retention`](crate::Topic::apply_retention)). A record past its retention
    /// is thus deleted up to about this much later.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::TopicConfig;
    /// assert_eq!(TopicConfig::RETENTION_INTERVAL, Duration::from_secs(60));
    /// // Keep an hour of records, give or take the retention interval:
    /// let hour = Duration::from_secs(3600);
    /// let c = TopicConfig::default().retention(hour - TopicConfig::RETENTION_INTERVAL);
    /// # let _ = c;
    /// ```
    pub const RETENTION_INTERVAL: Duration = Duration::from_secs(60);

    /// Set the partition count (1 to [`TopicConfig::MAX_PARTITIONS`]).
    ///
    /// ```
    /// let c = sqlmq::TopicConfig::default().partitions(4);
    /// # let _ = c;
    /// ```
    pub fn partitions(mut self, n: u32) -> Self {
        self.partitions = n;
        self
    }

    /// Delete records older than `age`.
    ///
    /// ```
    /// let c = sqlmq::TopicConfig::default().retention(std::time::Duration::from_secs(3600));
    /// # let _ = c;
    /// ```
    pub fn retention(mut self, age: Duration) -> Self {
        self.retention = Some(age);
        self
    }

    /// Keep at most about `bytes` of bodies per partition.
    ///
    /// ```
    /// let c = sqlmq::TopicConfig::default().retention_bytes(1 << 30);
    /// # let _ = c;
    /// ```
    pub fn retention_bytes(mut self, bytes: u64) -> Self {
        self.retention_bytes = Some(bytes);
        self
    }

    /// Never delete records some consumer group has not consumed.
    ///
    /// ```
    /// let c = sqlmq::TopicConfig::default().retention_keeps_unconsumed(true);
    /// # let _ = c;
    /// ```
    pub fn retention_keeps_unconsumed(mut self, keep: bool) -> Self {
        self.retention_keeps_unconsumed = keep;
        self
    }

    /// One record per partition in flight per cluster group (strict per-key order).
    ///
    /// ```
    /// let c = sqlmq::TopicConfig::default().strict_order(true);
    /// # let _ = c;
    /// ```
    pub fn strict_order(mut self, strict: bool) -> Self {
        self.strict_order = strict;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.partitions == 0 || self.partitions > Self::MAX_PARTITIONS {
            return Err(Error::InvalidArgument(format!(
                "partitions must be 1..={}, got {}",
                Self::MAX_PARTITIONS,
                self.partitions
            )));
        }
        Ok(())
    }
}
