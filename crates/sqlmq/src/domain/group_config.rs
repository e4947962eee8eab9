//! Consumer group settings: mode, retry ladder, dead-letter threshold, where a group starts.

use std::str::FromStr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::backoff::Backoff;
use super::error::{Error, Result};
use super::rate_limit::RateLimit;

/// The default retry ladder of a group (RocketMQ's delay levels from 10 s):
/// 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
///
/// ```
/// use std::time::Duration;
/// let ladder = sqlmq::topic::default_group_ladder();
/// assert_eq!(ladder.delay(1, 0.5), Duration::from_secs(10));
/// assert_eq!(ladder.delay(16, 0.5), Duration::from_secs(7200));
/// ```
pub fn default_group_ladder() -> Backoff {
    const STEPS_S: [u64; 16] = [
        10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
    ];
    Backoff::Ladder(STEPS_S.iter().map(|s| Duration::from_secs(*s)).collect())
}

/// How a consumer group shares a topic among its members.
///
/// ```
/// assert_eq!("broadcast".parse::<sqlmq::topic::GroupMode>().unwrap(), sqlmq::topic::GroupMode::Broadcast);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupMode {
    /// Each record goes to one member, under a lease with a fencing token; acked one by one,
    /// retried on the group's ladder, dead-lettered after its attempts.
    #[default]
    Cluster,
    /// Every member reads every record in offset order, keeping its own position (no acks,
    /// no retries); positions can be checkpointed so that a restarted member resumes.
    Broadcast,
}

impl FromStr for GroupMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<GroupMode> {
        match s {
            "cluster" => Ok(GroupMode::Cluster),
            "broadcast" => Ok(GroupMode::Broadcast),
            _ => Err(Error::InvalidArgument(format!(
                "unknown group mode {s:?}: expected cluster or broadcast"
            ))),
        }
    }
}

impl std::fmt::Display for GroupMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GroupMode::Cluster => "cluster",
            GroupMode::Broadcast => "broadcast",
        })
    }
}

/// A consumer group's settings.
///
/// ```
/// use std::time::Duration;
/// let c = sqlmq::GroupConfig::default()
///     .max_attempts(5)
///     .backoff("1s,10s,1m".parse().unwrap())
///     .consume_timeout(Duration::from_secs(60));
/// assert_eq!(c.mode, sqlmq::topic::GroupMode::Cluster);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GroupConfig {
    /// Cluster (default) or broadcast. Fixed when the group is created.
    pub mode: GroupMode,
    /// Failed attempts before a record is dead-lettered (default 16,
    /// [`GroupConfig::DEFAULT_MAX_ATTEMPTS`]). Cluster mode only.
    pub max_attempts: u32,
    /// Wait before each retry (default: [`default_group_ladder`]). Cluster mode only.
    pub backoff: Backoff,
    /// A record held by a member longer than this is reported (metric
    /// `sqlmq_group_consume_timeouts` and a warning) by the group's maintenance. None: never.
    #[serde(rename = "consume_timeout_ms", default, with = "super::millis::option")]
    pub consume_timeout: Option<Duration>,
    /// At most this many deliveries per window, every member together (cluster mode only;
    /// default: no limit).
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            mode: GroupMode::Cluster,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            backoff: default_group_ladder(),
            consume_timeout: None,
            rate_limit: None,
        }
    }
}

impl GroupConfig {
    /// Default failed attempts before a cluster group's record is dead-lettered: 16
    /// (RocketMQ's; see [`GroupConfig::max_attempts`](GroupConfig#structfield.max_attempts)).
    ///
    /// ```
    /// use sqlmq::GroupConfig;
    /// assert_eq!(GroupConfig::DEFAULT_MAX_ATTEMPTS, 16);
    /// assert_eq!(GroupConfig::default().max_attempts, GroupConfig::DEFAULT_MAX_ATTEMPTS);
    /// ```
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 16;

    /// A broadcast group's settings.
    ///
    /// ```
    /// assert_eq!(sqlmq::GroupConfig::broadcast().mode, sqlmq::topic::GroupMode::Broadcast);
    /// ```
    pub fn broadcast() -> GroupConfig {
        GroupConfig::default().mode(GroupMode::Broadcast)
    }

