//! "A queue, or a topic's consumer group", for code that consumes either the same way (as the
//! worker runtime and `sqlmq consume` do): named ([`SourceName`], parsed from `emails` or
//! `orders/billing`) and resolved ([`Source`]), with the receive, ack, nack and extend that
//! both have.
//!
//! ```no_run
//! use std::time::Duration;
//! use sqlmq::source::SourceName;
//!
//! # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
//! let name: SourceName = "orders/billing".parse()?;
//! let source = name.resolve(&client).await?;
//! for delivery in source.receive(10, Duration::from_secs(30)).await? {
//!     source.ack(delivery.receipt()).await?;
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::client::{Client, Subject};
use crate::consume::Consumer;
use crate::domain::{DeadLetter, Delivery, Error, MessageId, Result, validate_name};
use crate::queue::Queue;
use crate::store::Backend;
use crate::store::rows::{GroupSignal, QueueSignal};
use crate::topic::Group;

/// The name of something to consume from: a queue (`emails`), or a cluster-mode consumer group
/// of a topic (`orders/billing`).
///
/// ```
/// use sqlmq::source::SourceName;
/// let q: SourceName = "emails".parse().unwrap();
/// assert_eq!(q, SourceName::queue("emails"));
/// let g: SourceName = "orders/billing".parse().unwrap();
/// assert_eq!(g, SourceName::group("orders", "billing"));
/// assert_eq!(g.to_string(), "orders/billing");
/// assert!("a/b/c".parse::<SourceName>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SourceName {
    /// A queue.
    Queue(String),
    /// A consumer group of a topic.
    Group {
        /// The topic.
        topic: String,
        /// The group.
        group: String,
    },
}

impl SourceName {
    /// A queue's name.
    ///
    /// ```
    /// assert_eq!(sqlmq::source::SourceName::queue("emails").to_string(), "emails");
    /// ```
    pub fn queue(name: &str) -> SourceName {
        SourceName::Queue(name.to_owned())
    }

    /// A topic's group.
    ///
    /// ```
    /// assert_eq!(sqlmq::source::SourceName::group("orders", "billing").to_string(), "orders/billing");
    /// ```
    pub fn group(topic: &str, group: &str) -> SourceName {
        SourceName::Group {
            topic: topic.to_owned(),
            group: group.to_owned(),
        }
    }

    /// Check the names it is made of.
    ///
    /// ```
    /// assert!(sqlmq::source::SourceName::queue("no spaces").validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        match self {
            SourceName::Queue(name) => validate_name("queue", name),
            SourceName::Group { topic, group } => {
                validate_name("topic", topic)?;
                validate_name("group", group)
            }
        }
    }

    /// Look it up: an unknown queue, topic or group is an error, and so is a broadcast group
    /// (its members read every record with a [`BroadcastReader`](crate::topic::BroadcastReader);
    /// there is nothing to ack).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let source = "orders/billing".parse::<sqlmq::source::SourceName>()?.resolve(&client).await?;
    /// # Ok(()) }
    /// ```
    pub async fn resolve<B: Backend>(&self, client: &Client<B>) -> Result<Source<B>> {
        match self {
            SourceName::Queue(name) => Ok(Source::Queue(client.queue(name).await?)),
            SourceName::Group { topic, group } => {
                let group = client.topic(topic).await?.group(group).await?;
                group.require_cluster()?;
                Ok(Source::Group(group))
            }
        }
    }
}

impl fmt::Display for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceName::Queue(name) => f.write_str(name),
            SourceName::Group { topic, group } => write!(f, "{topic}/{group}"),
        }
    }
}

impl FromStr for SourceName {
    type Err = Error;
    fn from_str(s: &str) -> Result<SourceName> {
        let name = match s.split_once('/') {
            None => SourceName::queue(s),
            Some((topic, group)) => SourceName::group(topic, group),
        };
        name.validate()?;
        Ok(name)
    }
}

/// A queue or a cluster-mode consumer group, resolved: everything that consumes (the worker,
/// `sqlmq consume`, dead-letter tools) handles both through it. Its methods are those of
/// [`Queue`] and [`Group`].
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let source = "orders/billing".parse::<sqlmq::source::SourceName>()?.resolve(&client).await?;
/// for d in source.receive(10, std::time::Duration::from_secs(30)).await? {
///     source.ack(d.receipt()).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub enum Source<B: Backend = crate::DefaultBackend> {
    /// A queue.
    Queue(Queue<B>),
    /// A cluster-mode consumer group.
    Group(Group<B>),
}

