//! What crosses the seam besides domain types: rows as a backend reads them, and the
//! parameters of its writes. Plain data; no behaviour.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::{
    DeliveryEvent, GroupConfig, Message, MessageId, QueueConfig, Receipt, TopicConfig,
};

/// A message's place in the hot tables: what moves between `ready`, `scheduled`, `leases`,
/// `dead` and `blocked`.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub id: MessageId,
    pub priority: i16,
    /// Attempts already made.
    pub attempts: i32,
    /// The last fencing token handed out (0: never claimed).
    pub token: i64,
}

/// A keyed message to put in line behind its key.
pub struct Keyed {
    pub key: String,
    pub entry: Entry,
    /// Delay still to wait once it becomes the head, in microseconds.
    pub delay_us: i64,
}

/// A tracked message just inserted (`store/body/flows.rs`): where it goes once nothing holds
/// it, its batch and step, and what it depends on.
pub struct FlowItem {
    pub id: MessageId,
    pub priority: i16,
    /// Its own delay, counted from its release, in microseconds.
    pub delay_us: i64,
    /// The key of the line it waits in once released (ordering or marked concurrency key).
    pub line_key: Option<String>,
    pub batch: Option<crate::domain::BatchId>,
    pub step: Option<String>,
    pub role: crate::domain::Role,
    pub depends_on: Vec<MessageId>,
}

/// A batch's callback to a topic, kept until the batch finishes: the record's id, the
/// callback's role, the topic and partition (chosen at creation), key, headers (JSON) and
/// body.
pub struct ParkedRecord {
    pub id: MessageId,
    pub role: crate::domain::Role,
    pub topic_id: i32,
    pub partition: i32,
    pub key: Option<String>,
    pub headers: Option<String>,
    pub body: Vec<u8>,
}

/// A dependency of a message: its id, step name and result (if its ack left one).
pub type DependencyRow = (MessageId, Option<String>, Option<Vec<u8>>);

/// A message row to insert: the message, and its headers as a JSON object (`None` when it
/// has none).
pub type MessageRow<'m> = (&'m Message, Option<&'m str>);

/// A queue as stored.
#[derive(Clone, Debug)]
pub struct QueueRow {
    pub id: i32,
    pub name: String,
    pub paused: bool,
    pub config: QueueConfig,
}

/// Counts of one queue's messages by state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub ready: u64,
    pub scheduled: u64,
    pub blocked: u64,
    pub waiting: u64,
    pub in_flight: u64,
    pub dead: u64,
}

/// Which messages a purge batch removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PurgeScope {
    /// Everything but dead letters.
    Live,
    /// Only dead letters.
    Dead,
}

/// A batch of messages to enqueue, in the caller's transaction.
pub struct SendBatch<'a> {
    pub queue_id: i32,
    /// How long idempotency keys are remembered (zero when no message has one).
    pub dedup_window: Duration,
    pub messages: &'a [Message],
    /// Largest statement in bytes (under the server's packet limit).
    pub budget: usize,
}

/// A claim of ready messages.
pub struct ClaimRequest<'a> {
    pub queue_id: i32,
    pub n: usize,
    pub lease: Duration,
    /// The claiming process (owner id), recorded on each lease.
    pub owner: &'a str,
}

/// What the wakeup probe saw for one queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueSignal {
    pub queue_id: i32,
    /// The queue's name now: a handle whose name differs holds an id that went to another
    /// queue (the database was re-created or restored).
    pub name: String,
    /// Claimable messages (and the queue is not paused).
    pub ready: bool,
    /// Delayed messages whose time has come (promotion needed).
    pub due: bool,
    /// Leases that ended (release needed).
    pub expired: bool,
}

impl QueueSignal {
    /// Whether the queue's maintenance has work: due messages to promote or ended leases to
    /// release — messages that become claimable (or dead letters) once it runs.
    pub fn needs_maintenance(&self) -> bool {
        self.due || self.expired
    }
}

/// What the wakeup probe saw for one cluster group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSignal {
    pub group_id: i32,
    /// The group's topic and name now (see [`QueueSignal::name`]).
    pub topic: String,
    pub group: String,
    /// Records to hand out now.
    pub ready: bool,
    /// Expired leases (release needed).
    pub expired: bool,
    /// Records waiting for offsets (sequencing needed).
    pub pending: bool,
}

/// A topic as stored.
#[derive(Clone, Debug)]
pub struct TopicRow {
    pub id: i32,
    pub name: String,
    pub config: TopicConfig,
}

/// One partition's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionRow {
    pub partition: i32,
    /// The offset the next sequenced record gets (the partition's end).
    pub next_offset: i64,
    /// The first offset retention kept.
    pub low_offset: i64,
    /// Bytes of bodies retained.
    pub bytes: i64,
}

/// A record to publish, ready for its row.
pub struct PendingRow<'a> {
    pub partition: i32,
    pub id: MessageId,
    pub key: Option<&'a [u8]>,
    /// Headers as a JSON object (`None` when there are none).
    pub headers: Option<String>,
    pub body: &'a [u8],
}

