//! Durable execution's limits and what an event's emit did.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::error::{Error, Result};
use super::json_time;

/// Largest step result or event payload (JSON), in bytes: 256 KiB.
///
/// ```
/// assert_eq!(sqlmq::flow::MAX_STEP_RESULT, 256 * 1024);
/// ```
pub const MAX_STEP_RESULT: usize = 256 * 1024;

/// Journal row kinds and states as stored (`run_steps.kind`, `run_steps.state`).
pub(crate) const KIND_STEP: i16 = 0;
pub(crate) const KIND_SLEEP: i16 = 1;
pub(crate) const KIND_EVENT: i16 = 2;
pub(crate) const KIND_JOIN: i16 = 3;
pub(crate) const WAITING: i16 = 1;
pub(crate) const DONE: i16 = 2;
pub(crate) const TIMED_OUT: i16 = 3;
pub(crate) const FAILED: i16 = 4;

/// The header a child run's message carries: its parent's message id.
pub const PARENT_HEADER: &str = "sqlmq-parent";

/// How long a parent suspended in [`join`](crate::JobContext::join) sleeps before it looks at
/// its child again, should the child's end not wake it (a child settled outside the worker
/// runtime, or a crash between the child's ack and the wake).
pub(crate) const JOIN_POLL: Duration = Duration::from_secs(60);

/// Longest step name or event name, in bytes.
pub(crate) const MAX_DURABLE_NAME: usize = 255;

/// Longest sleep or event wait: the longest delay a message may have.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// What [`Client::emit_event`](crate::Client::emit_event) did.
///
/// ```
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let emitted = client.emit_event("order-42-shipped", &"DHL 123").await?;
/// if !emitted.kept {
///     println!("an earlier emit of this event stands");
/// }
/// println!("{} waiting runs woken", emitted.woken);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Emitted {
    /// Whether this emit is the one kept: false when the event was emitted already and is
    /// still kept (the first emit wins; this one changed nothing).
    pub kept: bool,
    /// Suspended runs waiting for the event that this emit put back in their queues.
    pub woken: u64,
}

/// What a journal row of a durable run records.
///
/// ```
/// assert_eq!(sqlmq::flow::StepKind::Event.to_string(), "event");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepKind {
    /// [`JobContext::step`](crate::JobContext::step) or `step_in`.
    Step,
    /// [`JobContext::sleep`](crate::JobContext::sleep) or `sleep_until`.
    Sleep,
    /// [`JobContext::wait_for_event`](crate::JobContext::wait_for_event).
    Event,
    /// [`JobContext::join`](crate::JobContext::join): waiting for a child run.
    Join,
}

impl StepKind {
    /// The kind of a stored row.
    pub(crate) fn of_code(code: i16) -> StepKind {
        match code {
            KIND_SLEEP => StepKind::Sleep,
            KIND_EVENT => StepKind::Event,
            KIND_JOIN => StepKind::Join,
            _ => StepKind::Step,
        }
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepKind::Step => "step",
            StepKind::Sleep => "sleep",
            StepKind::Event => "event",
            StepKind::Join => "join",
        })
    }
}

/// Where a journal row of a durable run stands.
///
/// ```
/// assert_eq!(sqlmq::flow::RunStepState::TimedOut.to_string(), "timed_out");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStepState {
    /// A sleep not over, or an event wait with neither its event nor its deadline seen yet.
    Waiting,
    /// Completed: a step's result, a sleep over, an event received.
    Done,
    /// An event wait whose deadline passed before the event came.
    TimedOut,
    /// A join whose child run became a dead letter.
    Failed,
}

impl RunStepState {
    /// The state of a stored row.
    pub(crate) fn of_code(code: i16) -> RunStepState {
        match code {
            WAITING => RunStepState::Waiting,
            TIMED_OUT => RunStepState::TimedOut,
            FAILED => RunStepState::Failed,
            _ => RunStepState::Done,
        }
    }
}

impl std::fmt::Display for RunStepState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStepState::Waiting => "waiting",
            RunStepState::Done => "done",
            RunStepState::TimedOut => "timed_out",
            RunStepState::Failed => "failed",
        })
    }
}

/// One row of a durable run's journal ([`Client::journal`](crate::Client::journal)).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// for step in client.journal(id).await?.steps {
///     println!("{} {} {:?}: {} ({} bytes)", step.seq, step.kind, step.name, step.state, step.result_bytes);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunStep {
    /// Its place in the run (0 for the first call).
    pub seq: u32,
    /// The step's name, the event's name, or `sleep N` for the sleep at place N.
    pub name: String,
    /// What it is.
    pub kind: StepKind,
    /// Where it stands.
    pub state: RunStepState,
    /// When it was recorded (database clock).
    #[serde(serialize_with = "json_time::time")]
    pub recorded_at: SystemTime,
    /// A sleep's end, or an event wait's deadline.
    #[serde(serialize_with = "json_time::option")]
    pub wake_at: Option<SystemTime>,
    /// Size of the recorded result or event payload (JSON), in bytes.
    pub result_bytes: u64,
}

