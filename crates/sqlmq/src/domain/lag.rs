//! How far behind consumers are, and how busy topics are: [`GroupLag`], [`TopicStats`],
//! [`PartitionInfo`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::group_config::GroupMode;

/// One partition of a topic: its retained offsets and bytes.
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
/// for p in t.partitions().await? {
///     println!("partition {}: offsets {}..{} ({} bytes)", p.partition, p.start, p.end, p.bytes);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PartitionInfo {
    /// The partition.
    pub partition: u32,
    /// The first offset still retained.
    pub start: i64,
    /// The end: the offset the next record will get (records so far, retention aside).
    pub end: i64,
    /// Bytes of bodies retained.
    pub bytes: i64,
}

/// A group's lag in one partition.
///
/// ```no_run
/// # fn f(p: sqlmq::topic::PartitionLag) { println!("partition {}: {} behind", p.partition, p.backlog); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PartitionLag {
    /// The partition.
    pub partition: u32,
    /// Its end: the offset the next record will get.
    pub end: i64,
    /// The group's position: the next offset to hand out (cluster), or the slowest member's
    /// checkpoint (broadcast; the group's start when no member checkpointed).
    pub position: i64,
    /// Records not handed out yet (`end - position`).
    pub backlog: u64,
    /// Records held by members now (cluster).
    pub in_flight: u64,
    /// Records waiting for their next attempt (cluster).
    pub retrying: u64,
    /// Dead letters (cluster).
    pub dead: u64,
    /// Age of the oldest record not consumed yet (backlog, in flight or retrying).
    #[serde(rename = "oldest_unconsumed_age_ms", with = "super::millis::option")]
    pub oldest_unconsumed_age: Option<Duration>,
}

/// A broadcast member's checkpoint, and how far behind it is.
///
/// ```no_run
/// # fn f(m: sqlmq::topic::MemberLag) { println!("{} is {} behind", m.member, m.behind); }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MemberLag {
    /// The member's name.
    pub member: String,
    /// Records after its checkpoint, over all partitions.
    pub behind: u64,
    /// Its last checkpoint (database clock): when it was last seen. Worker members refresh
    /// it at least every 30 s while idle.
    #[serde(serialize_with = "super::json_time::time")]
    pub checkpointed_at: SystemTime,
    /// Records after its checkpoint, per partition (partitions it has no checkpoint for are
    /// counted from the group's start).
    pub behind_by_partition: BTreeMap<u32, u64>,
    /// Silent for longer than the report's member silence: left out of the group's backlog
    /// and age (its checkpoint is kept for its return).
    pub silent: bool,
}

/// A group's lag: what it has not consumed yet, and how old the oldest of that is.
///
/// ```no_run
/// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
/// let lag = g.lag().await?;
/// println!("{} unconsumed, oldest {:?}", lag.unconsumed, lag.oldest_unconsumed_age);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct GroupLag {
    /// The topic.
    pub topic: String,
    /// The group.
    pub group: String,
    /// Its mode.
    pub mode: GroupMode,
    /// Records not consumed yet: backlog + in flight + retrying (+ published records still
    /// waiting for their offsets).
    pub unconsumed: u64,
    /// Records not handed out yet.
    pub backlog: u64,
    /// Records held by members now.
    pub in_flight: u64,
    /// Records waiting for their next attempt.
    pub retrying: u64,
    /// Dead letters (not counted as unconsumed).
    pub dead: u64,
    /// Published records whose offsets are not assigned yet.
    pub unsequenced: u64,
    /// Age of the oldest unconsumed record (by its publish time).
    #[serde(rename = "oldest_unconsumed_age_ms", with = "super::millis::option")]
    pub oldest_unconsumed_age: Option<Duration>,
    /// Per partition.
    pub partitions: Vec<PartitionLag>,
    /// Broadcast members with a checkpoint.
    pub members: Vec<MemberLag>,
}

/// A topic's size and recent volume, for ranking topics by activity.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// for t in client.topic_stats(std::time::Duration::from_secs(60)).await? {
///     println!("{}: {:.1} records/s, {} retained", t.name, t.rate_per_s, t.records);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TopicStats {
    /// The topic.
    pub name: String,
    /// Its partitions.
    pub partitions: u32,
    /// Records retained.
    pub records: u64,
    /// Bytes of bodies retained.
    pub bytes: u64,
    /// Records ever sequenced (the sum of the partitions' ends).
    pub total: u64,
    /// Records sequenced within the window.
    pub recent: u64,
    /// `recent` per second of the window.
    pub rate_per_s: f64,
    /// Its consumer groups.
    pub groups: usize,
}
