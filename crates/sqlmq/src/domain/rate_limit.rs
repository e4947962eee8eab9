//! A queue's delivery rate limit ([`RateLimit`]): at most `count` deliveries in any window of
//! `per`, counted in the database across every process.

use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// At most `count` deliveries in any window of length `per` (a sliding window: no interval of
/// that length, wherever it starts, sees more), every process together. Written `100/1m`,
/// `20/1s`, `5/250ms`.
///
/// ```
/// use std::time::Duration;
/// let r: sqlmq::queue::RateLimit = "100/1m".parse().unwrap();
/// assert_eq!((r.count, r.per), (100, Duration::from_secs(60)));
/// assert_eq!(r.to_string(), "100/1m");
/// assert!("0/1s".parse::<sqlmq::queue::RateLimit>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    /// Deliveries allowed per window (1 to 1 000 000).
    pub count: u32,
    /// The window (10 ms to 1 day, whole milliseconds).
    #[serde(with = "super::millis")]
    pub per: Duration,
}

impl RateLimit {
    /// Most deliveries a window may allow.
    ///
    /// ```
    /// assert_eq!(sqlmq::queue::RateLimit::MAX_COUNT, 1_000_000);
    /// ```
    pub const MAX_COUNT: u32 = 1_000_000;

    /// `count` per `per`.
    ///
    /// ```
    /// let r = sqlmq::queue::RateLimit::new(20, std::time::Duration::from_secs(1));
    /// assert!(r.validate().is_ok());
    /// ```
    pub fn new(count: u32, per: Duration) -> RateLimit {
        RateLimit { count, per }
    }

    /// Check the bounds.
    ///
    /// ```
    /// let r = sqlmq::queue::RateLimit::new(20, std::time::Duration::from_millis(1));
    /// assert!(r.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        let whole_ms = self.per.subsec_nanos().is_multiple_of(1_000_000);
        if !(1..=Self::MAX_COUNT).contains(&self.count)
            || self.per < Duration::from_millis(10)
            || self.per > Duration::from_secs(86_400)
            || !whole_ms
        {
            return Err(Error::InvalidArgument(format!(
                "rate limit {self}: 1 to {} deliveries per 10ms to 1d (whole milliseconds)",
                Self::MAX_COUNT
            )));
        }
        Ok(())
    }

    /// The window in microseconds.
    pub(crate) fn window_us(&self) -> i64 {
        i64::try_from(self.per.as_micros()).unwrap_or(i64::MAX)
    }

    /// What a window holding `used` deliveries, the oldest at `oldest_us`, leaves at `now_us`
    /// (µs of one clock): how many more may go, or, when none may, how long until the oldest
    /// leaves the window (at least 1 µs).
    pub(crate) fn room(&self, used: u64, oldest_us: Option<i64>, now_us: i64) -> Room {
        match u64::from(self.count).saturating_sub(used) {
            0 => Room::FreesIn(self.frees_in(oldest_us, now_us)),
            left => Room::Left(left),
        }
    }

    /// How long from `now_us` until a delivery made at `oldest_us` (none: now) leaves the
    /// window, at least 1 µs.
    pub(crate) fn frees_in(&self, oldest_us: Option<i64>, now_us: i64) -> Duration {
        let frees = oldest_us.unwrap_or(now_us) + self.window_us() - now_us;
        Duration::from_micros(frees.max(1) as u64)
    }
}

/// What a rate window leaves ([`RateLimit::room`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// This many more deliveries may go now.
    Left(u64),
    /// None may until this long from now.
    FreesIn(Duration),
}

impl FromStr for RateLimit {
    type Err = Error;
    fn from_str(s: &str) -> Result<RateLimit> {
        let bad = || {
            Error::InvalidArgument(format!(
                "rate limit {s:?}: COUNT/DURATION, such as 100/1m or 20/1s"
            ))
        };
        let (count, per) = s.split_once('/').ok_or_else(bad)?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        let per = humantime::parse_duration(per.trim()).map_err(|_| bad())?;
        let limit = RateLimit { count, per };
        limit.validate()?;
        Ok(limit)
    }
}

impl std::fmt::Display for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.count, humantime::format_duration(self.per))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn room_counts_what_the_window_leaves_and_when_it_frees() {
        let r = RateLimit::new(3, Duration::from_secs(1));
        assert_eq!(r.room(1, Some(0), 100), Room::Left(2));
        assert_eq!(
            r.room(3, Some(200_000), 500_000),
            Room::FreesIn(Duration::from_micros(700_000))
        );
        // A window whose oldest delivery is already out frees at once (at least 1 µs).
        assert_eq!(
            r.room(5, Some(0), 2_000_000),
            Room::FreesIn(Duration::from_micros(1))
        );
        assert_eq!(r.frees_in(None, 42), Duration::from_secs(1));
    }

    use super::*;

    #[test]
    fn parses_and_prints() {
        for (text, count, per) in [
            ("20/1s", 20, Duration::from_secs(1)),
            ("100/1m", 100, Duration::from_secs(60)),
            (" 5 / 250ms ", 5, Duration::from_millis(250)),
        ] {
            let r: RateLimit = text.parse().unwrap();
            assert_eq!((r.count, r.per), (count, per));
            assert_eq!(r.to_string().parse::<RateLimit>().unwrap(), r);
        }
        for bad in [
            "", "20", "/1s", "20/", "x/1s", "20/soon", "0/1s", "20/1ms", "20/2d", "-1/1s",
        ] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }
}
