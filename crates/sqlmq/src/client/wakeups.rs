//! In-process wakeups after local commits, and the schedules of housekeeping.
//!
//! MySQL has no LISTEN/NOTIFY. A worker's consumers wait on a `Notify` per queue or topic, which
//! this client fires after its own sends commit (and after its sequencer gives records their
//! offsets); polling stays the authority for everything committed elsewhere. Housekeeping
//! (promotion, expiry, retention, pruning) runs from whichever call finds it due, so that a
//! client without a maintenance service still keeps its queues moving.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Client, Watched};
use crate::domain::{Result, micros_of};
use crate::store::Backend;
use crate::tx;

/// Interval between prunes of expired idempotency keys (per client).
const DEDUP_PRUNE_INTERVAL: Duration = Duration::from_secs(60);
/// Idempotency keys deleted per prune.
const DEDUP_PRUNE_BATCH: usize = 1000;

/// Who waits for what in this process: a worker's consumers (a `Notify` per subject, fired
/// after this client's own commits), long polls (the waitroom) and the follower of the
/// database's commits that wakes both for other processes' commits.
pub(crate) struct Wake {
    pub local: Mutex<HashMap<Subject, Arc<Notify>>>,
    pub waitroom: super::waitroom::Waitroom,
    pub notifications: super::notifications::Notifications,
}

/// When housekeeping last ran: per subject, and the prune of idempotency keys and flows.
pub(crate) struct Housekeeping {
    pub last: Mutex<HashMap<Subject, Instant>>,
    pub last_prune: Mutex<Instant>,
    /// Where the next look for journals whose message is gone starts (`None`: the first).
    pub journal_cursor: Mutex<Option<crate::domain::MessageId>>,
}

impl Default for Housekeeping {
    fn default() -> Self {
        Housekeeping {
            last: Mutex::default(),
            last_prune: Mutex::new(Instant::now()),
            journal_cursor: Mutex::default(),
        }
    }
}

/// Work a background task owes one subject: the partitions written since it last ran and
/// what wakes it. A topic's sequencer (`topic/sequencer.rs`) runs on one.
#[derive(Default)]
pub(crate) struct Backlog {
    pub wake: Notify,
    pub dirty: Mutex<BTreeSet<i32>>,
}

/// What in-process wakeups and housekeeping times are kept for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Subject {
    /// A queue, by id: woken by local sends.
    Queue(i32),
    /// A topic, by id: woken when local sequencing gave records their offsets (or a local
    /// publish did, where offsets are given at publish).
    Topic(i32),
    /// A consumer group, by id (housekeeping).
    Group(i32),
    /// The schedules: woken when this client creates, changes or resumes one.
    Schedules,
    /// A queue's cancels of in-flight messages, by queue id: woken by local cancels and by
    /// those the follower of the database's commits saw (`worker/cancel.rs`).
    Cancels(i32),
}

impl<B: Backend> Client<B> {
    /// The in-process wakeup of `subject` (created on first use).
    pub(crate) fn wakeup(&self, subject: Subject) -> Arc<Notify> {
        let mut map = self.inner.wake.local.lock().expect("poisoned");
        map.entry(subject).or_default().clone()
    }

    /// Wake this process's consumers of `subject`, if any wait: a worker's, and the first in
    /// line of each long poll on it.
    pub(crate) fn notify_local(&self, subject: Subject) {
        if let Some(n) = self
            .inner
            .wake
            .local
            .lock()
            .expect("poisoned")
            .get(&subject)
        {
            n.notify_waiters();
        }
        match subject {
            Subject::Queue(id) => self.inner.wake.waitroom.call(Watched::Queue(id)),
            Subject::Topic(id) => self.inner.wake.waitroom.call_topic(id),
            Subject::Group(_) | Subject::Schedules | Subject::Cancels(_) => {}
        }
    }

    /// Wake this process's watcher of the queue's cancels (`worker/cancel.rs`).
    pub(crate) fn notify_cancel(&self, queue_id: i32) {
        self.notify_local(Subject::Cancels(queue_id));
    }

    /// Wake every watcher of cancels in this process: a commit whose place is not known (the
    /// SQLite follower's news) may have been a cancel.
    pub(crate) fn notify_all_cancels(&self) {
        let local = self.inner.wake.local.lock().expect("poisoned");
        for (subject, notify) in local.iter() {
            if matches!(subject, Subject::Cancels(_)) {
                notify.notify_waiters();
            }
        }
    }

    /// Whether `subject`'s housekeeping is due (last run `interval` ago or never); if so, the
    /// run is recorded as starting now, so that concurrent callers do not all run it.
    pub(crate) fn due(&self, subject: Subject, interval: Duration) -> bool {
        let mut last = self.inner.housekeeping.last.lock().expect("poisoned");
        let now = Instant::now();
        match last.get(&subject) {
            Some(t) if now.duration_since(*t) < interval => false,
            _ => {
                last.insert(subject, now);
                true
            }
        }
    }

    /// Forget `subject` (it was deleted).
    pub(crate) fn forget(&self, subject: Subject) {
        self.inner
            .housekeeping
            .last
            .lock()
            .expect("poisoned")
            .remove(&subject);
        self.inner
            .wake
            .local
            .lock()
            .expect("poisoned")
            .remove(&subject);
    }

    /// Delete idempotency keys whose window has passed, if the last prune is a minute old.
    pub(crate) async fn prune_dedup_if_due(&self) -> Result<usize> {
        {
            let mut last = self.inner.housekeeping.last_prune.lock().expect("poisoned");
            if last.elapsed() < DEDUP_PRUNE_INTERVAL {
                return Ok(0);
            }
            *last = Instant::now();
        }
        let store = self.store();
        let pruned = tx::run(self.conns(), "prune_dedup", |conn, _| {
            Box::pin(store.prune_dedup(conn, DEDUP_PRUNE_BATCH))
        })
        .await?;
        // Batches, dependencies and results past their retention, on the same schedule.
        let retention = micros_of(self.inner.settings.flow_retention);
        let flows = tx::run(self.conns(), "prune_flows", |conn, _| {
            Box::pin(async move {
                let now = B::now_us(store, conn).await?;
                store.prune_flows(conn, now - retention).await
            })
        })
        .await?;
        // Events past the same retention, and the journals of runs whose message is gone.
        let after = *self
            .inner
            .housekeeping
            .journal_cursor
            .lock()
            .expect("poisoned");
        let (events, journals, next) = tx::run(self.conns(), "prune_durable", |conn, _| {
            Box::pin(store.prune_durable(conn, after, DEDUP_PRUNE_BATCH))
        })
        .await?;
        *self
            .inner
            .housekeeping
            .journal_cursor
            .lock()
            .expect("poisoned") = next;
        Ok(pruned + flows + events as usize + journals)
    }
}
