//! Batches and workflows: what a batch is made of ([`Batch`]), what it reports
//! ([`BatchStatus`], [`BatchStep`]), and the part a tracked message carries ([`FlowPart`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::{Error, Result};
use super::id::MessageId;
use super::message::Message;
use super::name::{MAX_NAME_LEN, validate_key};
use super::record::Record;

/// How long the flow tables keep a finished batch, an ended message's record and a result.
///
/// ```
/// assert_eq!(sqlmq::flow::FLOW_RETENTION.as_secs(), 7 * 24 * 3600);
/// ```
pub const FLOW_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Most bytes of a result an ack may carry ([`Queue::ack_with_result`](crate::Queue)).
///
/// ```
/// assert_eq!(sqlmq::flow::MAX_RESULT_BYTES, 65_536);
/// ```
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// The header every batch callback carries: its batch's id, to look the batch up with
/// [`Client::batch`](crate::Client::batch) (its final counts).
///
/// ```
/// # fn f(d: sqlmq::Delivery) {
/// if let Some(batch) = d.headers.get(sqlmq::flow::BATCH_HEADER) { println!("callback of {batch}") }
/// # }
/// ```
pub const BATCH_HEADER: &str = "sqlmq-batch";

/// The identifier of a batch (and of a workflow, which is a batch whose members name their
/// steps): a UUIDv7 made by the client.
///
/// ```
/// let id = sqlmq::flow::BatchId::new();
/// assert_eq!(id, id.to_string().parse().unwrap());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BatchId(Uuid);

impl BatchId {
    /// A fresh, time-ordered id.
    ///
    /// ```
    /// assert_ne!(sqlmq::flow::BatchId::new(), sqlmq::flow::BatchId::new());
    /// ```
    pub fn new() -> BatchId {
        BatchId(Uuid::now_v7())
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    pub(crate) fn from_slice(bytes: &[u8]) -> Result<BatchId> {
        Uuid::from_slice(bytes)
            .map(BatchId)
            .map_err(|e| Error::Corrupt(format!("batch id of {} bytes: {e}", bytes.len())))
    }
}

impl Default for BatchId {
    fn default() -> Self {
        BatchId::new()
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BatchId({})", self.0)
    }
}

impl FromStr for BatchId {
    type Err = Error;
    fn from_str(s: &str) -> Result<BatchId> {
        Uuid::parse_str(s)
            .map(BatchId)
            .map_err(|e| Error::InvalidArgument(format!("invalid batch id {s:?}: {e}")))
    }
}

/// What a tracked message is to its batch.
///
/// ```
/// # fn f(s: sqlmq::flow::BatchStatus) {
/// let members = s.steps.iter().filter(|x| x.role == sqlmq::flow::Role::Member).count();
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A member: counted in the batch's progress.
    Member,
    /// Sent when every member was acked.
    OnSuccess,
    /// Sent when every member has finished, whatever became of them.
    OnComplete,
    /// Sent when every member has finished and at least one was not acked (dead or
    /// cancelled).
    OnFailure,
}

impl Role {
    pub(crate) fn code(self) -> i16 {
        match self {
            Role::Member => 0,
            Role::OnSuccess => 1,
            Role::OnComplete => 2,
            Role::OnFailure => 3,
        }
    }

    /// Whether a callback of this role is sent when its batch finishes, `failed` or not (a
    /// member is no callback).
    pub(crate) fn fires(self, failed: bool) -> bool {
        match self {
            Role::OnSuccess => !failed,
            Role::OnFailure => failed,
            Role::OnComplete => true,
            Role::Member => false,
        }
    }

    pub(crate) fn from_code(code: i16) -> Role {
        match code {
            1 => Role::OnSuccess,
            2 => Role::OnComplete,
            3 => Role::OnFailure,
            _ => Role::Member,
        }
    }
}

/// The part a tracked message carries: its batch, step name and role. A message with one
/// (or with dependencies) has its end — ack, dead letter, cancel — recorded in the flow
/// tables, in the transaction of that end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FlowPart {
    pub batch: Option<BatchId>,
    pub step: Option<String>,
    pub role: Role,
}

/// Where a message of a batch goes: a queue, by name.
#[derive(Clone, Debug)]
pub(crate) struct Placed {
    pub queue: String,
    pub message: Message,
}