impl<B: Backend> Clone for Source<B> {
    fn clone(&self) -> Self {
        match self {
            Source::Queue(q) => Source::Queue(q.clone()),
            Source::Group(g) => Source::Group(g.clone()),
        }
    }
}

/// Its name, as [`Source::name`] gives it, written without allocating.
impl<B: Backend> fmt::Display for Source<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Queue(q) => f.write_str(q.name()),
            Source::Group(g) => write!(f, "{}/{}", g.topic().name(), g.name()),
        }
    }
}

impl<B: Backend> Source<B> {
    /// Its name: the queue's, or `topic/group` (as in logs, metrics and per-source settings).
    ///
    /// ```no_run
    /// # fn f(s: sqlmq::source::Source) { println!("{}", s.name()); }
    /// ```
    pub fn name(&self) -> String {
        match self {
            Source::Queue(q) => q.name().to_owned(),
            Source::Group(g) => g.label(),
        }
    }

    /// The client it belongs to.
    ///
    /// ```no_run
    /// # fn f(s: sqlmq::source::Source) { let pool = s.client().pool(); }
    /// ```
    pub fn client(&self) -> &Client<B> {
        match self {
            Source::Queue(q) => q.client(),
            Source::Group(g) => g.topic().client(),
        }
    }

    /// Claim up to `n` messages for `lease` (see [`Queue::receive`] and [`Group::receive`]).
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq::source::Source) -> sqlmq::Result<()> {
    /// let batch = s.receive(10, std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        match self {
            Source::Queue(q) => q.receive(n, lease).await,
            Source::Group(g) => g.receive(n, lease).await,
        }
    }

    /// Claim up to `n` messages for `lease`, waiting up to `wait` for the first (see
    /// [`Queue::receive_wait`] and [`Group::receive_wait`]).
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq::source::Source) -> sqlmq::Result<()> {
    /// use std::time::Duration;
    /// let batch = s.receive_wait(10, Duration::from_secs(30), Duration::from_secs(20)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive_wait(
        &self,
        n: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        match self {
            Source::Queue(q) => q.receive_wait(n, lease, wait).await,
            Source::Group(g) => g.receive_wait(n, lease, wait).await,
        }
    }

    /// The oldest `limit` dead letters, with their error histories.
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq::source::Source) -> sqlmq::Result<()> {
    /// for d in s.dead_letters(10).await? { println!("{}: {:?}", d.id, d.errors.last()) }
    /// # Ok(()) }
    /// ```
    pub async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>> {
        match self {
            Source::Queue(q) => q.dead_letters(limit).await,
            Source::Group(g) => g.dead_letters(limit).await,
        }
    }

    /// Deliver the given dead letters again with fresh attempts. Returns the ids redriven.
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq::source::Source, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// s.redrive(&[id]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn redrive(&self, ids: &[MessageId]) -> Result<Vec<MessageId>> {
        match self {
            Source::Queue(q) => q.redrive(ids).await,
            Source::Group(g) => g.redrive(ids).await,
        }
    }

    /// Deliver every dead letter again. Returns how many.
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq::source::Source) -> sqlmq::Result<()> {
    /// s.redrive_all().await?;
    /// # Ok(()) }
    /// ```
    pub async fn redrive_all(&self) -> Result<u64> {
        match self {
            Source::Queue(q) => q.redrive_all().await,
            Source::Group(g) => g.redrive_all().await,
        }
    }

    /// Delete every dead letter. Returns how many.
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq::source::Source) -> sqlmq::Result<()> {
    /// s.purge_dead_letters().await?;
    /// # Ok(()) }
    /// ```
    pub async fn purge_dead_letters(&self) -> Result<u64> {
        match self {
            Source::Queue(q) => q.purge_dead_letters().await,
            Source::Group(g) => g.purge_dead_letters().await,
        }
    }

    /// The one consumption path, as seen for this source.
    pub(crate) fn consumer(&self) -> Consumer<'_, B> {
        match self {
            Source::Queue(q) => q.consumer(),
            Source::Group(g) => g.consumer(),
        }
    }

    /// What local producers notify when there is something new to claim.
    pub(crate) fn subject(&self) -> Subject {
        match self {
            Source::Queue(q) => Subject::Queue(q.id()),
            Source::Group(g) => Subject::Topic(g.topic().id()),
        }
    }

    /// The claim itself, without housekeeping (the worker runs maintenance as a service).
    pub(crate) async fn claim(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        match self {
            Source::Queue(q) => q.claim(n, lease).await,
            // (an empty claim is rare in a worker: it waits for a wakeup before claiming again)
            Source::Group(g) => g.claim_or_sequence(n, lease).await,
        }
    }

    /// Whether the source may still have work for a worker that stops when drained: a
    /// non-locking look finds something to claim, or maintenance just made something
    /// claimable. An empty claim alone does not prove a source drained: `SKIP LOCKED` also
    /// skips rows another transaction (a maintenance pass, a claim that is about to give up)
    /// holds for a moment; and a lease that ended — this worker's own too, lost while its
    /// handler waited on a slow database — leaves its message unclaimable until maintenance
    /// releases it, which is run here rather than left to the prober (a worker that stopped
    /// first would leave that message behind). Maintenance moves every due or ended one, so
    /// the looks end. A source deleted meanwhile, or whose id went to another, is
    /// [`Error::Deleted`].
    pub(crate) async fn may_have_work(&self) -> Result<bool> {
        match self {
            Source::Queue(q) => {
                let signals = q.client().probe(&[q.id()]).await?;
                let signal = still_there(q, signals.first())?;
                if signal.needs_maintenance() {
                    // Moved by this maintenance, or by another process's at this moment:
                    // either way claimable (or dead-lettered) at the next look.
                    q.maintain().await?;
                    return Ok(true);
                }
                Ok(signal.ready)
            }
            Source::Group(g) => {
                let signals = g.topic().client().probe_groups(&[g.id()]).await?;
                let signal = group_still_there(g, signals.first())?;
                if signal.expired {
                    g.maintain().await?;
                    return Ok(true);
                }
                Ok(signal.ready || signal.pending)
            }
        }
    }

    /// Whether the source is still the one of its name (one probe): [`Error::Deleted`] when it
    /// was deleted, or its id now belongs to another queue or group.
    pub(crate) async fn verify(&self) -> Result<()> {
        match self {
            Source::Queue(q) => {
                still_there(q, q.client().probe(&[q.id()]).await?.first())?;
            }
            Source::Group(g) => {
                let signals = g.topic().client().probe_groups(&[g.id()]).await?;
                group_still_there(g, signals.first())?;
            }
        }
        Ok(())
    }

    /// The label a metric carries: `queue` or `group`, with [`Source::name`] as the value.
    pub(crate) fn metric_label(&self) -> (&'static str, String) {
        match self {
            Source::Queue(_) => ("queue", self.name()),
            Source::Group(_) => ("group", self.name()),
        }
    }
}

crate::consume::methods::consume_methods!(Source, "source::Source");

/// The probe's answer for `queue`'s id (`None`: no row has it), if it is still that queue:
/// else [`Error::Deleted`].
pub(crate) fn still_there<'a, B: Backend>(
    queue: &Queue<B>,
    signal: Option<&'a QueueSignal>,
) -> Result<&'a QueueSignal> {
    match signal {
        Some(s) if s.name == queue.name() => Ok(s),
        other => Err(Error::Deleted {
            what: format!("queue {:?}", queue.name()),
            now: other.map(|s| format!("queue {:?}", s.name)),
        }),
    }
}

/// [`still_there`] for a consumer group.
pub(crate) fn group_still_there<'a, B: Backend>(
    group: &Group<B>,
    signal: Option<&'a GroupSignal>,
) -> Result<&'a GroupSignal> {
    let of = |topic: &str, group: &str| format!("consumer group {group:?} of topic {topic:?}");
    match signal {
        Some(s) if s.group == group.name() && s.topic == group.topic().name() => Ok(s),
        other => Err(Error::Deleted {
            what: of(group.topic().name(), group.name()),
            now: other.map(|s| of(&s.topic, &s.group)),
        }),
    }
}
