//! Waking up without LISTEN/NOTIFY: the worker's prober, which runs one query per tick for all
//! of a process's queues (and one for all of its consumer groups), on the client's adaptive
//! delay (`client/delay.rs`). While the client's notifications are live
//! (`client/notifications.rs`) commits elsewhere wake the consumers directly, the prober's
//! ceiling rises to three seconds, and it probes a moment after each notification of its
//! sources.
//!
//! While messages keep coming, consumers claim back to back and never wait. A consumer that
//! finds its queue empty waits for a wakeup: a send through the same client (in-process
//! `Notify`, after the send's commit), or the prober finding ready messages. The prober's delay
//! starts at the floor (10 ms) whenever work was found and doubles up to the ceiling while
//! nothing is found, so an idle process costs about one query per ceiling. The same probe says
//! which queues have due delayed messages or expired leases; the prober then runs that queue's
//! maintenance, at least every maintenance interval even when no consumer is idle. For consumer
//! groups the probe also says which topics have records waiting for their offsets (published
//! in a caller's transaction, or by a process that died before sequencing them): the group's
//! maintenance sequences them; and each group's housekeeping (consume-timeout alerts,
//! retention) runs from here at its own interval.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::Subject;
use crate::client::delay::PollDelay;
use crate::domain::Error;
use crate::source::{Source, group_still_there, still_there};
use crate::store::Backend;
use crate::store::follow::Change;
use crate::store::rows::GroupSignal;
use crate::topic::Group;

/// Shared between the consumers and the prober of one worker.
#[derive(Default)]
pub(crate) struct PollState {
    /// Consumers currently waiting for work.
    pub idle: AtomicUsize,
    /// Set by a consumer whose claim found messages: keeps the prober at its floor.
    pub activity: AtomicBool,
    /// Fired when a consumer starts waiting: a prober that was sleeping its long maintenance
    /// interval (nobody was idle) must re-plan at once.
    pub became_idle: Notify,
    /// A source the prober found deleted, or whose id went to another ([`Error::Deleted`]):
    /// the worker stopped claiming for it, and reports it once stopped.
    gone: Mutex<Option<Error>>,
}

impl PollState {
    /// A consumer starts waiting for work.
    pub(crate) fn enter_idle(&self) {
        self.idle.fetch_add(1, Ordering::Relaxed);
        self.became_idle.notify_one();
    }

    /// A consumer stops waiting.
    pub(crate) fn leave_idle(&self) {
        self.idle.fetch_sub(1, Ordering::Relaxed);
    }

    /// A source is gone: keep the first such error and stop every claim loop through
    /// `claims`.
    fn source_gone(&self, e: Error, claims: &CancellationToken) {
        tracing::error!("claiming stopped: {e}");
        self.gone.lock().expect("poisoned").get_or_insert(e);
        claims.cancel();
    }

    /// The source found gone, if any.
    pub(crate) fn take_gone(&self) -> Option<Error> {
        self.gone.lock().expect("poisoned").take()
    }
}

/// The prober's settings.
pub(crate) struct ProberConfig {
    pub floor: Duration,
    pub ceiling: Duration,
    pub maintenance_interval: Duration,
}

