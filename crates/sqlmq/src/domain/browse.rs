//! Looking at a queue's messages without touching them: where each one is, one page at a time.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use super::{AttemptError, Error, MessageId};

/// Where a queue's message is.
///
/// ```
/// use sqlmq::inspect::MessageState;
/// let s: MessageState = "in_flight".parse()?;
/// assert_eq!(s, MessageState::InFlight);
/// assert_eq!(s.to_string(), "in_flight");
/// # Ok::<(), sqlmq::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageState {
    /// Waiting to be claimed now.
    Ready,
    /// Waiting for its delay (or a retry's backoff) to pass.
    Scheduled,
    /// Waiting behind an earlier message of its ordering key.
    Blocked,
    /// Claimed: a consumer holds its lease.
    InFlight,
    /// A dead letter.
    Dead,
    /// Waiting for its dependencies to be acked, or for its batch to finish (a callback).
    Waiting,
    /// Cancelled while a consumer held it: removed when its handler ends or its lease would
    /// have ended, never delivered again.
    Cancelling,
}

impl MessageState {
    /// The states [`Queue::browse`](crate::Queue::browse) lists (dead letters have
    /// [`Queue::dead_letters`](crate::Queue::dead_letters)).
    ///
    /// ```
    /// assert_eq!(sqlmq::inspect::MessageState::BROWSABLE.len(), 5);
    /// ```
    pub const BROWSABLE: [MessageState; 5] = [
        MessageState::Ready,
        MessageState::Scheduled,
        MessageState::Blocked,
        MessageState::InFlight,
        MessageState::Waiting,
    ];

    /// Its name, as the CLI and the HTTP API spell it.
    ///
    /// ```
    /// assert_eq!(sqlmq::inspect::MessageState::Scheduled.as_str(), "scheduled");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Ready => "ready",
            MessageState::Scheduled => "scheduled",
            MessageState::Blocked => "blocked",
            MessageState::InFlight => "in_flight",
            MessageState::Dead => "dead",
            MessageState::Waiting => "waiting",
            MessageState::Cancelling => "cancelling",
        }
    }

    /// The number a statement reports it by.
    pub(crate) fn from_code(code: i64) -> Option<MessageState> {
        [
            MessageState::Ready,
            MessageState::Scheduled,
            MessageState::Blocked,
            MessageState::InFlight,
            MessageState::Dead,
            MessageState::Waiting,
            MessageState::Cancelling,
        ]
        .get(usize::try_from(code).ok()?)
        .copied()
    }
}

impl fmt::Display for MessageState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MessageState {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "ready" => MessageState::Ready,
            "scheduled" => MessageState::Scheduled,
            "blocked" => MessageState::Blocked,
            "in_flight" | "in-flight" => MessageState::InFlight,
            "dead" => MessageState::Dead,
            "waiting" => MessageState::Waiting,
            "cancelling" => MessageState::Cancelling,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "state must be ready, scheduled, blocked, in_flight, waiting, cancelling or dead, got {s:?}"
                )));
            }
        })
    }
}

/// A queue's message as browsing sees it: read without a lease, so it may have moved on by
/// the time it is shown.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// if let Some(m) = q.message(id).await? {
///     println!("{} is {} after {} attempts", m.id, m.state, m.attempts);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    /// The message id.
    pub id: MessageId,
    /// Where it is.
    pub state: MessageState,
    /// Its priority (lower is claimed first).
    pub priority: i16,
    /// Attempts made so far (a claimed message counts its current one).
    pub attempts: u32,
    /// When it was sent (database clock).
    pub enqueued_at: SystemTime,
    /// Scheduled or blocked: when its delay (or retry backoff) ends.
    pub run_at: Option<SystemTime>,
    /// In flight: when its lease ends unless extended.
    pub lease_until: Option<SystemTime>,
    /// In flight: when it was claimed.
    pub claimed_at: Option<SystemTime>,
    /// In flight: the consumer that holds it, when it said who it is (a worker's process id).
    pub owner: Option<String>,
    /// Dead: when it died.
    pub died_at: Option<SystemTime>,
    /// Its ordering key, if any.
    pub ordering_key: Option<String>,
    /// Its concurrency key, if any.
    pub concurrency_key: Option<String>,
    /// Headers given at send time.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
    /// Its deadline, if it has one (database clock; see
    /// [`Message::deadline`](crate::Message::deadline)).
    pub deadline: Option<SystemTime>,
    /// How long each attempt may run, if limited (see
    /// [`Message::run_timeout`](crate::Message::run_timeout)).
    pub run_timeout: Option<std::time::Duration>,
    /// The errors of its failed attempts, oldest first (the most recent 20).
    pub errors: Vec<AttemptError>,
}

