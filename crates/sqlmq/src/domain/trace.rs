//! A record's story: its state and settled deliveries in every group ([`Trace`]), and records
//! waiting on a group's retry ladder ([`PendingRetry`]).

use serde::Serialize;

use super::group_config::GroupMode;
use super::id::MessageId;
use super::message::time_from_micros;
use super::record::StreamRecord;

/// One settlement, as recorded in `group_history.events` (one JSON object per line).
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// if let Some(trace) = t.trace(id).await? {
///     for g in &trace.groups {
///         for e in &g.events { println!("{} attempt {} by {:?}: {}", g.group, e.attempt, e.member, e.outcome) }
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct DeliveryEvent {
    /// Which attempt this delivery was.
    pub attempt: u32,
    /// The member (process owner id) that held it.
    pub member: Option<String>,
    /// When it was handed out (database clock, RFC 3339).
    #[serde(deserialize_with = "super::json_time::normalized")]
    pub delivered_at: String,
    /// When it was settled (database clock, RFC 3339).
    #[serde(deserialize_with = "super::json_time::normalized")]
    pub at: String,
    /// `acked`, `failed`, `snoozed`, `dead`, `expired` (lease ended) or `released` (member
    /// left or died).
    pub outcome: String,
    /// The error given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Settled deliveries kept per record in a group's history (`group_history.events`, the last
/// ones), as a literal for statement texts built with `concat!` (MySQL trims the events in
/// SQL); Rust code reads [`GROUP_EVENTS_KEPT`].
macro_rules! group_events_kept {
    () => {
        20
    };
}
#[cfg(feature = "mysql")]
pub(crate) use group_events_kept;

/// Settled deliveries kept per record in a group's history (`group_history.events`, the last
/// ones): what `trace` shows and what a group's dead letter lists errors from.
pub(crate) const GROUP_EVENTS_KEPT: usize = group_events_kept!();

/// Parse an events column.
pub(crate) fn parse_events(text: &[u8]) -> Vec<DeliveryEvent> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Microseconds since the epoch as RFC 3339 (UTC, microseconds).
pub(crate) fn rfc3339(us: i64) -> String {
    humantime::format_rfc3339_micros(time_from_micros(us)).to_string()
}

/// Where a record stands in one group.
///
/// ```no_run
/// # fn f(g: sqlmq::inspect::GroupTrace) {
/// match &g.state {
///     sqlmq::inspect::TraceState::InFlight { member, .. } => println!("being handled by {member:?}"),
///     other => println!("{other:?}"),
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
#[non_exhaustive]
pub enum TraceState {
    /// The group has not reached it yet.
    NotDelivered,
    /// A member holds it now.
    InFlight {
        /// The member (process owner id).
        member: Option<String>,
        /// When it was handed out (RFC 3339).
        since: String,
        /// When the lease ends unless extended (RFC 3339).
        lease_until: String,
    },
    /// It failed (or was snoozed or released) and waits for its next attempt.
    WaitingRetry {
        /// When it is due (RFC 3339).
        at: String,
    },
    /// Acked.
    Acked {
        /// When (RFC 3339).
        at: String,
    },
    /// Dead-lettered.
    Dead {
        /// When (RFC 3339).
        at: String,
    },
    /// Handed out before its history was kept (or its history was removed): consumed.
    Consumed,
    /// A broadcast group: see `read_by`.
    Broadcast,
}

/// A record's story in one group.
///
/// ```no_run
/// # fn f(g: sqlmq::inspect::GroupTrace) { println!("{}: {} attempts, {} events", g.group, g.attempts, g.events.len()); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GroupTrace {
    /// The group.
    pub group: String,
    /// Its mode.
    pub mode: GroupMode,
    /// Where the record stands.
    pub state: TraceState,
    /// Attempts made (cluster mode).
    pub attempts: u32,
    /// Its settled deliveries, oldest first (the last 20): member, times, outcome, error.
    pub events: Vec<DeliveryEvent>,
    /// Broadcast mode: members whose checkpoint is past the record.
    pub read_by: Vec<String>,
    /// Broadcast mode: members for which it became a dead letter (their handler kept
    /// failing on it; they moved on).
    pub dead_for: Vec<String>,
}

/// One record's trace: the record, and its state in every group of its topic.
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// if let Some(trace) = t.trace(id).await? {
///     println!("offset {:?}", trace.offset);
///     for g in &trace.groups { println!("{}: {:?}", g.group, g.state) }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Trace {
    /// The record's id.
    pub id: MessageId,
    /// Its partition.
    pub partition: u32,
    /// Its offset; None while it waits for one (published, not sequenced yet).
    pub offset: Option<i64>,
    /// The record, once sequenced.
    pub record: Option<StreamRecord>,
    /// Its state per group.
    pub groups: Vec<GroupTrace>,
}

/// A record waiting for its next attempt in a cluster group.
///
/// ```no_run
/// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
/// for r in g.retries(100).await? { println!("{} attempt {} due {:?}", r.id, r.attempts + 1, r.run_at) }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct PendingRetry {
    /// The record's id.
    pub id: MessageId,
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: i64,
    /// Attempts made so far.
    pub attempts: u32,
    /// When it is due (database clock).
    #[serde(serialize_with = "super::json_time::time")]
    pub run_at: std::time::SystemTime,
}
