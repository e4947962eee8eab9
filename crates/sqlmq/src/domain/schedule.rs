//! Recurring schedules: what a schedule sends and when ([`ScheduleConfig`], [`Timing`]), what
//! it fired ([`Schedule`]), and which fire times a pass fires ([`plan`]).
//!
//! Fire times are instants in microseconds since the Unix epoch (UTC). A cron expression is
//! evaluated in its IANA time zone by `croner` over `jiff` (whose time zone database is built
//! into the binary, so every process computes the same fire times); an interval fires at the
//! multiples of itself since the epoch, so that every process agrees on them without talking.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::message::check_headers;
use super::name::{validate_key, validate_name};

/// Header naming the schedule a fired message or record came from.
///
/// ```
/// assert_eq!(sqlmq::schedule::SCHEDULE_HEADER, "sqlmq-schedule");
/// ```
pub const SCHEDULE_HEADER: &str = "sqlmq-schedule";

/// Header holding the fire time a fired message or record stands for (RFC 3339, UTC, to the
/// microsecond).
///
/// ```
/// assert_eq!(sqlmq::schedule::FIRE_TIME_HEADER, "sqlmq-fire-time");
/// ```
pub const FIRE_TIME_HEADER: &str = "sqlmq-fire-time";

/// How late a fire time may be found and still count as late rather than missed: a late one
/// always fires; what becomes of a missed one (no process ran, or the database was
/// unreachable) is the schedule's [`CatchUp`] policy.
///
/// ```
/// assert_eq!(sqlmq::schedule::CATCH_UP_GRACE, std::time::Duration::from_secs(60));
/// ```
pub const CATCH_UP_GRACE: Duration = Duration::from_secs(60);

/// The shortest interval of [`Timing::Every`].
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest interval of [`Timing::Every`]: 100 years (its fire times stay printable dates).
const MAX_INTERVAL: Duration = Duration::from_secs(100 * 365 * 86_400);

/// When a schedule fires.
///
/// ```
/// use std::time::Duration;
/// use sqlmq::schedule::Timing;
/// let nightly = Timing::cron("30 2 * * *", "Europe/Paris");
/// let often = Timing::Every(Duration::from_secs(10));
/// assert!(nightly.validate().is_ok() && often.validate().is_ok());
/// assert!(Timing::cron("61 * * * *", "UTC").validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// A cron expression — 5 fields (minute hour day-of-month month day-of-week), or 6 with
    /// seconds first — in an IANA time zone (`"UTC"`, `"Europe/Paris"`). Across daylight
    /// saving changes, a time the clock skips fires once right after the change, and a
    /// fixed time the clock repeats fires once (its first occurrence); expressions that fire
    /// every second or minute go on firing through the repeated hour, each instant once.
    Cron {
        /// The expression.
        expr: String,
        /// The IANA time zone it is read in.
        zone: String,
    },
    /// Every interval (one second to 100 years, in whole milliseconds), at its multiples since the Unix epoch: every
    /// minute fires on the minute, every hour on the hour (UTC).
    #[serde(with = "super::millis")]
    Every(Duration),
}

impl Timing {
    /// A cron timing in `zone` (see [`Timing::Cron`]).
    ///
    /// ```
    /// let t = sqlmq::schedule::Timing::cron("0 9 * * MON-FRI", "America/New_York");
    /// assert!(t.validate().is_ok());
    /// ```
    pub fn cron(expr: impl Into<String>, zone: impl Into<String>) -> Timing {
        Timing::Cron {
            expr: expr.into(),
            zone: zone.into(),
        }
    }