/// One page of [`Queue::browse`](crate::Queue::browse): the messages in the order their state
/// hands them out, and where the next page starts.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
/// let mut after = None;
/// loop {
///     let page = q.browse(sqlmq::inspect::MessageState::Ready, after.as_deref(), 100).await?;
///     for m in &page.messages { println!("{}", m.id) }
///     match page.next { Some(n) => after = Some(n), None => break }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagePage {
    /// The messages, in the order their state hands them out: ready by priority then id,
    /// scheduled by due time, blocked by key then place in line, in flight by lease end.
    pub messages: Vec<QueuedMessage>,
    /// Give it as `after` to read the next page; `None` when this page was the last.
    pub next: Option<String>,
}

/// Where a page starts: just past the position of the previous page's last message. Ready,
/// scheduled and in-flight messages are ordered by a number (priority, due time, lease end in
/// µs) then id; blocked ones by their key then their place in its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// (number, id)
    Ordered(i64, MessageId),
    /// (key, place)
    Keyed(Vec<u8>, i64),
}

impl After {
    /// The cursor's text: opaque to users, stable across versions of one schema.
    pub(crate) fn encode(&self) -> String {
        match self {
            After::Ordered(at, id) => format!("{at}~{id}"),
            After::Keyed(key, seq) => {
                let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
                format!("k{hex}~{seq}")
            }
        }
    }

    /// Read a cursor of a listing of `state`.
    pub(crate) fn decode(state: MessageState, text: &str) -> Result<After, Error> {
        let bad = || {
            Error::InvalidArgument(format!(
                "{text:?} is not a cursor of a {state} listing (give the `next` of the page before)"
            ))
        };
        let (first, second) = text.split_once('~').ok_or_else(bad)?;
        match state {
            MessageState::Blocked => {
                let hex = first.strip_prefix('k').ok_or_else(bad)?;
                if hex.len() % 2 != 0 || !hex.is_ascii() {
                    return Err(bad());
                }
                let key = (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| bad())?;
                Ok(After::Keyed(key, second.parse().map_err(|_| bad())?))
            }
            MessageState::Dead => Err(bad()),
            _ => Ok(After::Ordered(
                first.parse().map_err(|_| bad())?,
                second.parse().map_err(|_| bad())?,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_they_wrote_and_refuse_others() {
        let id = MessageId::new();
        let ordered = After::Ordered(-3, id);
        assert_eq!(
            After::decode(MessageState::Ready, &ordered.encode()).unwrap(),
            ordered
        );
        let keyed = After::Keyed(b"k\x00\xff".to_vec(), 7);
        assert_eq!(
            After::decode(MessageState::Blocked, &keyed.encode()).unwrap(),
            keyed
        );
        for (state, text) in [
            (MessageState::Blocked, ordered.encode()),
            (MessageState::Ready, keyed.encode()),
            (MessageState::Ready, "12".to_owned()),
            (MessageState::Blocked, "kabc~1".to_owned()),
            (MessageState::Blocked, "kzz~1".to_owned()),
            (MessageState::Dead, ordered.encode()),
        ] {
            assert!(
                matches!(After::decode(state, &text), Err(Error::InvalidArgument(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn states_read_back_their_names() {
        for s in MessageState::BROWSABLE
            .into_iter()
            .chain([MessageState::Dead])
        {
            assert_eq!(s.as_str().parse::<MessageState>().unwrap(), s);
        }
        assert!("gone".parse::<MessageState>().is_err());
    }
}
