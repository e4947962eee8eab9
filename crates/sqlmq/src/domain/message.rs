//! Messages going in ([`Message`]) and coming out ([`Delivery`], [`DeadLetter`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::error::{Error, Result};
use super::flow::FlowPart;
use super::id::{MessageId, Receipt};

/// A message to send.
///
/// ```
/// use std::time::Duration;
/// use sqlmq::Message;
///
/// let msg = Message::new("hello")
///     .priority(-1)                    // lower runs first; default 0
///     .delay(Duration::from_secs(30))  // not delivered before 30 s from now
///     .ordering_key("customer-42")     // strict FIFO among messages with this key
///     .idempotency_key("order-42-mail") // sending it again is a no-op
///     .header("trace-id", "abc");
/// # let _ = msg;
/// ```
#[derive(Clone, Debug)]
pub struct Message {
    pub(crate) id: MessageId,
    pub(crate) body: Vec<u8>,
    pub(crate) priority: i16,
    pub(crate) delay: Duration,
    pub(crate) ordering_key: Option<String>,
    pub(crate) concurrency_key: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) depends_on: Vec<MessageId>,
    pub(crate) flow: Option<FlowPart>,
    /// The deadline, kept as given (compared with the database's clock).
    pub(crate) deadline: Option<SystemTime>,
    pub(crate) run_timeout: Option<Duration>,
    /// A send with the idempotency key replaces the waiting message of the key.
    pub(crate) replace: bool,
    /// The tenant whose share of a fair queue's claims this message counts against.
    pub(crate) fairness_key: Option<String>,
}

impl Message {
    /// A message with this body, priority 0, no delay.
    ///
    /// ```
    /// let m = sqlmq::Message::new(vec![1u8, 2, 3]);
    /// # let _ = m;
    /// ```
    pub fn new(body: impl Into<Vec<u8>>) -> Message {
        Message {
            id: MessageId::new(),
            body: body.into(),
            priority: 0,
            delay: Duration::ZERO,
            ordering_key: None,
            concurrency_key: None,
            idempotency_key: None,
            headers: BTreeMap::new(),
            depends_on: Vec::new(),
            flow: None,
            deadline: None,
            run_timeout: None,
            replace: false,
            fairness_key: None,
        }
    }

    /// A message whose body is `value` serialised as JSON.
    ///
    /// ```
    /// #[derive(serde::Serialize)]
    /// struct Email { to: String }
    /// let m = sqlmq::Message::json(&Email { to: "a@example.com".into() }).unwrap();
    /// # let _ = m;
    /// ```
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Message> {
        Ok(Message::new(serde_json::to_vec(value)?))
    }

    /// Use this id instead of a generated one. Sending an id whose message is still stored is a
    /// no-op that returns the original ([`Sent::duplicate`](crate::queue::Sent) is true), whichever
    /// queue holds it; once that message is acked the id is free again (an idempotency key
    /// with the queue's dedup window also covers a resend after consumption).
    ///
    /// ```
    /// let id = sqlmq::MessageId::new();
    /// assert_eq!(sqlmq::Message::new("x").with_id(id).id(), id);
    /// ```
    pub fn with_id(mut self, id: MessageId) -> Message {
        self.id = id;
        self
    }

    /// The id this message will have.
    ///
    /// ```
    /// let m = sqlmq::Message::new("x");
    /// println!("sending {}", m.id());
    /// ```
    pub fn id(&self) -> MessageId {
        self.id
    }

    /// Delivery priority: lower values are delivered first (default 0).
    ///
    /// ```
    /// let urgent = sqlmq::Message::new("x").priority(-10);
    /// # let _ = urgent;
    /// ```
    pub fn priority(mut self, priority: i16) -> Message {
        self.priority = priority;
        self
    }

    /// Do not deliver before `delay` has passed (measured on the database clock at commit time).
    ///
    /// ```
    /// let later = sqlmq::Message::new("x").delay(std::time::Duration::from_secs(60));
    /// # let _ = later;
    /// ```
    pub fn delay(mut self, delay: Duration) -> Message {
        self.delay = delay;
        self
    }