    /// Check the expression, the time zone and the interval.
    ///
    /// ```
    /// use sqlmq::schedule::Timing;
    /// assert!(Timing::cron("* * * * *", "Mars/Olympus").validate().is_err());
    /// assert!(Timing::Every(std::time::Duration::from_millis(10)).validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        match self {
            Timing::Cron { expr, zone } => {
                parse_cron(expr)?;
                time_zone(zone)?;
            }
            Timing::Every(d) => {
                if *d < MIN_INTERVAL || !d.subsec_nanos().is_multiple_of(1_000_000) {
                    return Err(Error::InvalidArgument(format!(
                        "schedule interval {d:?}: at least 1s, in whole milliseconds"
                    )));
                }
                if *d > MAX_INTERVAL {
                    return Err(Error::InvalidArgument(format!(
                        "schedule interval {}: at most 100 years",
                        humantime::format_duration(*d)
                    )));
                }
            }
        }
        Ok(())
    }

    /// The first fire time strictly after `after_us`; `None` when there is none (a cron
    /// expression that matches no future time, such as February 30th).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::schedule::Timing;
    /// let every_minute = Timing::Every(Duration::from_secs(60));
    /// assert_eq!(every_minute.next_after(90_000_000).unwrap(), Some(120_000_000));
    /// assert_eq!(every_minute.next_after(120_000_000).unwrap(), Some(180_000_000));
    /// ```
    pub fn next_after(&self, after_us: i64) -> Result<Option<i64>> {
        match self {
            Timing::Every(d) => {
                let step = d.as_micros() as i64;
                Ok(Some((after_us.div_euclid(step) + 1) * step))
            }
            Timing::Cron { expr, zone } => {
                let at = zoned(after_us, zone)?;
                occurrence(parse_cron(expr)?.find_next_occurrence(&at, false))
            }
        }
    }

    /// The last fire time at or before `at_us`; `None` when there is none.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::schedule::Timing;
    /// let every_minute = Timing::Every(Duration::from_secs(60));
    /// assert_eq!(every_minute.last_at_or_before(120_000_000).unwrap(), Some(120_000_000));
    /// assert_eq!(every_minute.last_at_or_before(119_999_999).unwrap(), Some(60_000_000));
    /// ```
    pub fn last_at_or_before(&self, at_us: i64) -> Result<Option<i64>> {
        match self {
            Timing::Every(d) => {
                let step = d.as_micros() as i64;
                Ok(Some(at_us.div_euclid(step) * step))
            }
            Timing::Cron { expr, zone } => {
                let at = zoned(at_us, zone)?;
                occurrence(parse_cron(expr)?.find_previous_occurrence(&at, true))
            }
        }
    }
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Timing::Cron { expr, zone } => write!(f, "cron {expr:?} in {zone}"),
            Timing::Every(d) => write!(f, "every {}", humantime::format_duration(*d)),
        }
    }
}

fn parse_cron(expr: &str) -> Result<croner::Cron> {
    use croner::parser::{CronParser, Seconds, Year};
    let fields = expr.split_whitespace().count();
    if !(5..=6).contains(&fields) {
        return Err(Error::InvalidArgument(format!(
            "cron expression {expr:?}: 5 fields (minute hour day month weekday), or 6 with \
             seconds first; found {fields}"
        )));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| Error::InvalidArgument(format!("cron expression {expr:?}: {e}")))
}

fn time_zone(zone: &str) -> Result<jiff::tz::TimeZone> {
    jiff::tz::TimeZone::get(zone).map_err(|_| {
        Error::InvalidArgument(format!(
            "unknown time zone {zone:?}: an IANA name such as UTC or Europe/Paris"
        ))
    })
}

fn zoned(at_us: i64, zone: &str) -> Result<jiff::Zoned> {
    let ts = jiff::Timestamp::from_microsecond(at_us)
        .map_err(|e| Error::InvalidArgument(format!("time {at_us} µs: {e}")))?;
    Ok(ts.to_zoned(time_zone(zone)?))
}

fn occurrence(
    found: std::result::Result<jiff::Zoned, croner::errors::CronError>,
) -> Result<Option<i64>> {
    match found {
        Ok(z) => Ok(Some(z.timestamp().as_microsecond())),
        Err(croner::errors::CronError::TimeSearchLimitExceeded) => Ok(None),
        Err(e) => Err(Error::InvalidArgument(format!("cron: {e}"))),
    }
}

/// Where a schedule sends.
///
/// ```
/// let t = sqlmq::schedule::ScheduleTarget::Queue("reports".into());
/// assert_eq!(t.to_string(), "queue reports");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleTarget {
    /// A message to this queue.
    Queue(String),
    /// A record to this topic.
    Topic(String),
}

impl std::fmt::Display for ScheduleTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleTarget::Queue(q) => write!(f, "queue {q}"),
            ScheduleTarget::Topic(t) => write!(f, "topic {t}"),
        }
    }
}