impl PendingRow<'_> {
    /// Bytes the record adds to a statement (body, key, headers, and the rest of its row).
    pub fn bytes(&self) -> usize {
        64 + self.body.len()
            + self.key.map_or(0, <[u8]>::len)
            + self.headers.as_ref().map_or(0, String::len)
    }
}

/// Records to publish in the caller's transaction, as many as one statement's byte budget
/// allows (the engine splits a larger batch).
pub struct PendingBatch<'a> {
    pub topic_id: i32,
    pub rows: &'a [PendingRow<'a>],
}

/// A consumer group as stored.
#[derive(Clone, Debug)]
pub struct GroupRow {
    pub id: i32,
    pub topic_id: i32,
    pub name: String,
    pub config: GroupConfig,
}

/// A cluster group's cursor locked by a claim.
#[derive(Clone, Copy, Debug)]
pub struct Cursor {
    pub partition: i32,
    /// The next offset to hand out.
    pub next: i64,
    /// The furthest the cursor ever was (below it, offsets may have been handed out before).
    pub high: i64,
    /// The partition's end.
    pub end: i64,
    /// The partition's first retained offset.
    pub low: i64,
    /// The database clock, in microseconds.
    pub now_us: i64,
}

/// Where a claim looks for cursors with work: partitions `[from, to)`, at most `limit` of them.
#[derive(Clone, Copy, Debug)]
pub struct CursorScan {
    pub group_id: i32,
    pub topic_id: i32,
    pub from: i32,
    pub to: i32,
    pub limit: i64,
}

/// A retry taken for delivery (its row already deleted).
#[derive(Clone, Copy, Debug)]
pub struct DueRetry {
    pub id: MessageId,
    pub partition: i32,
    pub offset: i64,
    /// Attempts made so far.
    pub attempts: i32,
    /// The token of its previous lease.
    pub token: i64,
    /// The database clock, in microseconds.
    pub now_us: i64,
}

/// A record as read from the log for delivery.
pub struct LoggedRow {
    pub partition: i32,
    pub offset: i64,
    pub id: MessageId,
    pub key: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub published_us: i64,
    /// The token of its previous lease in the group being claimed for (0: none).
    pub token: i64,
}

/// Leases to write for the records a claim hands out.
pub struct NewGroupLeases<'a> {
    pub group_id: i32,
    pub deliveries: &'a [crate::domain::Delivery],
    pub claimed_us: i64,
    pub until_us: i64,
    pub owner: &'a str,
}

/// One of a cluster group's per-record tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupTable {
    /// Records in flight.
    Leases,
    /// Records waiting for their next attempt.
    Retries,
    /// Dead letters.
    Dead,
}

/// Count and smallest offset per partition of one of a group's tables.
pub type PartitionCounts = std::collections::HashMap<i32, (i64, i64)>;

/// Where a record stands in a cluster group, from its history row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryState {
    Retrying,
    Acked,
    Dead,
    /// A state this build does not know (written by a newer one).
    Other,
}

/// A record's rows in one cluster group (what `trace` reads).
#[derive(Debug, Default)]
pub struct RecordRows {
    /// In flight: token, attempts, owner, claimed (µs), lease end (µs).
    pub lease: Option<(i64, i32, Option<String>, i64, i64)>,
    /// Waiting to retry: attempts, due (µs).
    pub retry: Option<(i32, i64)>,
    /// Dead: attempts, died (µs).
    pub dead: Option<(i32, i64)>,
    /// Settled before: state, attempts, events, settled (µs).
    pub history: Option<(HistoryState, i32, Vec<DeliveryEvent>, i64)>,
}

/// A record held by a member for longer than its group's consume timeout.
#[derive(Clone, Debug)]
pub struct HeldTooLong {
    pub receipt: Receipt,
    pub partition: i32,
    pub offset: i64,
    pub owner: Option<String>,
    pub held: Duration,
}

/// Offsets `[from, to)` of one partition to remove (retention), with the groups whose history
/// of them goes too.
pub struct RangeRemoval<'a> {
    pub topic_id: i32,
    pub partition: i32,
    pub from: i64,
    pub to: i64,
    pub group_ids: &'a [i32],
}

/// A group's cursor in one partition, with the group's mode (retention floors).
#[derive(Clone, Copy, Debug)]
pub struct TopicCursor {
    pub group_id: i32,
    // Read by the store's own suite (the retention floors are the engine's, from `group_id`).
    #[cfg_attr(not(test), allow(dead_code))]
    pub broadcast: bool,
    pub partition: i32,
    pub next_offset: i64,
}

/// A broadcast member's checkpointed position.
#[derive(Clone, Debug)]
pub struct PositionRow {
    pub member: String,
    pub partition: i32,
    pub next_offset: i64,
    pub updated_us: i64,
}