    /// Do not deliver before `at` (converted to a delay from now on this machine's clock).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// let m = sqlmq::Message::new("x").run_at(SystemTime::now() + Duration::from_secs(5));
    /// # let _ = m;
    /// ```
    pub fn run_at(self, at: SystemTime) -> Message {
        let delay = at
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        self.delay(delay)
    }

    /// Give the message a deadline: no claim delivers it after `at` — the claim that finds it
    /// late makes it a dead letter with the reason "deadline passed" instead — and a worker
    /// stops a handler still running at `at` (its [`JobContext::cancelled`] fires, then its
    /// future is dropped, or after [`time_up_grace`]) and dead-letters the message, never to
    /// retry it. Kept as given, and compared with the database's clock. ([`Queue::take_in`](crate::Queue::take_in),
    /// receive-and-delete, does not look at it.)
    ///
    /// [`time_up_grace`]: crate::worker::WorkerBuilder::time_up_grace
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// let m = sqlmq::Message::new("quote").deadline(SystemTime::now() + Duration::from_secs(60));
    /// # let _ = m;
    /// ```
    ///
    /// [`JobContext::cancelled`]: crate::JobContext::cancelled
    pub fn deadline(mut self, at: SystemTime) -> Message {
        self.deadline = Some(at);
        self
    }

    /// Let each attempt run at most `timeout`, counted from its claim (database clock): a
    /// worker stops a handler still running then, as at a [deadline](Message::deadline), and
    /// dead-letters the message with the reason, never to retry it (the worker's own
    /// [`timeout`](crate::worker::WorkerBuilder::timeout), by contrast, fails the attempt and
    /// retries it). Between 1 ms and 10 years.
    ///
    /// ```
    /// let m = sqlmq::Message::new("resize").run_timeout(std::time::Duration::from_secs(30));
    /// # let _ = m;
    /// ```
    pub fn run_timeout(mut self, timeout: Duration) -> Message {
        self.run_timeout = Some(timeout);
        self
    }

    /// Whether the message has a deadline or a run timeout, kept in columns of its row.
    pub(crate) fn timed(&self) -> bool {
        self.deadline.is_some() || self.run_timeout.is_some()
    }

    /// Strict FIFO among messages with the same key: none is handed out while an earlier one with
    /// this key is unacked (like SQS FIFO message groups). 1 to 128 bytes
    /// ([`Client::MAX_NAME_LEN`](crate::Client::MAX_NAME_LEN)).
    ///
    /// ```
    /// let m = sqlmq::Message::new("debit 10").ordering_key("account-7");
    /// # let _ = m;
    /// ```
    pub fn ordering_key(mut self, key: impl Into<String>) -> Message {
        self.ordering_key = Some(key.into());
        self
    }

    /// Count this message under a concurrency key: on a queue with a per-key limit
    /// ([`QueueConfig::concurrency_limit`](crate::QueueConfig::concurrency_limit)) at most that
    /// many messages of one key are admitted at once (ready, in flight, or waiting for a
    /// retry), every process together; the others wait in line behind them, in send order,
    /// and hold back no other key. On a queue without a per-key limit the key admits
    /// everything. 1 to 127 bytes without control characters; a message has an ordering key
    /// or a concurrency key, not both (an ordering key is a concurrency key of limit 1 that
    /// also keeps order through retries).
    ///
    /// ```
    /// let m = sqlmq::Message::new("sync").concurrency_key("customer-42");
    /// # let _ = m;
    /// ```
    pub fn concurrency_key(mut self, key: impl Into<String>) -> Message {
        self.concurrency_key = Some(key.into());
        self
    }

    /// Count this message against `key`'s share (a tenant, a customer) on a fair queue
    /// ([`QueueConfig::fair`](crate::QueueConfig::fair)): the queue hands out its ready
    /// messages across keys by weight within a priority, so that a key with a large backlog
    /// delays no other. 1 to 128 bytes without control characters. On a queue that is not fair
    /// the key is kept and has no effect; messages without one share the empty key.
    ///
    /// ```
    /// let m = sqlmq::Message::new("report").fairness_key("tenant-7");
    /// # let _ = m;
    /// ```
    pub fn fairness_key(mut self, key: impl Into<String>) -> Message {
        self.fairness_key = Some(key.into());
        self
    }

