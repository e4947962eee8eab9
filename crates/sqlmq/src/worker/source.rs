//! Where a worker's messages come from: a queue, or a cluster-mode consumer group of a topic.
//!
//! Both settle the same way (lease, fencing token, ack, nack on a retry policy, snooze, dead
//! letter), so the worker runs them through one enum instead of two runtimes; only the claim,
//! the wakeup subject and maintenance differ.

use std::time::Duration;

use sqlx::MySqlConnection;

use crate::client::{Client, Subject};
use crate::domain::AckReport;
use crate::domain::NackOutcome;
use crate::domain::Result;
use crate::domain::validate_name;
use crate::domain::{Delivery, Receipt};
use crate::queue::Queue;
use crate::topic::Group;

/// A queue or a consumer group, resolved and ready to consume.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    Queue(Queue),
    Group(Group),
}

/// Dispatch one call to the queue or the group (same method names and signatures).
macro_rules! either {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            Source::Queue($s) => $call,
            Source::Group($s) => $call,
        }
    };
}

impl Source {
    /// The queue's name, or `topic/group`: the name in logs, metrics and per-source settings.
    pub(crate) fn name(&self) -> String {
        match self {
            Source::Queue(q) => q.name().to_owned(),
            Source::Group(g) => g.label(),
        }
    }

    /// The label a metric carries: `queue` or `group`, with [`Source::name`] as the value.
    pub(crate) fn metric_label(&self) -> (&'static str, String) {
        match self {
            Source::Queue(_) => ("queue", self.name()),
            Source::Group(_) => ("group", self.name()),
        }
    }

    pub(crate) fn client(&self) -> &Client {
        match self {
            Source::Queue(q) => q.client(),
            Source::Group(g) => g.topic().client(),
        }
    }

    /// What local producers notify when there is something new to claim.
    pub(crate) fn subject(&self) -> Subject {
        match self {
            Source::Queue(q) => Subject::Queue(q.id()),
            Source::Group(g) => Subject::Topic(g.topic().id()),
        }
    }

    pub(crate) async fn claim(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        match self {
            Source::Queue(q) => q.claim(n, lease).await,
            // (an empty claim is rare in a worker: it waits for a wakeup before claiming again)
            Source::Group(g) => g.claim_or_sequence(n, lease).await,
        }
    }

    pub(crate) async fn ack_batch(&self, receipts: &[Receipt]) -> Result<AckReport> {
        either!(self, s => s.ack_batch(receipts).await)
    }

    pub(crate) async fn ack_in(&self, conn: &mut MySqlConnection, receipt: Receipt) -> Result<()> {
        either!(self, s => s.ack_in(conn, receipt).await)
    }

    pub(crate) async fn extend(&self, receipt: Receipt, lease: Duration) -> Result<()> {
        either!(self, s => s.extend(receipt, lease).await)
    }

    pub(crate) async fn nack(
        &self,
        receipt: Receipt,
        retry_in: Option<Duration>,
        error: &str,
    ) -> Result<NackOutcome> {
        either!(self, s => s.nack(receipt, retry_in, error).await)
    }

    pub(crate) async fn snooze(&self, receipt: Receipt, after: Duration) -> Result<()> {
        either!(self, s => s.snooze(receipt, after).await)
    }

    pub(crate) async fn dead_letter(&self, receipt: Receipt, error: &str) -> Result<()> {
        either!(self, s => s.dead_letter(receipt, error).await)
    }
}

/// A source as named in a [`WorkerBuilder`](super::WorkerBuilder), resolved when the worker
/// starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SourceSpec {
    Queue(String),
    Group { topic: String, group: String },
}

impl SourceSpec {
    pub(crate) fn group(topic: &str, group: &str) -> SourceSpec {
        SourceSpec::Group {
            topic: topic.to_owned(),
            group: group.to_owned(),
        }
    }

    /// The name per-source settings use: the queue's name, or `topic/group`.
    pub(crate) fn key(&self) -> String {
        match self {
            SourceSpec::Queue(name) => name.clone(),
            SourceSpec::Group { topic, group } => format!("{topic}/{group}"),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            SourceSpec::Queue(name) => validate_name("queue", name),
            SourceSpec::Group { topic, group } => {
                validate_name("topic", topic)?;
                validate_name("group", group)
            }
        }
    }

    /// Look the source up: an unknown queue, topic or group is an error, and so is a broadcast
    /// group (its members read every record with a `BroadcastReader`; there is nothing to
    /// ack).
    pub(crate) async fn resolve(&self, client: &Client) -> Result<Source> {
        match self {
            SourceSpec::Queue(name) => Ok(Source::Queue(client.queue(name).await?)),
            SourceSpec::Group { topic, group } => {
                let group = client.topic(topic).await?.group(group).await?;
                group.require_cluster()?;
                Ok(Source::Group(group))
            }
        }
    }
}