/// A broadcast member's dead letter being recorded.
pub struct MemberDeadRow<'a> {
    pub group_id: i32,
    pub member: &'a str,
    pub id: MessageId,
    pub partition: i32,
    pub offset: i64,
    pub attempts: i32,
    /// The error history (`encode_errors`).
    pub errors: &'a [u8],
}

/// A record dead for one broadcast member (what a trace shows).
#[derive(Clone, Debug)]
pub struct MemberDeath {
    pub member: String,
    // Read by the store's own suite: a trace shows who a record died for.
    #[cfg_attr(not(test), allow(dead_code))]
    pub attempts: i32,
    #[cfg_attr(not(test), allow(dead_code))]
    pub died_us: i64,
}

/// A worker process registering.
pub struct ProcessRegistration<'a> {
    /// Owner id: `host:pid:random`.
    pub id: &'a str,
    pub kind: &'a str,
    pub host: &'a str,
    pub pid: i32,
    /// Ids of the queues it consumes.
    pub queue_ids: &'a [i32],
    /// It is dead when silent for this long.
    pub silence: Duration,
}

/// A process found silent for too long.
pub struct DeadProcess {
    pub id: String,
    pub queue_ids: Vec<i32>,
}

/// One schema version: the statements that take the schema there from the version before.
pub struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub statements: &'static [&'static str],
    /// How `migrate --to` takes the schema back to the version before; `None` when it cannot
    /// (the engine says so before it applies the migration).
    pub reverse: Option<Reverse>,
}

/// The reverse of a migration that created tables and stored procedures and added columns:
/// drop them again.
pub struct Reverse {
    /// The tables the migration created (without the prefix), dropped in this order.
    pub drops: &'static [&'static str],
    /// Of `drops`, the tables whose rows are no one's data (a fixed row, heartbeats of
    /// processes, which are refused while live anyway); every other must be empty, or the
    /// reverse is refused rather than lose its rows.
    pub disposable: &'static [&'static str],
    /// The stored procedures the migration created (without the prefix): code, no rows.
    pub procedures: &'static [&'static str],
    /// The columns the migration added to earlier tables (table without the prefix, column):
    /// dropped, and the reverse refused while one holds a value.
    pub columns: &'static [(&'static str, &'static str)],
    /// The statements dropping the indexes the migration added to earlier tables (with
    /// `{p}`), run first: SQLite drops no column an index still names.
    pub indexes: &'static [&'static str],
}

/// A backend's pools: where sqlmq's transactions (every write) run, and where its plain reads
/// run. A server database uses one pool for both; SQLite, which admits one writer at a time,
/// gives each process one writer connection, with readers beside it.
pub struct Pools<B: sqlx::Database> {
    pub write: sqlx::Pool<B>,
    pub read: sqlx::Pool<B>,
}

/// How to open a backend's pool.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    pub max_connections: u32,
    /// Time allowed to open a connection, and to wait for a pooled one.
    pub connect_timeout: Duration,
    /// How long a statement may wait for a row lock before failing (retried).
    pub lock_wait_timeout: Duration,
}

/// A recurring schedule as stored (times in µs since the epoch, database clock).
#[derive(Clone, Debug)]
pub struct ScheduleRow {
    pub name: String,
    /// The configuration but the body, as JSON (`ScheduleConfig::to_json`).
    pub spec: String,
    pub body: Vec<u8>,
    pub paused: bool,
    /// `domain::NEVER` when the timing has no future fire time.
    pub next_fire: i64,
    pub last_fired: Option<i64>,
    pub fired: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A schedule's configuration to store, with its next fire time and the database clock.
#[derive(Clone, Copy, Debug)]
pub struct ScheduleWrite<'a> {
    pub name: &'a str,
    pub spec: &'a str,
    pub body: &'a [u8],
    pub next_fire: i64,
    pub now: i64,
}

/// One firing of a schedule, applied only if its next fire time is still `expected` and it
/// is not paused.
#[derive(Clone, Copy, Debug)]
pub struct ScheduleAdvance<'a> {
    pub name: &'a str,
    pub expected: i64,
    pub next: i64,
    /// The latest fire time fired (`None` when a pass fired nothing, all missed).
    pub last_fired: Option<i64>,
    pub fired: i64,
}

/// A queue's limits as its `queue_limits` row holds them (each `None` for none).
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueLimits {
    pub max_in_flight: Option<u32>,
    pub rate: Option<crate::domain::RateLimit>,
    pub concurrency: Option<u32>,
    pub rate_per_key: Option<crate::domain::RateLimit>,
}

/// What a limited queue's gate reads, under the lock of its limits row.
#[derive(Clone, Copy, Debug)]
pub struct GateRead {
    pub limits: QueueLimits,
    /// The queue's leases (ended or not).
    pub in_flight: u64,
    /// The database clock (µs).
    pub now_us: i64,
    /// The queue's deliveries in the rate window before `now_us` (0 without a rate).
    pub delivered: u64,
    /// When the oldest of them was (µs).
    pub oldest_us: Option<i64>,
}