    /// Make the send idempotent: while the queue remembers this key (its dedup window, 24 h by
    /// default), sending a message with the same key again is a no-op that returns the original
    /// message's id. 1 to 128 bytes ([`Client::MAX_NAME_LEN`](crate::Client::MAX_NAME_LEN)).
    ///
    /// ```
    /// let m = sqlmq::Message::new("receipt").idempotency_key("order-42");
    /// # let _ = m;
    /// ```
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Message {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Replace the waiting message of `key`: while a message sent with this key (by
    /// `replacing` or [`idempotency_key`](Message::idempotency_key)) still waits — ready or
    /// delayed (a retry's backoff included), not in flight — this send takes its place: its
    /// body, headers, due time (now, or after this message's [`delay`](Message::delay)),
    /// deadline and run timeout become this message's, its id, priority, attempts and errors
    /// stay, and [`Sent::replaced`] is true with that id. Once it was claimed (or is gone),
    /// this one is sent as a new message and the key names it. Concurrent senders of one key
    /// leave one waiting message, the last one's. The key is remembered for the queue's dedup
    /// window from the message's due time: a message that waits longer than that is not
    /// replaced any more. graphile-worker's `job_key` "replace". Not with an ordering or
    /// concurrency key, nor in a batch or with dependencies. 1 to 128 bytes.
    ///
    /// ```
    /// // The latest settings win: one sync per account waits, whatever the sends.
    /// let m = sqlmq::Message::new(r#"{"plan": "pro"}"#).replacing("sync-account-7");
    /// # let _ = m;
    /// ```
    pub fn replacing(mut self, key: impl Into<String>) -> Message {
        self.idempotency_key = Some(key.into());
        self.replace = true;
        self
    }

    /// Debounce: deliver once, after `key` has been quiet for `quiet`. The first send waits
    /// `quiet`; each later send with the key while it waits replaces it and pushes its due
    /// time to `quiet` from then (see [`Message::replacing`]): a burst of sends becomes one
    /// message, with the last body, `quiet` after the last send (pg-boss's debounce).
    ///
    /// ```
    /// use std::time::Duration;
    /// // Reindex a document once its edits stop for 5 s.
    /// let m = sqlmq::Message::new("doc-42").debounce("reindex-doc-42", Duration::from_secs(5));
    /// # let _ = m;
    /// ```
    pub fn debounce(self, key: impl Into<String>, quiet: Duration) -> Message {
        self.replacing(key).delay(quiet)
    }

    /// Deliver this message only after every message in `ids` (in any queue) was acked. While
    /// one of them is a dead letter this one is held; it runs once that one is redriven and
    /// acked, and is cancelled when that one is cancelled or deleted. A dependency must be a
    /// stored message (pending or dead), or one of a batch, a workflow or another message's
    /// dependencies that was acked within the flow retention (7 days); any other id is
    /// refused with [`Error::DependencyNotFound`](crate::Error::DependencyNotFound). See
    /// [`Batch::step`](crate::flow::Batch::step) for named steps sent together.
    ///
    /// ```
    /// let charge = sqlmq::Message::new("charge");
    /// let ship = sqlmq::Message::new("ship").depends_on([charge.id()]);
    /// # let _ = ship;
    /// ```
    pub fn depends_on(mut self, ids: impl IntoIterator<Item = MessageId>) -> Message {
        for id in ids {
            if !self.depends_on.contains(&id) {
                self.depends_on.push(id);
            }
        }
        self
    }

    /// Whether sending this message records its end in the flow tables.
    pub(crate) fn tracked(&self) -> bool {
        self.flow.is_some() || !self.depends_on.is_empty()
    }

    /// Add a header (string key and value), delivered with the message.
    ///
    /// ```
    /// let m = sqlmq::Message::new("x").header("content-type", "text/plain");
    /// # let _ = m;
    /// ```
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Message {
        self.headers.insert(key.into(), value.into());
        self
    }
}

/// What a send did.
///
/// ```
/// # async fn f(queue: sqlmq::Queue) -> sqlmq::Result<()> {
/// let sent = queue.send(sqlmq::Message::new("x").idempotency_key("k")).await?;
/// if sent.duplicate { println!("already sent as {}", sent.id) }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Sent {
    /// The message's id: the original message's id when `duplicate`.
    pub id: MessageId,
    /// True when the idempotency key was already known and nothing was written.
    pub duplicate: bool,
    /// True when the message replaced the waiting message of its key
    /// ([`Message::replacing`], [`Message::debounce`]): `id` is that message's.
    pub replaced: bool,
}

impl Sent {
    /// A new message's.
    pub(crate) fn new(id: MessageId) -> Sent {
        Sent {
            id,
            duplicate: false,
            replaced: false,
        }
    }