    /// Set the mode.
    ///
    /// ```
    /// let c = sqlmq::GroupConfig::default().mode(sqlmq::topic::GroupMode::Broadcast);
    /// # let _ = c;
    /// ```
    pub fn mode(mut self, mode: GroupMode) -> Self {
        self.mode = mode;
        self
    }

    /// Failed attempts before dead-lettering.
    ///
    /// ```
    /// let c = sqlmq::GroupConfig::default().max_attempts(3);
    /// # let _ = c;
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// The wait before each retry.
    ///
    /// ```
    /// let c = sqlmq::GroupConfig::default().backoff("5s,1m".parse().unwrap());
    /// # let _ = c;
    /// ```
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Report records held longer than `timeout`.
    ///
    /// ```
    /// let c = sqlmq::GroupConfig::default().consume_timeout(std::time::Duration::from_secs(30));
    /// # let _ = c;
    /// ```
    pub fn consume_timeout(mut self, timeout: Duration) -> Self {
        self.consume_timeout = Some(timeout);
        self
    }

    /// Limit the group's deliveries per window, every member of every process together
    /// (`None`: no limit). A claim takes at most what the window has left; when it has nothing
    /// left the member claims nothing until the window frees. Cluster mode only. A limit set,
    /// changed or removed reaches every process within 2 s.
    ///
    /// ```
    /// let c = sqlmq::GroupConfig::default().rate_limit(Some("50/1s".parse().unwrap()));
    /// assert_eq!(c.rate_limit.unwrap().count, 50);
    /// ```
    pub fn rate_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.rate_limit = limit;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if let Some(rate) = &self.rate_limit {
            if self.mode == GroupMode::Broadcast {
                return Err(Error::InvalidArgument(
                    "a broadcast group cannot have a rate limit (each member reads everything)"
                        .into(),
                ));
            }
            rate.validate()?;
        }
        if self.max_attempts == 0 || self.max_attempts > 1000 {
            return Err(Error::InvalidArgument(format!(
                "max_attempts must be 1..=1000, got {}",
                self.max_attempts
            )));
        }
        if serde_json::to_string(&self.backoff)?.len() > 4000 {
            return Err(Error::InvalidArgument(
                "the backoff ladder is too long".into(),
            ));
        }
        self.backoff.validate()
    }
}

/// Where a new group (or a reset) starts reading.
///
/// Text forms (CLI `--from`): `earliest`, `latest`, an offset (`1234`), or an RFC 3339 time
/// (`2026-11-22T10:00:00Z`).
///
/// ```
/// use sqlmq::topic::StartAt;
/// assert_eq!("earliest".parse::<StartAt>().unwrap(), StartAt::Earliest);
/// assert_eq!("42".parse::<StartAt>().unwrap(), StartAt::Offset(42));
/// assert!(matches!("2026-11-22T10:00:00Z".parse::<StartAt>().unwrap(), StartAt::Time(_)));
/// assert!("soon".parse::<StartAt>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StartAt {
    /// The first retained record of each partition.
    Earliest,
    /// The end of each partition: only records sequenced from now on (the default).
    #[default]
    Latest,
    /// This offset in each partition (clamped to what is retained).
    Offset(i64),
    /// The first record of each partition sequenced at or after this time.
    Time(SystemTime),
}

impl FromStr for StartAt {
    type Err = Error;
    fn from_str(s: &str) -> Result<StartAt> {
        match s {
            "earliest" => return Ok(StartAt::Earliest),
            "latest" => return Ok(StartAt::Latest),
            _ => {}
        }
        if let Ok(offset) = s.parse::<i64>() {
            return if offset >= 0 {
                Ok(StartAt::Offset(offset))
            } else {
                Err(Error::InvalidArgument(format!(
                    "offset {offset} is negative"
                )))
            };
        }
        humantime::parse_rfc3339_weak(s)
            .map(StartAt::Time)
            .map_err(|_| {
                Error::InvalidArgument(format!(
                    "invalid start {s:?}: expected earliest, latest, an offset or an RFC 3339 time"
                ))
            })
    }
}