/// What becomes of missed fire times: those found more than [`CATCH_UP_GRACE`] late (no
/// process ran, or the database was unreachable). Fire times found later than due but within
/// the grace always fire.
///
/// ```
/// assert_eq!("all".parse::<sqlmq::schedule::CatchUp>().unwrap(), sqlmq::schedule::CatchUp::All);
/// assert_eq!(sqlmq::schedule::CatchUp::default(), sqlmq::schedule::CatchUp::Skip);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Missed fire times are dropped.
    #[default]
    Skip,
    /// The latest missed fire time fires once, however late; the others are dropped.
    One,
    /// Every missed fire time fires, oldest first, up to the schedule's
    /// [`catch_up_limit`](ScheduleConfig::catch_up_limit) (the latest ones are kept).
    All,
}

impl FromStr for CatchUp {
    type Err = Error;
    fn from_str(s: &str) -> Result<CatchUp> {
        match s {
            "skip" => Ok(CatchUp::Skip),
            "one" => Ok(CatchUp::One),
            "all" => Ok(CatchUp::All),
            _ => Err(Error::InvalidArgument(format!(
                "catch-up policy {s:?}: skip, one or all"
            ))),
        }
    }
}

impl std::fmt::Display for CatchUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CatchUp::Skip => "skip",
            CatchUp::One => "one",
            CatchUp::All => "all",
        })
    }
}

/// A recurring schedule: when it fires, where it sends, what it sends, and what becomes of
/// missed fire times. Each fire sends one message (or record) carrying [`SCHEDULE_HEADER`] and
/// [`FIRE_TIME_HEADER`] besides its own headers.
///
/// ```
/// use std::time::Duration;
/// use sqlmq::schedule::{CatchUp, ScheduleConfig, ScheduleTarget, Timing};
/// let config = ScheduleConfig::new(
///     Timing::cron("0 3 * * *", "Europe/Paris"),
///     ScheduleTarget::Queue("reports".into()),
/// )
/// .body("nightly report")
/// .header("kind", "report")
/// .priority(-1)
/// .catch_up(CatchUp::One);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleConfig {
    /// When it fires.
    pub timing: Timing,
    /// Where it sends.
    pub target: ScheduleTarget,
    /// The body of each message (stored beside this configuration, not in it).
    #[serde(skip)]
    pub body: Vec<u8>,
    /// Headers of each message.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The ordering key of each message (a queue target) or the record key (a topic target).
    #[serde(default)]
    pub key: Option<String>,
    /// The priority of each message (a queue target; lower first).
    #[serde(default)]
    pub priority: i16,
    /// What becomes of missed fire times.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// Most missed fire times [`CatchUp::All`] fires at once (default 100).
    #[serde(default = "default_catch_up_limit")]
    pub catch_up_limit: u32,
}

fn default_catch_up_limit() -> u32 {
    ScheduleConfig::DEFAULT_CATCH_UP_LIMIT
}

impl ScheduleConfig {
    /// Default of [`ScheduleConfig::catch_up_limit`].
    ///
    /// ```
    /// assert_eq!(sqlmq::schedule::ScheduleConfig::DEFAULT_CATCH_UP_LIMIT, 100);
    /// ```
    pub const DEFAULT_CATCH_UP_LIMIT: u32 = 100;
    /// Largest [`ScheduleConfig::catch_up_limit`].
    ///
    /// ```
    /// assert_eq!(sqlmq::schedule::ScheduleConfig::MAX_CATCH_UP_LIMIT, 10_000);
    /// ```
    pub const MAX_CATCH_UP_LIMIT: u32 = 10_000;

    /// A schedule firing on `timing` to `target`, with an empty body.
    ///
    /// ```
    /// use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::Every(std::time::Duration::from_secs(5)),
    ///     ScheduleTarget::Topic("ticks".into()));
    /// assert!(c.body.is_empty());
    /// ```
    pub fn new(timing: Timing, target: ScheduleTarget) -> ScheduleConfig {
        ScheduleConfig {
            timing,
            target,
            body: Vec::new(),
            headers: BTreeMap::new(),
            key: None,
            priority: 0,
            catch_up: CatchUp::Skip,
            catch_up_limit: Self::DEFAULT_CATCH_UP_LIMIT,
        }
    }