    /// A send that wrote nothing: `id` had its key (or its id) already.
    pub(crate) fn duplicate_of(id: MessageId) -> Sent {
        Sent {
            id,
            duplicate: true,
            replaced: false,
        }
    }

    /// A send that replaced waiting message `id`.
    pub(crate) fn in_place_of(id: MessageId) -> Sent {
        Sent {
            id,
            duplicate: false,
            replaced: true,
        }
    }
}

/// The token of a delivery from `Queue::take_in`: claims hand out tokens from 1 (a message's
/// delivery count), so no lease ever holds this one, and a receipt made from a taken delivery
/// is reported lost rather than settling a lease a later claim of the same message holds.
pub(crate) const TAKEN_TOKEN: u64 = 0;

/// A claimed message. Process it, then `ack` (or `nack`) its [`receipt`](Delivery::receipt)
/// before the lease ends.
///
/// ```
/// # async fn f(queue: sqlmq::Queue) -> sqlmq::Result<()> {
/// use std::time::Duration;
/// for d in queue.receive(10, Duration::from_secs(30)).await? {
///     println!("{} attempt {}: {}", d.id, d.attempt, String::from_utf8_lossy(&d.body));
///     queue.ack(d.receipt()).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Delivery {
    /// The message id.
    pub id: MessageId,
    /// The fencing token of this claim (0 for a taken message, which holds no lease).
    pub token: u64,
    /// 1 for the first delivery, incremented by every claim since (reset by a redrive).
    pub attempt: u32,
    /// The message's priority.
    pub priority: i16,
    /// The ordering key, if the message has one; for a topic record, its key.
    pub ordering_key: Option<String>,
    /// The concurrency key, if the message has one (see [`Message::concurrency_key`]).
    pub concurrency_key: Option<String>,
    /// The idempotency key, if the message was sent with one.
    pub idempotency_key: Option<String>,
    /// Headers given at send time.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
    /// When the message was sent (database clock).
    pub enqueued_at: SystemTime,
    /// When this lease ends unless extended (database clock); for a taken message, which holds
    /// no lease, when it was taken.
    pub lease_expires_at: SystemTime,
    /// The message's deadline (database clock; see [`Message::deadline`]): it is not
    /// delivered after it, and a worker stops its handler at it.
    pub deadline: Option<SystemTime>,
    /// How long each attempt may run (see [`Message::run_timeout`]).
    pub run_timeout: Option<Duration>,
    /// Topic records: the partition (None for queue messages).
    pub partition: Option<u32>,
    /// Topic records: the offset in the partition (None for queue messages).
    pub offset: Option<i64>,
    /// Whether the message's end is recorded in the flow tables (a batch's message, a
    /// dependency or a dependant): its stored key carries the flow mark.
    pub(crate) tracked: bool,
    /// When the claim took it (database clock): its attempt's run timeout counts from here.
    pub(crate) claimed_at: SystemTime,
}

impl Delivery {
    /// The receipt to ack, nack or extend this claim with.
    ///
    /// ```
    /// # fn f(d: sqlmq::Delivery) { let r = d.receipt(); assert_eq!(r.id, d.id); }
    /// ```
    pub fn receipt(&self) -> Receipt {
        Receipt {
            id: self.id,
            token: self.token,
        }
    }