/// A batch to create: members sent together (to one or several queues) in one transaction,
/// optional callbacks, and — for a workflow — step names and dependencies between members.
///
/// Every callback is a message sent exactly once, in the transaction of the ack (or
/// dead-lettering, or cancel) that finishes the batch: `on_success` when every member was
/// acked, `on_failure` when every member has finished and at least one was not acked,
/// `on_complete` when every member has finished, either way. Callbacks carry the header
/// [`BATCH_HEADER`] with the batch's id. A batch is sealed when created unless [`Batch::open`]
/// keeps it open for [`Client::add_to_batch`](crate::Client::add_to_batch) (a member fanning
/// out more work into its own batch); it finishes once sealed with no member pending.
///
/// ```
/// use sqlmq::Message;
/// use sqlmq::flow::Batch;
/// let batch = Batch::new()
///     .add("thumbnails", Message::new("photo-1.jpg"))
///     .add("thumbnails", Message::new("photo-2.jpg"))
///     .on_success("emails", Message::new("your album is ready"));
/// # let _ = batch;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub(crate) id: BatchId,
    pub(crate) members: Vec<(Placed, Vec<String>)>,
    pub(crate) callbacks: Vec<(Role, Placed)>,
    /// Callbacks that publish a record: the topic's name and the record.
    pub(crate) records: Vec<(Role, String, Record)>,
    pub(crate) open: bool,
}

impl Batch {
    /// An empty batch, sealed when created.
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new();
    /// println!("batch {}", b.id());
    /// ```
    pub fn new() -> Batch {
        Batch::default()
    }

    /// The id the batch will have.
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new();
    /// assert_eq!(b.id(), b.id());
    /// ```
    pub fn id(&self) -> BatchId {
        self.id
    }

    /// Add a member: `message` to the queue named `queue`.
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().add("thumbnails", sqlmq::Message::new("a.jpg"));
    /// # let _ = b;
    /// ```
    pub fn add(mut self, queue: impl Into<String>, message: Message) -> Batch {
        self.members.push((
            Placed {
                queue: queue.into(),
                message,
            },
            Vec::new(),
        ));
        self
    }

    /// Add a named step of a workflow: `message` to `queue`, delivered only after every step
    /// named in `after` (members of this batch) was acked. Names are unique within the batch
    /// (1 to 128 bytes); a cycle is refused when the batch is created. A step's handler reads
    /// its dependencies' results with
    /// [`Client::dependency_results`](crate::Client::dependency_results).
    ///
    /// ```
    /// use sqlmq::Message;
    /// use sqlmq::flow::Batch;
    /// let diamond = Batch::new()
    ///     .step("a", "jobs", Message::new("fetch"), &[])
    ///     .step("b", "jobs", Message::new("left"), &["a"])
    ///     .step("c", "jobs", Message::new("right"), &["a"])
    ///     .step("d", "jobs", Message::new("join"), &["b", "c"]);
    /// # let _ = diamond;
    /// ```
    pub fn step(
        mut self,
        name: impl Into<String>,
        queue: impl Into<String>,
        message: Message,
        after: &[&str],
    ) -> Batch {
        let mut message = message;
        message.flow = Some(FlowPart {
            batch: None,
            step: Some(name.into()),
            role: Role::Member,
        });
        self.members.push((
            Placed {
                queue: queue.into(),
                message,
            },
            after.iter().map(|s| (*s).to_owned()).collect(),
        ));
        self
    }

    /// Send `message` to `queue` when every member was acked.
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().on_success("emails", sqlmq::Message::new("done"));
    /// # let _ = b;
    /// ```
    pub fn on_success(self, queue: impl Into<String>, message: Message) -> Batch {
        self.callback(Role::OnSuccess, queue.into(), message)
    }

    /// Send `message` to `queue` when every member has finished and at least one was not
    /// acked (it became a dead letter or was cancelled).
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().on_failure("alerts", sqlmq::Message::new("some failed"));
    /// # let _ = b;
    /// ```
    pub fn on_failure(self, queue: impl Into<String>, message: Message) -> Batch {
        self.callback(Role::OnFailure, queue.into(), message)
    }

    /// Send `message` to `queue` when every member has finished, acked or not; its handler
    /// reads the counts with [`Client::batch`](crate::Client::batch) (the id is in the
    /// [`BATCH_HEADER`] header).
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().on_complete("audit", sqlmq::Message::new("finished"));
    /// # let _ = b;
    /// ```
    pub fn on_complete(self, queue: impl Into<String>, message: Message) -> Batch {
        self.callback(Role::OnComplete, queue.into(), message)
    }