    /// Set the body.
    ///
    /// ```
    /// # use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Queue("q".into()))
    ///     .body(r#"{"task":"sweep"}"#);
    /// assert_eq!(c.body, br#"{"task":"sweep"}"#);
    /// ```
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Add a header.
    ///
    /// ```
    /// # use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Queue("q".into()))
    ///     .header("tenant", "acme");
    /// assert_eq!(c.headers["tenant"], "acme");
    /// ```
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Set the key: the ordering key of a queue's messages, the record key of a topic's.
    ///
    /// ```
    /// # use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Topic("t".into()))
    ///     .key("sensor-7");
    /// assert_eq!(c.key.as_deref(), Some("sensor-7"));
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Set the priority of a queue's messages (lower first).
    ///
    /// ```
    /// # use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Queue("q".into()))
    ///     .priority(-5);
    /// assert_eq!(c.priority, -5);
    /// ```
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Set the catch-up policy.
    ///
    /// ```
    /// # use sqlmq::schedule::{CatchUp, ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Queue("q".into()))
    ///     .catch_up(CatchUp::All).catch_up_limit(10);
    /// assert_eq!((c.catch_up, c.catch_up_limit), (CatchUp::All, 10));
    /// ```
    pub fn catch_up(mut self, policy: CatchUp) -> Self {
        self.catch_up = policy;
        self
    }

    /// Set the most missed fire times [`CatchUp::All`] fires at once (1 to
    /// [`ScheduleConfig::MAX_CATCH_UP_LIMIT`]).
    ///
    /// ```
    /// # use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let c = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Queue("q".into()))
    ///     .catch_up_limit(0);
    /// assert!(c.validate().is_err());
    /// ```
    pub fn catch_up_limit(mut self, limit: u32) -> Self {
        self.catch_up_limit = limit;
        self
    }

    /// Check every field (the target's existence is checked when the schedule is created).
    ///
    /// ```
    /// # use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let bad = ScheduleConfig::new(Timing::cron("* * * * *", "UTC"), ScheduleTarget::Queue("no spaces".into()));
    /// assert!(bad.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        self.timing.validate()?;
        match &self.target {
            ScheduleTarget::Queue(q) => validate_name("queue", q)?,
            ScheduleTarget::Topic(t) => validate_name("topic", t)?,
        }
        check_headers(&self.headers)?;
        if let Some(key) = &self.key {
            validate_key("key", key)?;
        }
        if !(1..=Self::MAX_CATCH_UP_LIMIT).contains(&self.catch_up_limit) {
            return Err(Error::InvalidArgument(format!(
                "catch-up limit {}: 1 to {}",
                self.catch_up_limit,
                Self::MAX_CATCH_UP_LIMIT
            )));
        }
        Ok(())
    }

    /// The stored form of everything but the body.
    pub(crate) fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string(self)?)
    }

    /// Back from [`ScheduleConfig::to_json`] and the body.
    pub(crate) fn from_stored(json: &str, body: Vec<u8>) -> Result<ScheduleConfig> {
        let mut config: ScheduleConfig = serde_json::from_str(json)
            .map_err(|e| Error::Corrupt(format!("schedule {json:?}: {e}")))?;
        config.body = body;
        Ok(config)
    }
}

/// A schedule as stored: its configuration and what it has fired.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// for s in client.schedules().await? {
///     println!("{}: {} → {}, next {:?}, last {:?}", s.name, s.config.timing,
///         s.config.target, s.next_fire, s.last_fired);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Schedule {
    /// The schedule's name.
    pub name: String,
    /// What it sends and when.
    pub config: ScheduleConfig,
    /// Paused schedules do not fire; resuming one skips what it would have fired meanwhile.
    pub paused: bool,
    /// The next fire time; `None` when the timing has no future fire time.
    pub next_fire: Option<SystemTime>,
    /// The latest fire time fired.
    pub last_fired: Option<SystemTime>,
    /// Messages (or records) fired so far.
    pub fired: u64,
    /// Created (database clock).
    pub created_at: SystemTime,
    /// Last changed by its owner: created, updated, paused or resumed (database clock).
    pub updated_at: SystemTime,
}

/// The stored "never": a `next_fire` for a timing without future fire times (it sorts after
/// every real time, so it is never due).
pub(crate) const NEVER: i64 = i64::MAX;

