//! Broadcast members in the worker: every record of every partition runs through the member's
//! handler, in offset order within a partition, one record at a time per partition.
//!
//! A broadcast group has no leases and no shared retry ladder: each member owns its position.
//! So a member is run by one task per partition that reads from its position, handles a record
//! (retrying a failure in place, on the group's backoff, which holds back only that partition),
//! and moves on; partitions run in parallel up to the member's concurrency. The position is
//! checkpointed after successes (every record, or every N records or interval), so a member
//! killed and restarted under the same name repeats at most what followed its last checkpoint
//! and never skips a record. After the group's max attempts a record becomes the member's dead
//! letter, written in the same transaction that moves the position past it. Attempts are
//! counted in memory: a restart begins a record's attempts again.
//!
//! Shutdown follows the worker's protocol: partition tasks stop starting records, running
//! handlers finish within the grace period (or are stopped, their records not passed), each
//! task checkpoints and exits, and the drain waits for all of them.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures_util::FutureExt;
use rand::RngExt;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::budget::Budget;
use super::consumer::Slots;
use super::context::JobContext;
use super::execute::{Finished, Settled, panic_text};
use super::handler::{DynHandler, Outcome};
use super::tally::Tally;
use crate::client::Subject;
use crate::client::delay::PollDelay;
use crate::domain::{AttemptError, Delivery, Error, Result, StreamRecord, validate_name};
use crate::outage::{Outage, sleep_unless_stopped};
use crate::store::Backend;
use crate::telemetry;
use crate::topic::Group;
use tracing::Instrument;

/// Records read from a partition at once (handled one by one).
const READ_BATCH: usize = 100;
/// How often a member looks for partitions added to its topic.
const PARTITION_CHECK: Duration = Duration::from_secs(5);
/// An idle member refreshes its checkpoint this often, so that lag reports see it alive.
pub(crate) const MEMBER_SEEN_INTERVAL: Duration = Duration::from_secs(30);
/// Error texts kept per record (the most recent).
const KEPT_ERRORS: usize = 20;

/// A broadcast member the worker runs: `topic/group` as `member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberSpec {
    pub topic: String,
    pub group: String,
    pub member: String,
}

impl MemberSpec {
    pub(crate) fn validate(&self) -> Result<()> {
        validate_name("topic", &self.topic)?;
        validate_name("group", &self.group)?;
        validate_name("member", &self.member)
    }

    /// `topic/group`, as per-source settings and logs name it.
    pub(crate) fn label(&self) -> String {
        format!("{}/{}", self.topic, self.group)
    }
}

/// When a member saves its position: after `every` handled records, or when `interval` has
/// passed since the last save with records handled since.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Checkpointing {
    pub every: u64,
    pub interval: Duration,
}

/// What every partition task of one member shares.
pub(crate) struct MemberRuntime<B: Backend> {
    pub group: Group<B>,
    pub member: String,
    pub handler: Box<dyn DynHandler<B>>,
    pub timeout: Duration,
    pub checkpointing: Checkpointing,
    pub poll: (Duration, Duration),
    pub stop_when_drained: bool,
    /// Handlers running at once (the member's concurrency).
    pub running: Arc<Semaphore>,
    /// One permit per live partition task: the shutdown drain waits for all of them.
    pub alive: Arc<Slots>,
    pub budget: Arc<Budget>,
    pub tally: Arc<Tally>,
    pub kill: watch::Receiver<bool>,
    pub handler_seconds: metrics::Histogram,
    /// An error retrying cannot fix, met by a partition task; the worker stops and reports it.
    pub fatal: Mutex<Option<Error>>,
    /// Partition tasks running, and a wakeup when one ends.
    pub live: AtomicUsize,
    pub exited: Notify,
}

