//! How long a failed message waits before its next attempt.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};

/// Longest wait a backoff may ask for (as a message's longest delay): ten years.
const MAX_BACKOFF_STEP: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// The wait before the next attempt after a failure.
///
/// ```
/// use std::time::Duration;
/// use sqlmq::queue::Backoff;
///
/// // 1 s, 2 s, 4 s, ... up to 1 h, each ±20 % (the default):
/// let exp = Backoff::default();
/// // RocketMQ-style steps; attempts past the end reuse the last step:
/// let ladder = Backoff::Ladder(vec![Duration::from_secs(10), Duration::from_secs(30)]);
/// assert_eq!(ladder.delay(1, 0.5), Duration::from_secs(10));
/// assert_eq!(ladder.delay(9, 0.5), Duration::from_secs(30));
/// # let _ = exp;
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// `base * 2^(attempt-1)`, capped at `max`, then spread by ±`jitter` (a fraction, 0 to 1) so
    /// that messages failing together do not come back together.
    Exponential {
        /// Wait after the first failure.
        #[serde(with = "super::millis")]
        base: Duration,
        /// Longest wait.
        #[serde(with = "super::millis")]
        max: Duration,
        /// Relative spread, 0.0 to 1.0.
        jitter: f64,
    },
    /// Fixed steps: the n-th failure waits the n-th step (the last step repeats).
    Ladder(#[serde(with = "super::millis::list")] Vec<Duration>),
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::Exponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The wait after failed attempt number `attempt` (1-based). `unit` is a random number in
    /// `[0, 1)` that drives the jitter (pass 0.5 for none).
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = sqlmq::queue::Backoff::Exponential {
    ///     base: Duration::from_secs(1), max: Duration::from_secs(60), jitter: 0.0,
    /// };
    /// assert_eq!(b.delay(3, 0.9), Duration::from_secs(4));
    /// assert_eq!(b.delay(30, 0.9), Duration::from_secs(60));
    /// ```
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        match self {
            Backoff::Exponential { base, max, jitter } => {
                let exp = attempt.saturating_sub(1).min(40);
                let raw = base.saturating_mul(1u32 << exp.min(31)).min(*max);
                let factor = 1.0 + jitter * (2.0 * unit - 1.0);
                // (checked: a jittered step past `Duration::MAX` is the max, never a panic)
                Duration::try_from_secs_f64(raw.as_secs_f64() * factor.max(0.0))
                    .unwrap_or(*max)
                    .min(*max)
            }
            Backoff::Ladder(steps) => {
                let i = (attempt.max(1) as usize - 1).min(steps.len().saturating_sub(1));
                steps.get(i).copied().unwrap_or(Duration::ZERO)
            }
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let longest = match self {
            Backoff::Exponential { max, .. } => *max,
            Backoff::Ladder(steps) => steps.iter().copied().max().unwrap_or_default(),
        };
        if longest > MAX_BACKOFF_STEP {
            return Err(Error::InvalidArgument(format!(
                "a backoff step of {} is over the limit of 10 years",
                humantime::format_duration(longest)
            )));
        }
        match self {
            Backoff::Exponential { jitter, base, max } => {
                if !(0.0..=1.0).contains(jitter) {
                    return Err(Error::InvalidArgument(format!(
                        "jitter {jitter} is not in 0..=1"
                    )));
                }
                if base > max {
                    return Err(Error::InvalidArgument(
                        "backoff base exceeds its max".into(),
                    ));
                }
            }
            Backoff::Ladder(steps) if steps.is_empty() => {
                return Err(Error::InvalidArgument(
                    "a backoff ladder needs at least one step".into(),
                ));
            }
            Backoff::Ladder(_) => {}
        }
        Ok(())
    }
}

/// Parse a backoff from its CLI form: `exp:BASE:MAX` (e.g. `exp:1s:1h`) or a comma-separated
/// ladder (e.g. `10s,30s,1m`).
///
/// ```
/// use std::time::Duration;
/// let b: sqlmq::queue::Backoff = "10s,30s,1m".parse().unwrap();
/// assert_eq!(b.delay(3, 0.5), Duration::from_secs(60));
/// assert!("exp:1s:1h".parse::<sqlmq::queue::Backoff>().is_ok());
/// assert!("soon".parse::<sqlmq::queue::Backoff>().is_err());
/// ```
impl std::str::FromStr for Backoff {
    type Err = Error;
    fn from_str(s: &str) -> Result<Backoff> {
        let dur = |t: &str| {
            humantime::parse_duration(t.trim()).map_err(|e| {
                Error::InvalidArgument(format!("invalid duration {t:?} in backoff: {e}"))
            })
        };
        let backoff = if let Some(rest) = s.strip_prefix("exp:") {
            let (base, max) = rest.split_once(':').ok_or_else(|| {
                Error::InvalidArgument(format!("expected exp:BASE:MAX, got {s:?}"))
            })?;
            Backoff::Exponential {
                base: dur(base)?,
                max: dur(max)?,
                jitter: 0.2,
            }
        } else {
            Backoff::Ladder(s.split(',').map(dur).collect::<Result<_>>()?)
        };
        backoff.validate()?;
        Ok(backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_grows_caps_and_jitters_within_bounds() {
        let b = Backoff::default();
        assert_eq!(b.delay(1, 0.5), Duration::from_secs(1));
        assert_eq!(b.delay(2, 0.5), Duration::from_secs(2));
        assert_eq!(b.delay(100, 0.5), Duration::from_secs(3600));
        let low = b.delay(5, 0.0);
        let high = b.delay(5, 0.999_999);
        assert!(low >= Duration::from_millis(12_800) && low < Duration::from_secs(16));
        assert!(high > Duration::from_secs(16) && high <= Duration::from_millis(19_200));
    }

    #[test]
    fn the_stored_text_stays_as_it_is() {
        // Queue and group rows keep a backoff as this JSON: its form is a stored format.
        let exp = Backoff::Exponential {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
            jitter: 0.2,
        };
        assert_eq!(
            serde_json::to_string(&exp).unwrap(),
            r#"{"exponential":{"base":1000,"max":3600000,"jitter":0.2}}"#
        );
        let ladder = Backoff::Ladder(vec![Duration::from_secs(10)]);
        assert_eq!(
            serde_json::to_string(&ladder).unwrap(),
            r#"{"ladder":[10000]}"#
        );
    }

    #[test]
    fn serde_round_trip() {
        for b in [
            Backoff::default(),
            Backoff::Ladder(vec![Duration::from_secs(10)]),
        ] {
            let text = serde_json::to_string(&b).unwrap();
            assert_eq!(serde_json::from_str::<Backoff>(&text).unwrap(), b);
        }
    }

    #[test]
    fn validation() {
        assert!(Backoff::Ladder(vec![]).validate().is_err());
        let bad = Backoff::Exponential {
            base: Duration::from_secs(2),
            max: Duration::from_secs(1),
            jitter: 0.1,
        };
        assert!(bad.validate().is_err());
    }
}