    /// Deserialise the body as JSON.
    ///
    /// ```
    /// # fn f(d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// let value: serde_json::Value = d.json()?;
    /// # Ok(()) }
    /// ```
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_slice(&self.body)?)
    }
}

/// One failed attempt, as kept in a message's error history.
///
/// ```
/// # fn f(d: sqlmq::queue::DeadLetter) {
/// for e in &d.errors { println!("attempt {}: {}", e.attempt, e.error) }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttemptError {
    /// Which attempt failed.
    pub attempt: u32,
    /// When (database clock, RFC 3339 UTC with milliseconds).
    #[serde(deserialize_with = "super::json_time::normalized")]
    pub at: String,
    /// The error text given to `nack` (or "lease expired").
    pub error: String,
}

/// A message in a queue's dead letters.
///
/// ```
/// # async fn f(queue: sqlmq::Queue) -> sqlmq::Result<()> {
/// for dl in queue.dead_letters(100).await? {
///     println!("{} died after {} attempts: {:?}", dl.id, dl.attempts, dl.errors.last());
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The message id.
    pub id: MessageId,
    /// Attempts made before it died.
    pub attempts: u32,
    /// When it was dead-lettered (database clock).
    pub died_at: SystemTime,
    /// When it was sent (database clock).
    pub enqueued_at: SystemTime,
    /// The error history, oldest first (the most recent 20 attempts).
    pub errors: Vec<AttemptError>,
    /// Topic records: the partition (None for queue messages).
    pub partition: Option<u32>,
    /// Topic records: the offset (None for queue messages).
    pub offset: Option<i64>,
    /// The ordering key, if any.
    pub ordering_key: Option<String>,
    /// The concurrency key, if any.
    pub concurrency_key: Option<String>,
    /// Headers given at send time.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
    /// Broadcast groups: the member whose dead letter it is (each member keeps its own).
    pub member: Option<String>,
}

/// The longest span the database's date arithmetic is given: a thousand years, beyond any
/// deadline that means anything and inside every backend's range (MySQL's `DATETIME` ends in
/// the year 9999, where adding more gives NULL; SQLite's integer microseconds would overflow
/// after about 292 000 years).
pub(crate) const MAX_DATE_SPAN: Duration = Duration::from_secs(1000 * 366 * 24 * 3600);

/// `d` in microseconds for the database's date arithmetic, capped at [`MAX_DATE_SPAN`]: the one
/// conversion every duration bound to a statement goes through.
pub(crate) fn micros_of(d: Duration) -> i64 {
    d.min(MAX_DATE_SPAN).as_micros() as i64
}

/// `d` in milliseconds for a configuration column (retention, consume timeout, dedup window),
/// capped at [`MAX_DATE_SPAN`] as [`micros_of`] is: a longer one means "practically never",
/// and a wrapped conversion would read back as a short one.
pub(crate) fn millis_of(d: Duration) -> i64 {
    d.min(MAX_DATE_SPAN).as_millis() as i64
}

/// `t` in microseconds since the Unix epoch, as the SQL layer takes times (the inverse of
/// [`time_from_micros`]; 0 before the epoch).
pub(crate) fn micros_of_time(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// A duration the SQL layer returns in microseconds; a negative one (a difference of times
/// that a clock step made) reads as zero.
pub(crate) fn duration_from_micros(us: i64) -> Duration {
    Duration::from_micros(us.max(0) as u64)
}

/// Convert microseconds since the Unix epoch (as the SQL layer returns them) to a `SystemTime`.
pub(crate) fn time_from_micros(us: i64) -> SystemTime {
    if us >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_micros(us as u64)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_micros(us.unsigned_abs())
    }
}

/// Most bytes a message's or record's headers may take once stored (their JSON text; the
/// column holds 64 KiB).
pub(crate) const MAX_HEADERS_BYTES: usize = 60 * 1024;