/// Run one member: a task per partition (more as partitions are added), until `stop`, or
/// until every partition is drained when so configured. Returns the first error retrying
/// cannot fix, after `stop` was cancelled for it.
pub(crate) async fn run_member<B: Backend>(
    rt: Arc<MemberRuntime<B>>,
    stop: CancellationToken,
) -> Result<()> {
    let mut started = std::collections::HashSet::new();
    loop {
        // The member's checkpoint, else the group's start; partitions added since at 0.
        let reading = Instant::now();
        let reader = match rt.group.reader(&rt.member).await {
            Ok(reader) => Some(reader),
            Err(e) if e.is_retryable() => {
                if !rt.group.topic().client().outage().failed_since(&e, reading) {
                    tracing::warn!(group = rt.group.label(), "cannot read positions: {e}");
                }
                None
            }
            Err(e) => {
                stop.cancel();
                return Err(e);
            }
        };
        for (p, at) in reader.map(|r| r.positions()).unwrap_or_default() {
            if !started.insert(p) {
                continue;
            }
            let Some(permit) = rt.alive.hold() else {
                tracing::error!(group = rt.group.label(), "more partitions than tasks");
                break;
            };
            rt.live.fetch_add(1, Ordering::SeqCst);
            let (rt, stop) = (Arc::clone(&rt), stop.clone());
            tokio::spawn(async move {
                run_partition(&rt, p, at, &stop).await;
                drop(permit);
                rt.live.fetch_sub(1, Ordering::SeqCst);
                rt.exited.notify_one();
            });
        }
        let check = tokio::time::sleep(PARTITION_CHECK);
        tokio::pin!(check);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return rt.fatal.lock().expect("poisoned").take().map_or(Ok(()), Err),
                _ = &mut check => break,
                // (a stored notification wakes this even if several tasks ended meanwhile)
                _ = rt.exited.notified() => {
                    if rt.stop_when_drained && rt.live.load(Ordering::SeqCst) == 0 {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// How handling one record ended.
enum Handled {
    /// Handled (or dead-lettered); `saved`: the position past it is already stored.
    Passed { saved: bool },
    /// Stopped first: the record was not passed.
    Stopped,
}

/// One partition's position: the next offset to handle, and what is checkpointed of it.
struct Position {
    partition: u32,
    next: i64,
    /// The stored checkpoint (`None`: not stored by this task yet).
    saved: Option<i64>,
    /// Records passed since the last checkpoint.
    unsaved: u64,
    last_save: Instant,
}

impl Position {
    /// The record at `offset` passed; `stored`: its position is checkpointed already.
    fn passed(&mut self, offset: i64, stored: bool) {
        self.next = offset + 1;
        if stored {
            self.saved = Some(self.next);
            self.unsaved = 0;
            self.last_save = Instant::now();
        } else {
            self.unsaved += 1;
        }
    }

    fn dirty(&self) -> bool {
        self.saved != Some(self.next)
    }

    /// Checkpoint now if `due`. A failure is logged and leaves it to the next save (a crash before then repeats the records since the last
    /// one: at-least-once).
    async fn save_if<B: Backend>(&mut self, rt: &MemberRuntime<B>, due: bool) {
        if !due {
            return;
        }
        let saved = rt
            .group
            .save_member_position(&rt.member, self.partition, self.next)
            .await;
        match saved {
            Ok(()) => {
                self.saved = Some(self.next);
                self.unsaved = 0;
                self.last_save = Instant::now();
            }
            Err(e) => tracing::warn!(
                group = rt.group.label(),
                member = rt.member,
                "checkpoint failed: {e}"
            ),
        }
    }
}

/// One partition of one member: read, handle in order, checkpoint; until `stop`.
async fn run_partition<B: Backend>(
    rt: &MemberRuntime<B>,
    partition: u32,
    next: i64,
    stop: &CancellationToken,
) {
    let client = rt.group.topic().client();
    let wakeup = client.wakeup(Subject::Topic(rt.group.topic().id()));
    let mut at = Position {
        partition,
        next,
        saved: None,
        unsaved: 0,
        last_save: Instant::now(),
    };
    let mut delay = PollDelay::new(rt.poll.0, rt.poll.1);
    let mut failures = 0u32;
    'reading: while !stop.is_cancelled() {
        let notified = wakeup.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let read = async {
            let mut conn = client.conns().read().await?;
            rt.group
                .read_partition(&mut conn, &rt.member, partition as i32, at.next, READ_BATCH)
                .await
        };
        let started = Instant::now();
        let (batch, after) = match read.await {
            Ok(read) => read,
            Err(e) => {
                if !pause_after(rt, e, started, &mut failures, stop).await {
                    break;
                }
                continue;
            }
        };
        failures = 0;
        client.outage().succeeded();
        if batch.is_empty() {
            at.next = after; // (past records retention removed, if any)
            match rt.group.topic().sequence_pending().await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(group = rt.group.label(), "sequencing failed: {e}"),
            }
            // Idle: save what passed, and show the member alive now and then.
            let due = at.dirty() || at.last_save.elapsed() >= MEMBER_SEEN_INTERVAL;
            at.save_if(rt, due).await;
            if rt.stop_when_drained {
                break;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(delay.next_delay()) => {}
                _ = stop.cancelled() => break,
            }
            continue;
        }
        delay.reset();
        for record in batch {
            if stop.is_cancelled() {
                break 'reading;
            }
            let Some(reserved) = rt.budget.reserve(1, stop).await else {
                // The worker's message budget is spent: the whole worker is done.
                stop.cancel();
                break 'reading;
            };
            let offset = record.offset;
            match handle(rt, record, stop).await {
                Handled::Passed { saved } => {
                    at.passed(offset, saved);
                    if reserved.spend(1) {
                        // That was the last record of the worker's budget: do not wait for
                        // another.
                        stop.cancel();
                    }
                }
                // (the reservation goes back)
                Handled::Stopped => break 'reading,
            }
            let due = at.unsaved >= rt.checkpointing.every
                || at.last_save.elapsed() >= rt.checkpointing.interval;
            at.save_if(rt, at.dirty() && due).await;
        }
    }
    at.save_if(rt, at.dirty()).await;
}

/// Wait after a failed read; false when the error cannot be fixed by retrying (the worker is
/// stopped with it) or `stop` came first.
async fn pause_after<B: Backend>(
    rt: &MemberRuntime<B>,
    e: Error,
    started: Instant,
    failures: &mut u32,
    stop: &CancellationToken,
) -> bool {
    if !e.is_retryable() {
        tracing::error!(
            group = rt.group.label(),
            member = rt.member,
            "member stopped: {e}"
        );
        rt.fatal.lock().expect("poisoned").get_or_insert(e);
        stop.cancel();
        return false;
    }
    *failures += 1;
    if !rt.group.topic().client().outage().failed_since(&e, started) {
        tracing::warn!(group = rt.group.label(), "read failed, retrying: {e}");
    }
    sleep_unless_stopped(Outage::pause(*failures), stop).await
}

/// Run `record` through the handler until it passes: retried in place on the group's backoff
/// after failures, dead-lettered for this member after the group's max attempts.
async fn handle<B: Backend>(
    rt: &MemberRuntime<B>,
    record: StreamRecord,
    stop: &CancellationToken,
) -> Handled {
    let config = rt.group.config();
    let mut attempt = 1u32;
    let mut errors: Vec<AttemptError> = Vec::new();
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&rt.running).acquire_owned() => permit.expect("never closed"),
            _ = stop.cancelled() => return Handled::Stopped,
        };
        let (finished, ctx) = run_handler(rt, &record, attempt, permit).await;
        if ctx.acked() {
            // The handler's JobTransaction moved the position with its own writes.
            rt.tally.add(Settled::Acked, 1);
            return Handled::Passed { saved: true };
        }
        let (error, after) = match finished {
            Finished::Answer(Ok(Outcome::Done | Outcome::Settled)) => {
                rt.tally.add(Settled::Acked, 1);
                return Handled::Passed { saved: false };
            }
            Finished::Answer(Ok(Outcome::Snooze(wait))) => {
                rt.tally.add(Settled::Snoozed, 1);
                if !sleep_unless_stopped(wait, stop).await {
                    return Handled::Stopped;
                }
                continue; // a snooze is not an attempt
            }
            Finished::Answer(Ok(Outcome::DeadLetter(reason))) => {
                errors.push(attempt_error(attempt, reason));
                return give_up(rt, &record, attempt, &errors, stop).await;
            }
            Finished::Answer(Ok(Outcome::Retry { after, reason })) => (reason, Some(after)),
            Finished::Answer(Err(error)) => (error, None),
            Finished::Panicked(text) => (format!("handler panicked: {text}"), None),
            Finished::TimedOut => (format!("handler timed out after {:?}", rt.timeout), None),
            // (records carry no deadline: never supervised to one)
            Finished::TimeUp => ("time up".to_owned(), None),
            Finished::Killed => {
                rt.tally.add(Settled::Released, 1);
                return Handled::Stopped;
            }
        };
        errors.push(attempt_error(attempt, error));
        if errors.len() > KEPT_ERRORS {
            errors.remove(0);
        }
        if attempt >= config.max_attempts {
            return give_up(rt, &record, attempt, &errors, stop).await;
        }
        rt.tally.add(Settled::Retried, 1);
        let unit = rand::rng().random_range(0.0..1.0);
        let wait = after.unwrap_or_else(|| config.backoff.delay(attempt, unit));
        if !sleep_unless_stopped(wait, stop).await {
            return Handled::Stopped;
        }
        attempt += 1;
    }
}