/// Probe the worker's queues and groups until `stop`; wake consumers, run maintenance. Each
/// probe also says whether every source is still the one of its name: one deleted, or whose id
/// went to another queue or group (a re-created or restored database), stops the worker's
/// claims (`claims`) before anything of it is woken or maintained.
pub(crate) async fn run_prober<B: Backend>(
    sources: Vec<Source<B>>,
    state: Arc<PollState>,
    config: ProberConfig,
    stop: CancellationToken,
    claims: CancellationToken,
) {
    let Some(first) = sources.first() else { return };
    let client = first.client().clone();
    let (mut queues, mut groups) = (Vec::new(), Vec::new());
    for source in sources {
        match source {
            Source::Queue(q) => queues.push(q),
            Source::Group(g) => groups.push(g),
        }
    }
    let ids: Vec<i32> = queues.iter().map(|q| q.id()).collect();
    let topics: Vec<i32> = groups.iter().map(|g| g.topic().id()).collect();
    let notes = &client.inner.wake.notifications;
    client.ensure_follower();
    let mut news = notes.subscribe();
    let concerns =
        |change: Change| change.concerns(|id| ids.contains(&id), |id| topics.contains(&id));
    let mut delay = PollDelay::new(config.floor, notes.ceiling(config.ceiling));
    loop {
        if state.activity.swap(false, Ordering::Relaxed) {
            delay.reset();
        }
        // Notifications going live or lost change how long the prober may sleep.
        delay.set_bounds(config.floor, notes.ceiling(config.ceiling));
        let anyone_idle = state.idle.load(Ordering::Relaxed) > 0;
        let wait = if anyone_idle {
            delay.next_delay()
        } else {
            config.maintenance_interval
        };
        // News matters only to idle consumers: busy ones claim again by themselves (and on
        // SQLite every commit of this very process is news). A delayed message's time is kept
        // whatever: the consumers may be idle when it comes due.
        let heed = |change| match change {
            Change::Due { .. } => concerns(change),
            _ => anyone_idle && concerns(change),
        };
        tokio::select! {
            _ = news.sleep(wait, heed) => {}
            // Nobody was idle, so the wait was the long maintenance interval: re-plan now that
            // a consumer waits for work.
            _ = state.became_idle.notified(), if !anyone_idle => continue,
            _ = stop.cancelled() => return,
        }
        let started = std::time::Instant::now();
        let groups_seen = probe_groups(&groups).await;
        let queues_seen = match client.probe(&ids).await {
            Ok(s) => {
                client.outage().succeeded();
                Some(s)
            }
            Err(e) => {
                if !client.outage().failed_since(&e, started) {
                    tracing::warn!("probe failed: {e}");
                }
                None
            }
        };
        // Every source still the one of its name, before anything of any is woken or
        // maintained.
        let queue_signals = (queues_seen.as_deref())
            .map(|s| all_still_there(&queues, s, |q, s| s.queue_id == q.id(), still_there))
            .transpose();
        let group_signals = (groups_seen.as_deref())
            .map(|s| all_still_there(&groups, s, |g, s| s.group_id == g.id(), group_still_there))
            .transpose();
        let (queue_signals, group_signals) = match (queue_signals, group_signals) {
            (Ok(q), Ok(g)) => (q, g),
            (Err(gone), _) | (_, Err(gone)) => {
                state.source_gone(gone, &claims);
                return;
            }
        };
        if let Some(signals) = group_signals
            && wake_groups(&signals).await
        {
            delay.reset();
        }
        for (queue, signal) in queue_signals.unwrap_or_default() {
            let mut ready = signal.ready;
            if signal.needs_maintenance() {
                match queue.maintain().await {
                    Ok(report) => ready |= report.promoted + report.released > 0,
                    Err(e) => tracing::warn!(queue = queue.name(), "maintenance failed: {e}"),
                }
            }
            if ready {
                delay.reset();
                client.notify_local(crate::client::Subject::Queue(queue.id()));
            }
        }
        if let Err(e) = client.prune_dedup_if_due().await {
            tracing::warn!("pruning idempotency keys failed: {e}");
        }
    }
}

/// Probe `groups` (one query); `None` when the probe failed (logged).
async fn probe_groups<B: Backend>(groups: &[Group<B>]) -> Option<Vec<GroupSignal>> {
    let Some(first) = groups.first() else {
        return Some(Vec::new());
    };
    let ids: Vec<i32> = groups.iter().map(|g| g.id()).collect();
    let started = std::time::Instant::now();
    match first.topic().client().probe_groups(&ids).await {
        Ok(s) => Some(s),
        Err(e) => {
            if !first.topic().client().outage().failed_since(&e, started) {
                tracing::warn!("group probe failed: {e}");
            }
            None
        }
    }
}

/// Each source with the probe's answer for it (the one `answers` says is its), if every one is
/// still the one of its name (`check`: [`still_there`], [`group_still_there`]).
fn all_still_there<'a, S, T>(
    sources: &'a [S],
    signals: &'a [T],
    answers: impl Fn(&S, &T) -> bool,
    check: impl Fn(&S, Option<&'a T>) -> Result<&'a T, Error>,
) -> Result<Vec<(&'a S, &'a T)>, Error> {
    sources
        .iter()
        .map(|source| {
            let signal = signals.iter().find(|t| answers(source, t));
            Ok((source, check(source, signal)?))
        })
        .collect()
}

/// Run the maintenance of the groups with expired leases or records waiting for offsets,
/// their housekeeping when due, and wake their local consumers when there is work. Returns
/// whether there was.
async fn wake_groups<B: Backend>(groups: &[(&Group<B>, &GroupSignal)]) -> bool {
    let mut work = false;
    for (group, signal) in groups {
        let mut ready = signal.ready;
        if signal.expired || signal.pending {
            match group.maintain().await {
                Ok(report) => ready |= report.sequenced + report.released > 0,
                Err(e) => tracing::warn!(group = group.label(), "maintenance failed: {e}"),
            }
        } else if let Err(e) = group.housekeeping_if_due().await {
            tracing::warn!(group = group.label(), "housekeeping failed: {e}");
        }
        if ready {
            work = true;
            group
                .topic()
                .client()
                .notify_local(Subject::Topic(group.topic().id()));
        }
    }
    work
}