/// A durable run's journal and the events it waits for ([`Client::journal`](crate::Client::journal)).
/// Empty for a message that never made a durable call, or whose run ended (an ack forgets
/// its journal; a dead letter keeps it, so that a redrive resumes after its completed steps).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// let journal = client.journal(id).await?;
/// println!("{} steps; waiting for {:?}", journal.steps.len(), journal.waiting_for);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RunJournal {
    /// Its rows, in order.
    pub steps: Vec<RunStep>,
    /// The events it is suspended waiting for.
    pub waiting_for: Vec<String>,
}

/// An event some suspended runs wait for ([`Client::awaited_events`](crate::Client::awaited_events)).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// for e in client.awaited_events(100).await? {
///     println!("{}: {} runs waiting since {:?}", e.name, e.runs, e.since);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AwaitedEvent {
    /// The event's name.
    pub name: String,
    /// How many runs wait for it.
    pub runs: u64,
    /// When the longest-waiting of them began to wait (database clock).
    #[serde(serialize_with = "json_time::time")]
    pub since: SystemTime,
}

/// A child run started by [`JobContext::spawn`](crate::JobContext::spawn): its message, in
/// its queue. [`JobContext::join`](crate::JobContext::join) waits for it.
///
/// ```no_run
/// # async fn f(ctx: sqlmq::JobContext) -> sqlmq::Result<()> {
/// let child = ctx.spawn("resize", "images", sqlmq::Message::new("photo-1.jpg")).await?;
/// println!("child {} in {}", child.id, child.queue);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ChildRun {
    /// The child's message.
    pub id: super::MessageId,
    /// Its queue.
    pub queue: String,
}

/// The name a parent waits under for its child's end (woken by the child's settling).
pub(crate) fn child_event(child: super::MessageId) -> String {
    format!("sqlmq-child:{child}")
}

/// A run suspended waiting for an event ([`Client::runs_waiting_for`](crate::Client::runs_waiting_for)).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// for run in client.runs_waiting_for("order-42-shipped", 100).await? {
///     println!("{} of {} since {:?}", run.id, run.queue, run.since);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WaitingRun {
    /// The run's message.
    pub id: super::MessageId,
    /// Its queue.
    pub queue: String,
    /// When it began to wait (database clock).
    #[serde(serialize_with = "json_time::time")]
    pub since: SystemTime,
}

/// Where a sleep or an event wait of a [`Run`](crate::queue::Run) stands after the call.
///
/// ```
/// let s = sqlmq::flow::Resumed::Event { payload: b"1".to_vec() };
/// assert_eq!(serde_json::to_value(&s).unwrap()["state"], "event");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Resumed {
    /// A sleep is over: go on.
    Awake,
    /// The event came, with this payload (JSON): go on.
    Event {
        /// The event's payload, as emitted (JSON).
        #[serde(serialize_with = "raw_json")]
        payload: Vec<u8>,
    },
    /// The event wait's deadline passed first: go on without it.
    TimedOut,
    /// Not over: the message is back in its queue until the sleep ends or the event comes
    /// (its attempt not spent). Stop handling it; do not ack or nack it.
    Suspended,
}

/// Stored JSON bytes as the JSON value they hold (a string of them if they hold none).
fn raw_json<S: serde::Serializer>(bytes: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) => v.serialize(s),
        Err(_) => String::from_utf8_lossy(bytes).serialize(s),
    }
}

/// A step or event name: 1 to 255 bytes.
pub(crate) fn check_durable_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_DURABLE_NAME {
        return Err(Error::InvalidArgument(format!(
            "a {what} name is 1 to {MAX_DURABLE_NAME} bytes, got {} bytes",
            name.len()
        )));
    }
    Ok(())
}

/// A step result or event payload within [`MAX_STEP_RESULT`].
pub(crate) fn check_durable_size(bytes: &[u8]) -> Result<()> {
    if bytes.len() > MAX_STEP_RESULT {
        return Err(Error::PayloadTooLarge {
            size: bytes.len(),
            limit: MAX_STEP_RESULT,
        });
    }
    Ok(())
}

/// A sleep or an event wait within [`MAX_WAIT`].
pub(crate) fn check_wait(what: &str, wait: Duration) -> Result<()> {
    if wait > MAX_WAIT {
        return Err(Error::InvalidArgument(format!(
            "a {what} of {wait:?} is longer than the longest delay, 10 years"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sizes_and_waits_have_bounds() {
        assert!(check_durable_name("step", "").is_err());
        assert!(check_durable_name("step", &"x".repeat(256)).is_err());
        assert!(check_durable_name("step", &"x".repeat(255)).is_ok());
        assert!(matches!(
            check_durable_size(&vec![b'1'; MAX_STEP_RESULT + 1]),
            Err(Error::PayloadTooLarge { .. })
        ));
        assert!(check_durable_size(&vec![b'1'; MAX_STEP_RESULT]).is_ok());
        assert!(check_wait("sleep", MAX_WAIT).is_ok());
        assert!(check_wait("sleep", MAX_WAIT + Duration::from_micros(1)).is_err());
    }
}