    /// Keep the batch open after it is created: more members may be added until
    /// [`Client::seal_batch`](crate::Client::seal_batch); it cannot finish before.
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().open();
    /// # let _ = b;
    /// ```
    pub fn open(mut self) -> Batch {
        self.open = true;
        self
    }

    /// Publish `record` to `topic` when every member was acked (as
    /// [`Batch::on_success`], to a topic).
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().on_success_publish("albums", sqlmq::Record::new("ready"));
    /// # let _ = b;
    /// ```
    pub fn on_success_publish(self, topic: impl Into<String>, record: Record) -> Batch {
        self.record_callback(Role::OnSuccess, topic.into(), record)
    }

    /// Publish `record` to `topic` when every member has finished and one or more was not
    /// acked (as [`Batch::on_failure`], to a topic).
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().on_failure_publish("alerts", sqlmq::Record::new("failed"));
    /// # let _ = b;
    /// ```
    pub fn on_failure_publish(self, topic: impl Into<String>, record: Record) -> Batch {
        self.record_callback(Role::OnFailure, topic.into(), record)
    }

    /// Publish `record` to `topic` when every member has finished (as
    /// [`Batch::on_complete`], to a topic).
    ///
    /// ```
    /// let b = sqlmq::flow::Batch::new().on_complete_publish("audit", sqlmq::Record::new("done"));
    /// # let _ = b;
    /// ```
    pub fn on_complete_publish(self, topic: impl Into<String>, record: Record) -> Batch {
        self.record_callback(Role::OnComplete, topic.into(), record)
    }

    /// One callback per role: a new one replaces the role's earlier one, queue or topic.
    fn callback(mut self, role: Role, queue: String, message: Message) -> Batch {
        self.drop_callback(role);
        self.callbacks.push((role, Placed { queue, message }));
        self
    }

    fn record_callback(mut self, role: Role, topic: String, record: Record) -> Batch {
        self.drop_callback(role);
        self.records.push((role, topic, record));
        self
    }

    fn drop_callback(&mut self, role: Role) {
        self.callbacks.retain(|(r, _)| *r != role);
        self.records.retain(|(r, _, _)| *r != role);
    }

    /// Check names and dependencies, tag every message with the batch; returns the members'
    /// dependencies resolved to ids, in member order, and the members' indices in an order
    /// where each comes after its dependencies.
    pub(crate) fn prepare(&mut self) -> Result<(Vec<Vec<MessageId>>, Vec<usize>)> {
        // A repeated id or idempotency key would be sent once and counted once: refused, so
        // that what creating the batch returns is what it holds.
        let mut ids = HashSet::new();
        let mut keys = HashSet::new();
        let all = self
            .members
            .iter()
            .map(|(p, _)| p)
            .chain(self.callbacks.iter().map(|(_, p)| p));
        for p in all {
            if !ids.insert(p.message.id) {
                return Err(Error::InvalidArgument(format!(
                    "message id {} appears twice in the batch",
                    p.message.id
                )));
            }
            if let Some(k) = &p.message.idempotency_key
                && !keys.insert((p.queue.clone(), k.clone()))
            {
                return Err(Error::InvalidArgument(format!(
                    "idempotency key {k:?} appears twice in the batch's messages to {}",
                    p.queue
                )));
            }
        }
        let mut names: HashMap<String, MessageId> = HashMap::new();
        for (p, _) in &self.members {
            if let Some(step) = p.message.flow.as_ref().and_then(|f| f.step.clone()) {
                validate_key("step name", &step)?;
                if names.insert(step.clone(), p.message.id).is_some() {
                    return Err(Error::InvalidArgument(format!(
                        "step {step:?} is named twice in the batch"
                    )));
                }
            }
        }
        let mut deps = Vec::with_capacity(self.members.len());
        for (p, after) in &self.members {
            let mut ids = Vec::new();
            for name in after {
                let id = names.get(name).ok_or_else(|| {
                    Error::InvalidArgument(format!("step {name:?} is not in the batch"))
                })?;
                if !ids.contains(id) {
                    ids.push(*id);
                }
            }
            if ids.contains(&p.message.id) {
                return Err(Error::InvalidArgument(
                    "a step cannot depend on itself".into(),
                ));
            }
            deps.push(ids);
        }
        let order = dependency_order(&self.members, &deps)?;
        let id = self.id;
        for (p, _) in &mut self.members {
            let step = p.message.flow.take().and_then(|f| f.step);
            p.message.flow = Some(FlowPart {
                batch: Some(id),
                step,
                role: Role::Member,
            });
        }
        for (role, p) in &mut self.callbacks {
            p.message.flow = Some(FlowPart {
                batch: Some(id),
                step: None,
                role: *role,
            });
            p.message
                .headers
                .insert(BATCH_HEADER.to_owned(), id.to_string());
        }
        for (_, _, r) in &mut self.records {
            r.headers.insert(BATCH_HEADER.to_owned(), id.to_string());
        }
        Ok((deps, order))
    }
}