/// Refuse headers whose stored form would not fit their column. Measured on the JSON text
/// itself: a control character or a quote is escaped there (`\u0000` is six bytes for one),
/// so counting the raw bytes would let hostile headers through to a database error.
pub(crate) fn check_headers(headers: &BTreeMap<String, String>) -> Result<()> {
    if headers.is_empty() {
        return Ok(());
    }
    let mut counter = ByteCount(0);
    serde_json::to_writer(&mut counter, headers).expect("a map of strings serializes");
    if counter.0 > MAX_HEADERS_BYTES {
        return Err(Error::InvalidArgument(format!(
            "headers take {} bytes once stored, over the limit of {MAX_HEADERS_BYTES}",
            counter.0
        )));
    }
    Ok(())
}

/// A writer that only counts (sizing headers without building their text).
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The error history column's text for `errors`: one JSON object per line (what
/// [`parse_errors`] reads).
pub(crate) fn encode_errors(errors: &[AttemptError]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in errors {
        // Serializing a struct of strings and an integer cannot fail.
        serde_json::to_writer(&mut out, e).expect("an AttemptError serializes");
        out.push(b'\n');
    }
    out
}

/// Entries kept in a message's error history: the latest.
pub(crate) const MAX_ERROR_HISTORY: usize = 20;

/// Longest error text kept per attempt, in bytes.
pub(crate) const MAX_ERROR_BYTES: usize = 4096;

/// An error text truncated to [`MAX_ERROR_BYTES`] (on a character boundary), JSON-encoded.
pub(crate) fn error_json(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    serde_json::Value::from(&error[..end]).to_string()
}

/// `history` (one JSON object per line, each ending with a newline) with the entry of
/// `attempt` (at `at`, RFC 3339 UTC) appended, keeping the last [`MAX_ERROR_HISTORY`] lines.
pub(crate) fn append_error(history: &str, attempt: i32, at: &str, error: &str) -> String {
    let line = format!(
        "{{\"attempt\":{attempt},\"at\":\"{at}\",\"error\":{}}}",
        error_json(error)
    );
    let mut lines: Vec<&str> = history.lines().filter(|l| !l.is_empty()).collect();
    lines.push(&line);
    let keep = &lines[lines.len().saturating_sub(MAX_ERROR_HISTORY)..];
    let mut out = String::with_capacity(keep.iter().map(|l| l.len() + 1).sum());
    for l in keep {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Parse the error history column: one JSON object per line.
pub(crate) fn parse_errors(text: Option<&str>) -> Vec<AttemptError> {
    text.unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_history_lines() {
        let text =
            "{\"attempt\":1,\"at\":\"2026-01-01T00:00:00.000000Z\",\"error\":\"boom\\nline\"}\n";
        let errs = parse_errors(Some(text));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].error, "boom\nline");
        assert!(parse_errors(None).is_empty());
        let again = encode_errors(&errs);
        assert_eq!(parse_errors(Some(&String::from_utf8(again).unwrap())), errs);
    }

    #[test]
    fn error_texts_are_json_and_bounded() {
        assert_eq!(error_json("a\"b\nc"), r#""a\"b\nc""#);
        let long = "é".repeat(5000);
        let j = error_json(&long);
        assert!(j.len() <= MAX_ERROR_BYTES + 2);
        assert!(serde_json::from_str::<String>(&j).is_ok());
    }

    #[test]
    fn histories_keep_the_last_entries() {
        let mut history = String::new();
        for i in 1..=25 {
            history = append_error(&history, i, "2026-01-01T00:00:00.000Z", "boom\nline");
        }
        let errors = parse_errors(Some(&history));
        assert_eq!(errors.len(), MAX_ERROR_HISTORY);
        assert_eq!(errors[0].attempt, 26 - MAX_ERROR_HISTORY as u32);
        assert_eq!(errors[MAX_ERROR_HISTORY - 1].attempt, 25);
        assert_eq!(errors[MAX_ERROR_HISTORY - 1].error, "boom\nline");
        assert!(history.ends_with('\n'));
    }

    #[test]
    fn run_at_in_the_past_means_now() {
        let m = Message::new("x").run_at(SystemTime::UNIX_EPOCH);
        assert_eq!(m.delay, Duration::ZERO);
    }
}
