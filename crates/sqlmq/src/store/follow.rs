//! Following the database's commits: the wake-up hints that spare waiting processes their
//! polls (MySQL's binary log, SQLite's write-ahead log).
//!
//! A follower only ever *wakes*: the woken claim decides, in its own transaction, what there
//! is. A change reported twice costs one claim that finds nothing; a change never reported
//! costs the latency of the slow fallback probe. Neither can lose or duplicate a message.

use std::future::Future;

use super::body::{Dialect, SqlStore};

/// What a commit changed, as far as waiting consumers care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Change {
    /// A queue, by id, got claimable messages (sent, made ready again, resumed).
    Queue(i32),
    /// A topic, by id, got records with offsets.
    Topic(i32),
    /// A queue, by id, got a delayed message that comes due at `at_us` (the database's clock,
    /// microseconds since the Unix epoch): waiting consumers of the queue should look then.
    Due { queue: i32, at_us: i64 },
    /// A queue, by id, had an in-flight message cancelled: its workers' cancel watchers should
    /// read its cancels (`worker/cancel.rs`). Nothing became claimable.
    Cancel(i32),
    /// Something changed, it is not known where: every source should be probed.
    Any,
}

impl Change {
    /// Whether the change concerns a waiter of the queues `queue` accepts or of the topics
    /// `topic` accepts (a change of unknown place concerns everyone).
    pub fn concerns(self, queue: impl Fn(i32) -> bool, topic: impl Fn(i32) -> bool) -> bool {
        match self {
            Change::Queue(id) | Change::Due { queue: id, .. } => queue(id),
            Change::Topic(id) => topic(id),
            Change::Cancel(_) => false,
            Change::Any => true,
        }
    }
}

/// What a follower reports, in commit order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Followed {
    /// Following from now on: every commit after this is reported. (What committed before,
    /// while nobody followed, the receiver probes for itself.)
    Live,
    /// A committed change.
    Change(Change),
}

/// Why a follower stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FollowEnd {
    /// The database cannot be followed as it is set up: the text says what to change. Tried
    /// again only rarely.
    Off(String),
    /// The connection or the stream was lost: tried again soon.
    Lost(String),
}

/// Following commits to sqlmq's tables.
pub trait Follow: Dialect {
    /// Follow the commits at `url` (the client's own URL) until the stream ends, reporting to
    /// `report` from the calling task. Never returns while the stream lives. Checks run on a
    /// connection of `pool` (the client's), so that only a live follower holds a connection
    /// beyond it.
    fn follow(
        store: &SqlStore<Self>,
        pool: &sqlx::Pool<Self>,
        url: &str,
        report: &(dyn Fn(Followed) + Send + Sync),
    ) -> impl Future<Output = FollowEnd> + Send;
}