/// The members' indices in an order where each comes after its dependencies, otherwise in
/// the order they were added (Kahn's algorithm, the lowest ready index first); a cycle, which
/// leaves members that never reach zero unmet dependencies, is refused.
fn dependency_order(
    members: &[(Placed, Vec<String>)],
    deps: &[Vec<MessageId>],
) -> Result<Vec<usize>> {
    let index: HashMap<MessageId, usize> = members
        .iter()
        .enumerate()
        .map(|(i, (p, _))| (p.message.id, i))
        .collect();
    let mut unmet: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); members.len()];
    for (child, ds) in deps.iter().enumerate() {
        for d in ds {
            children[index[d]].push(child);
        }
    }
    let mut ready: BTreeSet<usize> = (0..members.len()).filter(|&i| unmet[i] == 0).collect();
    let mut order = Vec::with_capacity(members.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &c in &children[i] {
            unmet[c] -= 1;
            if unmet[c] == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() < members.len() {
        let stuck: HashSet<String> = (0..members.len())
            .filter(|&i| unmet[i] > 0)
            .filter_map(|i| {
                members[i]
                    .0
                    .message
                    .flow
                    .as_ref()
                    .and_then(|f| f.step.clone())
            })
            .collect();
        let mut stuck: Vec<String> = stuck.into_iter().collect();
        stuck.sort();
        return Err(Error::InvalidArgument(format!(
            "the steps' dependencies form a cycle (through {})",
            stuck.join(", ")
        )));
    }
    Ok(order)
}

/// Check a stored key can take the flow mark (one byte more).
pub(crate) fn check_trackable_key(m: &Message) -> Result<()> {
    let len = m.ordering_key.as_ref().map_or(0, String::len)
        + m.concurrency_key.as_ref().map_or(0, |k| k.len() + 1);
    if len + 1 > MAX_NAME_LEN {
        return Err(Error::InvalidArgument(format!(
            "a message in a batch or with dependencies has a key of at most {} bytes ({} for a \
             concurrency key)",
            MAX_NAME_LEN - 1,
            MAX_NAME_LEN - 2
        )));
    }
    Ok(())
}

/// Where a batch is in its life.
///
/// ```
/// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> sqlmq::Result<()> {
/// let done = client.batch(id).await?.state == sqlmq::flow::BatchState::Finished;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchState {
    /// Members may still be added.
    Open,
    /// No more members; finishes when none is pending.
    Sealed,
    /// Every member finished; its callbacks were sent.
    Finished,
}

impl BatchState {
    pub(crate) fn from_code(code: i16) -> BatchState {
        match code {
            0 => BatchState::Open,
            1 => BatchState::Sealed,
            _ => BatchState::Finished,
        }
    }
}

/// Where one message of a batch (a member or a callback) is.
///
/// ```
/// # fn f(s: sqlmq::flow::BatchStatus) {
/// let held = s.steps.iter().filter(|x| x.state == sqlmq::flow::StepState::Held).count();
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Waiting for dependencies that are not acked yet (or, for a callback, for the batch).
    Waiting,
    /// Waiting behind a dependency that became a dead letter: it runs once that one is
    /// redriven and acked.
    Held,
    /// Delivered or deliverable: ready, scheduled, in flight, or in its key's line.
    Pending,
    /// Acked.
    Succeeded,
    /// A dead letter.
    Dead,
    /// Cancelled (by hand, with a cancelled or deleted dependency, or a callback whose
    /// condition did not hold).
    Cancelled,
}

impl StepState {
    /// The state of a node: its state code, unmet and dead dependencies, and whether it waits.
    pub(crate) fn of(state: i16, waiting: bool, held: i64) -> StepState {
        match state {
            1 => StepState::Succeeded,
            2 => StepState::Dead,
            3 => StepState::Cancelled,
            _ if held > 0 => StepState::Held,
            _ if waiting => StepState::Waiting,
            _ => StepState::Pending,
        }
    }
}

