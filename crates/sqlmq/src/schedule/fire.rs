//! Firing due schedules: one pass ([`Client::fire_schedules`]) and the loop every long-running
//! process runs ([`Client::run_schedules`]).
//!
//! Each fire is one transaction: a compare-and-set moves the schedule's next fire time from
//! the one this process read to the one after now, and only if it did (one row changed) are
//! the fire times' messages sent, in the same transaction. Of any number of processes firing
//! the same fire time, exactly one changes the row: the others find it changed (or wait on its
//! row lock until the winner commits, then find it changed) and send nothing. A process killed
//! mid-fire never commits, so its row is unchanged and the next pass of any process fires that
//! fire time. "Now" is the database's clock, read in the transaction, so processes whose clocks
//! disagree agree on what is due.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::{Client, Subject};
use crate::domain::{
    FIRE_TIME_HEADER, Message, Plan, Record, Result, SCHEDULE_HEADER, ScheduleConfig,
    ScheduleTarget, plan, rfc3339,
};
use crate::queue::Queue;
use crate::store::Backend;
use crate::store::rows::{ScheduleAdvance, ScheduleRow};
use crate::topic::Topic;
use crate::tx;

/// Longest wait between two looks at the schedules table: how soon a schedule created or
/// resumed by another process is noticed (one made through the same client wakes the loop at
/// once). Each look is one small read, so an idle process spends 0.03 statements a second on
/// schedules: an idle worker with notifications live stays under one statement a second.
const SCHEDULE_IDLE_CHECK: Duration = Duration::from_secs(30);
/// Wait after a pass that left a schedule due (it could not fire) before the next.
const AFTER_FAILED_FIRE: Duration = Duration::from_secs(1);
/// Wait after a failed pass (the database unreachable, say) before the next.
const AFTER_ERROR: Duration = Duration::from_secs(5);

/// Where a schedule's fire times go.
enum Target<B: Backend> {
    Queue(Queue<B>),
    Topic(Topic<B>),
}

impl<B: Backend> Client<B> {
    /// Fire every due schedule once: each fire time due now (by the database clock) is sent by
    /// exactly one caller across all processes. Returns the messages and records this call
    /// sent. Long-running processes call it through [`Client::run_schedules`]; a one-off
    /// caller (a cron job, a test) may call it directly.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let fired = client.fire_schedules().await?;
    /// println!("{fired} fired");
    /// # Ok(()) }
    /// ```
    pub async fn fire_schedules(&self) -> Result<u64> {
        self.require_schema()?;
        let now = {
            let mut conn = self.conns().acquire().await?;
            B::now_us(self.store(), &mut conn).await?
        };
        self.fire_due(now).await
    }

    /// Fire every schedule due at `now` (µs, database clock).
    async fn fire_due(&self, now: i64) -> Result<u64> {
        let due = {
            let mut conn = self.conns().acquire().await?;
            self.store().due_schedules(&mut conn, now).await?
        };
        let mut fired = 0;
        for row in due {
            match self.fire(&row).await {
                Ok(n) => fired += n,
                Err(e) if e.is_retryable() => return Err(e),
                // One broken schedule (its queue deleted, say) does not hold back the others.
                Err(e) => tracing::warn!(schedule = %row.name, error = %e, "schedule not fired"),
            }
        }
        Ok(fired)
    }