/// One attempt: the handler under `catch_unwind`, its timeout and the worker's kill signal.
async fn run_handler<B: Backend>(
    rt: &MemberRuntime<B>,
    record: &StreamRecord,
    attempt: u32,
    _permit: OwnedSemaphorePermit,
) -> (Finished, JobContext<B>) {
    let mut delivery = Delivery {
        id: record.id,
        // No lease, so nothing to fence: every member handles every record.
        token: 0,
        attempt,
        priority: 0,
        ordering_key: record.key.clone(),
        concurrency_key: None,
        idempotency_key: None,
        headers: record.headers.clone(),
        body: record.body.clone(),
        enqueued_at: record.published_at,
        lease_expires_at: SystemTime::now() + rt.timeout,
        deadline: None,
        run_timeout: None,
        partition: Some(record.partition),
        offset: Some(record.offset),
        tracked: false,
        claimed_at: SystemTime::now(),
    };
    let ctx = JobContext::for_member(rt.group.clone(), rt.member.clone(), &mut delivery);
    // The handler's span continues the trace the record was published in (`telemetry/mod.rs`).
    let destination = telemetry::GroupName(rt.group.topic().name(), rt.group.name());
    let span = telemetry::process(&destination, &delivery);
    let started = Instant::now();
    let call =
        AssertUnwindSafe(rt.handler.call(delivery, ctx.clone()).instrument(span)).catch_unwind();
    let mut kill = rt.kill.clone();
    let finished = tokio::select! {
        answer = call => match answer {
            Ok(answer) => Finished::Answer(answer),
            Err(payload) => Finished::Panicked(panic_text(payload)),
        },
        _ = tokio::time::sleep(rt.timeout) => Finished::TimedOut,
        // (the guard `wait_for` returns is not Send: drop it inside the branch future)
        true = async { kill.wait_for(|k| *k).await.is_ok() } => Finished::Killed,
    };
    rt.handler_seconds.record(started.elapsed().as_secs_f64());
    (finished, ctx)
}

fn attempt_error(attempt: u32, error: String) -> AttemptError {
    AttemptError {
        attempt,
        at: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
        error,
    }
}

/// Record the member's dead letter and pass the record (retrying the write until it lands
/// or `stop`: the record is never passed without its dead letter).
async fn give_up<B: Backend>(
    rt: &MemberRuntime<B>,
    record: &StreamRecord,
    attempts: u32,
    errors: &[AttemptError],
    stop: &CancellationToken,
) -> Handled {
    let mut failures = 0u32;
    loop {
        let started = Instant::now();
        match rt
            .group
            .member_gives_up(&rt.member, record, attempts, errors)
            .await
        {
            Ok(()) => {
                tracing::warn!(
                    group = rt.group.label(),
                    member = rt.member,
                    partition = record.partition,
                    offset = record.offset,
                    attempts,
                    "record dead-lettered for this member"
                );
                rt.tally.add(Settled::DeadLettered, 1);
                return Handled::Passed { saved: true };
            }
            Err(e) => {
                if !pause_after(rt, e, started, &mut failures, stop).await {
                    return Handled::Stopped;
                }
            }
        }
    }
}