/// What one firing of a due schedule does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The fire times to send, oldest first.
    pub fires: Vec<i64>,
    /// The schedule's next fire time afterwards ([`NEVER`] for none).
    pub next: i64,
}

/// Which fire times a schedule whose next fire time is `next_fire` fires at `now_us` (both µs,
/// database clock). Every fire time in `[next_fire, now]` is due. Those at most
/// [`CATCH_UP_GRACE`] old are late, not missed: they always fire (a busy process or a slow
/// commit loses none). Older ones were missed, and the catch-up policy decides: skip drops
/// them, one fires the latest of them, all fires them. At most `catch_up_limit` fire, the
/// latest kept.
pub(crate) fn plan(config: &ScheduleConfig, next_fire: i64, now_us: i64) -> Result<Plan> {
    let next = config.timing.next_after(now_us)?.unwrap_or(NEVER);
    let limit = config.catch_up_limit as usize;
    let grace = CATCH_UP_GRACE.as_micros() as i64;
    let mut fires = Vec::new();
    let mut at = if next_fire <= now_us {
        config.timing.last_at_or_before(now_us)?
    } else {
        None
    };
    // Walk back from the latest due fire time: the late ones, then as many missed ones as
    // the policy takes.
    while let Some(t) = at {
        if t < next_fire || fires.len() >= limit {
            break;
        }
        let missed = now_us - t > grace;
        match config.catch_up {
            CatchUp::Skip if missed => break,
            CatchUp::One if missed => {
                fires.push(t);
                break;
            }
            _ => fires.push(t),
        }
        at = config.timing.last_at_or_before(t - 1)?;
    }
    fires.reverse();
    Ok(Plan { fires, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    fn every(secs: u64, catch_up: CatchUp) -> ScheduleConfig {
        ScheduleConfig::new(
            Timing::Every(Duration::from_secs(secs)),
            ScheduleTarget::Queue("q".into()),
        )
        .catch_up(catch_up)
    }

    fn at(zone: &str, civil: &str) -> i64 {
        let dt: jiff::civil::DateTime = civil.parse().unwrap();
        dt.to_zoned(jiff::tz::TimeZone::get(zone).unwrap())
            .unwrap()
            .timestamp()
            .as_microsecond()
    }

    #[test]
    fn on_time_fires_once_and_moves_on() {
        let c = every(10, CatchUp::Skip);
        let p = plan(&c, 100 * S, 100 * S + 3).unwrap();
        assert_eq!(
            p,
            Plan {
                fires: vec![100 * S],
                next: 110 * S
            }
        );
        // Not due yet: nothing, and the next fire time is where it was.
        let p = plan(&c, 110 * S, 109 * S).unwrap();
        assert_eq!(
            p,
            Plan {
                fires: vec![],
                next: 110 * S
            }
        );
    }

    #[test]
    fn catch_up_after_a_ten_minute_gap() {
        let hourly_late = |policy| {
            let c = ScheduleConfig::new(
                Timing::cron("0 * * * *", "UTC"),
                ScheduleTarget::Queue("q".into()),
            )
            .catch_up(policy);
            plan(&c, 3600 * S, 3600 * S + 600 * S).unwrap()
        };
        assert_eq!(hourly_late(CatchUp::Skip).fires, Vec::<i64>::new());
        assert_eq!(hourly_late(CatchUp::One).fires, vec![3600 * S]);
        assert_eq!(hourly_late(CatchUp::All).fires, vec![3600 * S]);
        assert_eq!(hourly_late(CatchUp::All).next, 7200 * S);

        // Every second, 600 s missed. The last minute's fire times are late, not missed:
        // each policy fires them; one adds the latest missed, all the missed up to the limit.
        let now = 1600 * S + 400_000;
        let secs = |from: i64, to: i64| (from..=to).map(|s| s * S).collect::<Vec<_>>();
        let skip = plan(&every(1, CatchUp::Skip), 1000 * S, now).unwrap();
        assert_eq!(skip.fires, secs(1541, 1600));
        assert_eq!(skip.next, 1601 * S);
        let one = plan(&every(1, CatchUp::One), 1000 * S, now).unwrap();
        assert_eq!(one.fires, secs(1540, 1600));
        let all = plan(&every(1, CatchUp::All), 1000 * S, now).unwrap();
        assert_eq!(all.fires, secs(1501, 1600));
        let all = plan(
            &every(1, CatchUp::All).catch_up_limit(10_000),
            1000 * S,
            now,
        )
        .unwrap();
        assert_eq!(all.fires, secs(1000, 1600));
    }

    #[test]
    fn a_late_pass_fires_every_late_fire_time() {
        // A pass 2.5 s late on a 1 s schedule fires the three fire times it finds due.
        let p = plan(&every(1, CatchUp::Skip), 100 * S, 102 * S + 500_000).unwrap();
        assert_eq!(p.fires, vec![100 * S, 101 * S, 102 * S]);
        assert_eq!(p.next, 103 * S);
    }

    #[test]
    fn a_time_the_clock_skips_fires_once_right_after_the_change() {
        // 2026-03-29 in Paris: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
        let t = Timing::cron("30 2 * * *", "Europe/Paris");
        let before = at("Europe/Paris", "2026-03-29T01:00:00");
        let fire = t.next_after(before).unwrap().unwrap();
        assert_eq!(fire, at("Europe/Paris", "2026-03-29T03:00:00"));
        // And once: the next is the following day's 02:30.
        let next = t.next_after(fire).unwrap().unwrap();
        assert_eq!(next, at("Europe/Paris", "2026-03-30T02:30:00"));
    }

    #[test]
    fn a_time_the_clock_repeats_fires_once() {
        // 2026-10-25 in Paris: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
        let t = Timing::cron("30 2 * * *", "Europe/Paris");
        let before = at("Europe/Paris", "2026-10-25T01:00:00");
        let first = t.next_after(before).unwrap().unwrap();
        let next = t.next_after(first).unwrap().unwrap();
        assert_eq!(next, at("Europe/Paris", "2026-10-26T02:30:00"));
        // The first 02:30 (CEST, 00:30 UTC).
        assert_eq!(first, at("UTC", "2026-10-25T00:30:00"));
    }

    #[test]
    fn six_fields_have_seconds_and_seven_are_refused() {
        let t = Timing::cron("*/15 * * * * *", "UTC");
        assert_eq!(t.next_after(0).unwrap(), Some(15 * S));
        assert!(Timing::cron("0 0 * * * * 2030", "UTC").validate().is_err());
        assert!(Timing::cron("0 0 * *", "UTC").validate().is_err());
        assert!(
            Timing::cron("0 0 30 2 *", "UTC")
                .next_after(0)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn cron_fire_times_are_whole_seconds() {
        let t = Timing::cron("* * * * * *", "UTC");
        assert_eq!(t.last_at_or_before(5 * S - 1).unwrap(), Some(4 * S));
        assert_eq!(t.last_at_or_before(5 * S).unwrap(), Some(5 * S));
        assert_eq!(t.next_after(4 * S + 500_000).unwrap(), Some(5 * S));
        assert_eq!(t.next_after(5 * S).unwrap(), Some(6 * S));
        let c = ScheduleConfig::new(t, ScheduleTarget::Queue("q".into())).catch_up(CatchUp::All);
        assert_eq!(
            plan(&c, 2 * S, 4 * S + 10).unwrap().fires,
            vec![2 * S, 3 * S, 4 * S]
        );
    }

    #[test]
    fn intervals_are_whole_milliseconds_of_at_least_a_second() {
        assert!(Timing::Every(Duration::from_secs(1)).validate().is_ok());
        assert!(
            Timing::Every(Duration::from_millis(999))
                .validate()
                .is_err()
        );
        assert!(
            Timing::Every(Duration::from_micros(1_000_001))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn stored_form_round_trips() {
        let c = every(5, CatchUp::All)
            .body("b")
            .header("h", "v")
            .key("k")
            .priority(3);
        let back = ScheduleConfig::from_stored(&c.to_json().unwrap(), b"b".to_vec()).unwrap();
        assert_eq!(back, c);
        let cron = ScheduleConfig::new(
            Timing::cron("0 * * * *", "Asia/Tokyo"),
            ScheduleTarget::Topic("t".into()),
        );
        let back = ScheduleConfig::from_stored(&cron.to_json().unwrap(), vec![]).unwrap();
        assert_eq!(back, cron);
    }
}