    /// Fire schedules until `stop` is cancelled: a pass whenever the earliest next fire time
    /// comes, a schedule of this client changes, or 30 seconds have passed (how soon a
    /// schedule created or resumed elsewhere is noticed; one read a look). Errors
    /// are logged and the pass tried again later. Workers run this unless told not to
    /// ([`WorkerBuilder::fire_schedules`](crate::worker::WorkerBuilder::fire_schedules)), and so do
    /// `sqlmq consume`, `sqlmq subscribe` and `sqlmq serve`.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) {
    /// let stop = sqlmq::worker::CancellationToken::new();
    /// tokio::spawn({ let client = client.clone(); let stop = stop.clone();
    ///     async move { client.run_schedules(stop).await } });
    /// // ... later
    /// stop.cancel();
    /// # }
    /// ```
    pub async fn run_schedules(&self, stop: CancellationToken) {
        let changed = self.wakeup(Subject::Schedules);
        let mut failing = false;
        while !stop.is_cancelled() {
            // Registered before the pass, so that a change during it is not missed.
            let notified = changed.notified();
            let wait = match self.schedule_pass().await {
                Ok(wait) => {
                    if failing {
                        tracing::info!("schedules fire again");
                        failing = false;
                    }
                    wait
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "schedules cannot fire now; trying again");
                        failing = true;
                    }
                    AFTER_ERROR
                }
            };
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = notified => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Fire what is due, then how long to wait until the next fire time (at most
    /// [`SCHEDULE_IDLE_CHECK`]).
    async fn schedule_pass(&self) -> Result<Duration> {
        if self.schema_version() == 0 {
            return Ok(SCHEDULE_IDLE_CHECK);
        }
        let (mut next, mut now) = self.next_schedule_due().await?;
        if next.is_some_and(|next| next <= now) {
            self.fire_due(now).await?;
            (next, now) = self.next_schedule_due().await?;
            // Still due after the pass: a schedule that cannot fire (its queue deleted, say);
            // look again in a second rather than at once, again and again.
            if next.is_some_and(|next| next <= now) {
                return Ok(AFTER_FAILED_FIRE);
            }
        }
        Ok(until(next, now))
    }

    /// The earliest next fire time of the schedules not paused, and the database clock.
    async fn next_schedule_due(&self) -> Result<(Option<i64>, i64)> {
        let mut conn = self.conns().acquire().await?;
        self.store().next_schedule_due(&mut conn).await
    }

    /// Fire one due schedule: the compare-and-set, then its fire times' messages, in one
    /// transaction. Returns what was sent (0 when another process fired it first).
    async fn fire(&self, row: &ScheduleRow) -> Result<u64> {
        let config = ScheduleConfig::from_stored(&row.spec, row.body.clone())?;
        let target = match &config.target {
            ScheduleTarget::Queue(q) => Target::Queue(self.queue(q).await?),
            ScheduleTarget::Topic(t) => Target::Topic(self.topic(t).await?),
        };
        let store = self.store();
        let (config, target) = (&config, &target);
        let (sent, partitions) = tx::run(self.conns(), "schedule_fire", |conn, _| {
            Box::pin(async move {
                let now = B::now_us(store, conn).await?;
                let Plan { fires, next } = plan(config, row.next_fire, now)?;
                let advance = ScheduleAdvance {
                    name: &row.name,
                    expected: row.next_fire,
                    next,
                    last_fired: fires.last().copied(),
                    fired: fires.len() as i64,
                };
                let mut partitions = Vec::new();
                if !store.advance_schedule(conn, &advance).await? {
                    return Ok((0, partitions));
                }
                for &at in &fires {
                    partitions.extend(send(conn, &row.name, config, target, at).await?);
                }
                crate::failpoints::schedule_sent(&row.name).await;
                Ok((fires.len() as u64, partitions))
            })
        })
        .await?;
        if sent > 0 {
            match target {
                Target::Queue(q) => self.notify_local(Subject::Queue(q.id())),
                Target::Topic(t) => t.wake_after_commit(partitions),
            }
            metrics::counter!(crate::telemetry::catalogue::SCHEDULE_FIRES.name(), "schedule" => row.name.clone())
                .increment(sent);
            tracing::debug!(schedule = %row.name, sent, "schedule fired");
        }
        Ok(sent)
    }
}

/// Send the message (or record) of fire time `at` inside the fire's transaction; a record's
/// partition.
async fn send<B: Backend>(
    conn: &mut B::Connection,
    name: &str,
    config: &ScheduleConfig,
    target: &Target<B>,
    at: i64,
) -> Result<Option<u32>> {
    let mut headers = config.headers.clone();
    headers.insert(SCHEDULE_HEADER.into(), name.into());
    headers.insert(FIRE_TIME_HEADER.into(), rfc3339(at));
    let body = config.body.clone();
    match target {
        Target::Queue(q) => {
            let m = Message::new(body).priority(config.priority);
            let m = config.key.iter().fold(m, |m, key| m.ordering_key(key));
            let m = headers.into_iter().fold(m, |m, (k, v)| m.header(k, v));
            q.send_in(conn, m).await?;
            Ok(None)
        }
        Target::Topic(t) => {
            let r = config
                .key
                .iter()
                .fold(Record::new(body), |r, key| r.key(key));
            let r = headers.into_iter().fold(r, |r, (k, v)| r.header(k, v));
            Ok(Some(t.publish_in(conn, r).await?.partition))
        }
    }
}

/// How long to wait from `now` until `next` (µs), at most [`SCHEDULE_IDLE_CHECK`].
fn until(next: Option<i64>, now: i64) -> Duration {
    match next {
        Some(next) if next > now => {
            Duration::from_micros((next - now) as u64).min(SCHEDULE_IDLE_CHECK)
        }
        Some(_) => Duration::ZERO,
        None => SCHEDULE_IDLE_CHECK,
    }
}