/// One message of a batch, as [`Client::batch`](crate::Client::batch) reports it.
///
/// ```
/// # fn f(s: sqlmq::flow::BatchStatus) {
/// for step in &s.steps {
///     println!("{:?} in {}: {:?} after {:?}", step.step, step.queue, step.state, step.depends_on);
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchStep {
    /// The message.
    pub id: MessageId,
    /// Its queue.
    pub queue: String,
    /// Its step name, for a workflow's step.
    pub step: Option<String>,
    /// Member or callback.
    pub role: Role,
    /// Where it is.
    pub state: StepState,
    /// The messages it depends on.
    pub depends_on: Vec<MessageId>,
    /// Whether its ack left a result ([`Client::result`](crate::Client::result)).
    pub has_result: bool,
}

/// A batch's progress ([`Client::batch`](crate::Client::batch)).
///
/// ```
/// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> sqlmq::Result<()> {
/// let s = client.batch(id).await?;
/// println!("{} of {} acked, {} dead, {} pending", s.succeeded, s.members, s.dead, s.pending);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchStatus {
    /// The batch.
    pub id: BatchId,
    /// Open, sealed or finished.
    pub state: BatchState,
    /// Members added.
    pub members: u64,
    /// Members not finished yet.
    pub pending: u64,
    /// Members acked.
    pub succeeded: u64,
    /// Members that became dead letters.
    pub dead: u64,
    /// Members cancelled.
    pub cancelled: u64,
    /// When it was created (database clock).
    #[serde(serialize_with = "super::json_time::time")]
    pub created_at: SystemTime,
    /// When its last member finished (database clock).
    #[serde(serialize_with = "super::json_time::option")]
    pub finished_at: Option<SystemTime>,
    /// Its members and callbacks, in the order they were sent.
    pub steps: Vec<BatchStep>,
}

impl BatchStatus {
    /// The members' ids by step name (a workflow's steps).
    ///
    /// ```
    /// # fn f(s: sqlmq::flow::BatchStatus) {
    /// if let Some(id) = s.step_ids().get("d") { println!("d is {id}") }
    /// # }
    /// ```
    pub fn step_ids(&self) -> BTreeMap<String, MessageId> {
        self.steps
            .iter()
            .filter_map(|s| Some((s.step.clone()?, s.id)))
            .collect()
    }
}

/// What [`Client::create_batch`](crate::Client::create_batch) did.
///
/// ```
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let created = client.create_batch(sqlmq::flow::Batch::new().add("jobs", sqlmq::Message::new("x"))).await?;
/// println!("batch {} holds {:?}", created.id, created.members);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BatchCreated {
    /// The batch.
    pub id: BatchId,
    /// The members' ids, in the order they were added.
    pub members: Vec<MessageId>,
    /// The members' ids by step name.
    pub steps: BTreeMap<String, MessageId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_and_unknown_steps_are_refused() {
        let m = || Message::new("x");
        let mut cycle = Batch::new()
            .step("a", "q", m(), &["c"])
            .step("b", "q", m(), &["a"])
            .step("c", "q", m(), &["b"]);
        let e = cycle.prepare().unwrap_err().to_string();
        assert!(e.contains("cycle") && e.contains("a, b, c"), "{e}");
        let mut unknown = Batch::new().step("a", "q", m(), &["zz"]);
        assert!(unknown.prepare().is_err());
        let mut twice = Batch::new()
            .step("a", "q", m(), &[])
            .step("a", "q", m(), &[]);
        assert!(twice.prepare().is_err());
        let mut own = Batch::new().step("a", "q", m(), &["a"]);
        assert!(own.prepare().is_err());
        let mut diamond = Batch::new()
            .step("a", "q", m(), &[])
            .step("b", "q", m(), &["a"])
            .step("c", "q", m(), &["a"])
            .step("d", "q", m(), &["b", "c", "b"]);
        let (deps, order) = diamond.prepare().unwrap();
        assert_eq!(deps.iter().map(Vec::len).collect::<Vec<_>>(), [0, 1, 1, 2]);
        assert_eq!(order, [0, 1, 2, 3]);
        // Listed after their dependants, steps still come first in the order.
        let mut reversed = Batch::new()
            .step("d", "q", m(), &["b", "c"])
            .step("c", "q", m(), &["a"])
            .step("b", "q", m(), &["a"])
            .step("a", "q", m(), &[]);
        assert_eq!(reversed.prepare().unwrap().1, [3, 1, 2, 0]);
    }
}
