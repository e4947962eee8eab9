//! Durable execution: a handler's steps, sleeps and event waits, recorded in its run's journal
//! so that a later delivery of the same message — a retry, a crash, a deploy, the end of a
//! sleep — replays what was done instead of doing it again.
//!
//! Replay is by position. Each durable call of a run takes the next sequence number; the
//! journal's row at that number must be the same call (kind and name), or the handler changed
//! its path and gets [`Error::StepMismatch`] rather than another step's result. A recorded
//! step returns its result without running; a sleep or an event wait that is not over
//! suspends the run again: the message goes back to `scheduled` (a snooze: the attempt is not
//! counted), the lease and the worker's slot are given back, and the handler ends with
//! [`Error::Suspended`].

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::JobContext;
use crate::domain::{
    ChildRun, DONE, Error, KIND_EVENT, KIND_JOIN, KIND_SLEEP, KIND_STEP, Message, PARENT_HEADER,
    Result, StepKind, check_durable_name, check_durable_size, check_wait,
};
use crate::queue::Queue;
use crate::queue::Resolution;
use crate::store::{Backend, JournalRow};
use crate::tx;

/// What a run has of its journal in this delivery: the rows read at its first durable call,
/// with those it recorded since, and the sequence number of its next call.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    rows: Option<Vec<JournalRow>>,
    next: i32,
}

/// A durable call placed in its run: its sequence number and the row recorded for it, if any.
struct Slot {
    seq: i32,
    recorded: Option<JournalRow>,
}

fn decode<T: DeserializeOwned>(name: &str, bytes: Option<&[u8]>) -> Result<T> {
    serde_json::from_slice(bytes.unwrap_or(b"null")).map_err(|e| {
        Error::Corrupt(format!(
            "the recorded result of step {name:?} does not decode as this type: {e}"
        ))
    })
}

/// What a step's work gave, and the record of it: [`Error::StepFailed`] when it failed.
fn step_result<T, E>(name: &str, done: std::result::Result<T, E>) -> Result<(T, Vec<u8>)>
where
    T: Serialize,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let value = done.map_err(|e| Error::StepFailed {
        step: name.to_owned(),
        source: e.into(),
    })?;
    let bytes = serde_json::to_vec(&value)?;
    check_durable_size(&bytes)?;
    Ok((value, bytes))
}

/// The name a sleep is journaled under (sleeps have no name of their own: their position is).
fn sleep_name(seq: i32) -> String {
    format!("sleep {seq}")
}

impl<B: Backend> JobContext<B> {
    /// Run `work` once for this message and record its result: when the message is delivered
    /// again (a retry, a crash, a lost lease, a deploy, the end of a [`sleep`](Self::sleep)),
    /// a step that completed returns its recorded result without running.
    ///
    /// At least once: a crash after `work` ran and before its record committed runs it again
    /// on the next delivery — make its effects idempotent, or use [`step_in`](Self::step_in),
    /// whose writes commit with the record (exactly once). A failing `work` records nothing
    /// and fails the step with [`Error::StepFailed`] (the handler's `?` makes it a failed
    /// attempt, retried with the queue's backoff).
    ///
    /// Names are unique within a run; steps run one at a time (not nested, not concurrently),
    /// and a run must reach them in the same order on every delivery: a different step where
    /// the journal has another is [`Error::StepMismatch`]. The result is JSON of at most
    /// [`MAX_STEP_RESULT`](crate::flow::MAX_STEP_RESULT) bytes. Queue messages only.
    ///
    /// ```
    /// # async fn charge(order: u64) -> anyhow::Result<String> { Ok(format!("ch_{order}")) }
    /// # async fn handle(order: u64, ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// let charge_id: String = ctx.step("charge", || charge(order)).await?;
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn step<T, F, Fut, E>(&self, name: &str, work: F) -> Result<T>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (queue, mut journal, slot) = self.open_step(name).await?;
        if let Some(row) = slot.recorded {
            return decode(name, row.result.as_deref());
        }
        let (value, bytes) = step_result(name, work().await)?;
        let held = queue
            .record_done_step(self.receipt(), slot.seq, name, &bytes)
            .await?;
        self.recorded(&mut journal, held, slot.seq, name, KIND_STEP)?;
        Ok(value)
    }

    /// [`step`](Self::step) whose `work` writes in a transaction on this database that also
    /// records the step: the writes and the record commit together or not at all, so a step
    /// that completed never runs again — exactly once. `work` gets the transaction's
    /// connection; an error from it rolls everything back ([`Error::StepFailed`]). If the lease
    /// was lost meanwhile, nothing commits ([`Error::LeaseLost`]).
    ///
    /// ```
    /// # async fn handle(sku: String, ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// let left: i64 = ctx
    ///     .step_in("reserve", |tx| {
    ///         Box::pin(async move {
    ///             sqlx::query("UPDATE stock SET n = n - 1 WHERE sku = ?")
    ///                 .bind(&sku)
    ///                 .execute(&mut *tx)
    ///                 .await?;
    ///             sqlx::query_scalar("SELECT n FROM stock WHERE sku = ?")
    ///                 .bind(&sku)
    ///                 .fetch_one(&mut *tx)
    ///                 .await
    ///         })
    ///     })
    ///     .await?;
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn step_in<T, F, E>(&self, name: &str, work: F) -> Result<T>
    where
        T: Serialize + DeserializeOwned + Send,
        F: for<'c> FnOnce(&'c mut B::Connection) -> BoxFuture<'c, std::result::Result<T, E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (queue, mut journal, slot) = self.open_step(name).await?;
        if let Some(row) = slot.recorded {
            return decode(name, row.result.as_deref());
        }
        let mut tx = tx::begin_for_caller(queue.client().pool()).await?;
        let (value, bytes) = step_result(name, work(&mut tx).await)?;
        let held = queue
            .record_done_step_in(&mut tx, self.receipt(), slot.seq, name, &bytes)
            .await?;
        if held {
            tx.commit().await?;
        } else {
            let _ = tx.rollback().await;
        }
        self.recorded(&mut journal, held, slot.seq, name, KIND_STEP)?;
        Ok(value)
    }

    /// Sleep durably for `duration`: the first time, the run is suspended — the message goes
    /// back to the queue to be delivered again when the sleep ends (the attempt is not
    /// counted), and the lease, the worker's slot and any concurrency slot of its key are given
    /// back — and this returns [`Error::Suspended`], which the handler returns (`?`). On that
    /// later delivery the handler runs again from the top, its completed steps return their
    /// results, and this sleep returns `Ok(())`. A sleeping run holds no worker and costs no
    /// polling: it is a delayed message. At most 10 years; zero returns at once.
    ///
    /// ```
    /// # async fn handle(ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// ctx.step("send welcome mail", || async { Ok::<_, std::io::Error>(()) }).await?;
    /// ctx.sleep(std::time::Duration::from_secs(3 * 24 * 3600)).await?; // three days, no worker held
    /// ctx.step("send follow-up mail", || async { Ok::<_, std::io::Error>(()) }).await?;
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn sleep(&self, duration: Duration) -> Result<()> {
        check_wait("sleep", duration)?;
        let queue = self.durable_queue()?;
        let mut journal = self.lock_journal()?;
        let name = sleep_name(journal.next);
        let slot = self.place(&mut journal, KIND_SLEEP, &name).await?;
        let resolution = queue
            .sleep_at(
                self.receipt(),
                slot.seq,
                &name,
                duration,
                slot.recorded.as_ref(),
            )
            .await
            .map_err(|e| self.lost_if(e))?;
        self.resolved(&mut journal, slot.seq, &name, KIND_SLEEP, resolution)
            .map(drop)
    }

    /// [`sleep`](Self::sleep) until `until` (a time in the past returns at once, and is still
    /// journaled, so that the run's later calls keep their places).
    ///
    /// ```
    /// # async fn handle(ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// let tomorrow = std::time::SystemTime::now() + std::time::Duration::from_secs(86_400);
    /// ctx.sleep_until(tomorrow).await?;
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn sleep_until(&self, until: SystemTime) -> Result<()> {
        let duration = until
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        self.sleep(duration).await
    }

    /// Wait durably for the event `name` — emitted by
    /// [`Client::emit_event`](crate::Client::emit_event) — for at most `timeout`: `Some(payload)`
    /// when it came, `None` when the timeout passed first. While neither has happened the run is
    /// suspended as by [`sleep`](Self::sleep) (this returns [`Error::Suspended`] for the
    /// handler to return); the emit wakes it at once (within the notification latency on
    /// other processes). An event emitted before the wait began counts, for as long as events
    /// are kept (see `emit_event`). The outcome is recorded in the journal, once: an event
    /// emitted after the deadline is a timeout, whenever the run resumes. Waiting for one event
    /// twice in a run is [`Error::InvalidArgument`] (its outcome would be the same).
    ///
    /// ```
    /// # async fn handle(order: u64, ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// let three_days = std::time::Duration::from_secs(3 * 24 * 3600);
    /// match ctx.wait_for_event::<serde_json::Value>(&format!("order-{order}-shipped"), three_days).await? {
    ///     Some(shipment) => println!("shipped: {shipment}"),
    ///     None => println!("not shipped within three days"),
    /// }
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn wait_for_event<T: DeserializeOwned>(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<Option<T>> {
        check_durable_name("event", name)?;
        check_wait("event wait", timeout)?;
        let queue = self.durable_queue()?;
        let mut journal = self.lock_journal()?;
        let slot = self.place(&mut journal, KIND_EVENT, name).await?;
        let resolution = queue
            .wait_at(
                self.receipt(),
                slot.seq,
                name,
                timeout,
                slot.recorded.as_ref(),
            )
            .await
            .map_err(|e| self.lost_if(e))?;
        let payload = self.resolved(&mut journal, slot.seq, name, KIND_EVENT, resolution)?;
        payload.map(|p| decode(name, Some(&p))).transpose()
    }

    /// Start a child run: send `message` to `queue` as the step `name` — the send and the
    /// step's record commit together, so a replayed parent never sends its child twice — with
    /// the parent's id in its [`PARENT_HEADER`](crate::flow::PARENT_HEADER). Returns the
    /// child's handle, for [`join`](Self::join).
    ///
    /// ```
    /// # async fn handle(ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// let child = ctx.spawn("thumbnail", "images", sqlmq::Message::new("photo-1.jpg")).await?;
    /// let result = ctx.join(&child).await?; // suspended until the child is acked
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn spawn(&self, name: &str, queue: &str, message: Message) -> Result<ChildRun> {
        let target = self.client().queue(queue).await?;
        let message = message.header(PARENT_HEADER, self.id().to_string());
        self.step_in(name, move |conn| {
            Box::pin(async move {
                let sent = target.send_in(conn, message).await?;
                Ok::<_, Error>(ChildRun {
                    id: sent.id,
                    queue: target.name().to_owned(),
                })
            })
        })
        .await
    }

    /// Wait durably for the child run `child` to end: the result its ack left
    /// ([`ack_with_result`](Self::ack_with_result); `None` when it left none, was cancelled or
    /// purged), or [`Error::ChildFailed`] when it became a dead letter. Until then the parent
    /// is suspended as by [`sleep`](Self::sleep) ([`Error::Suspended`]); the child's end, when
    /// a worker settles it, wakes the parent at once, and the parent looks again every minute
    /// should nothing wake it (a child acked by another kind of consumer).
    ///
    /// ```
    /// # async fn handle(ctx: sqlmq::JobContext) -> anyhow::Result<sqlmq::Outcome> {
    /// let child = ctx.spawn("charge", "payments", sqlmq::Message::new("order-42")).await?;
    /// match ctx.join(&child).await {
    ///     Ok(receipt) => println!("charged: {receipt:?}"),
    ///     Err(sqlmq::Error::ChildFailed { .. }) => println!("the charge failed for good"),
    ///     Err(e) => return Err(e.into()), // Suspended among them: return it
    /// }
    /// # Ok(sqlmq::Outcome::Done) }
    /// ```
    pub async fn join(&self, child: &ChildRun) -> Result<Option<Vec<u8>>> {
        let queue = self.durable_queue()?;
        let mut journal = self.lock_journal()?;
        let name = crate::domain::child_event(child.id);
        let slot = self.place(&mut journal, KIND_JOIN, &name).await?;
        let resolution = queue
            .join_at(self.receipt(), slot.seq, child.id, slot.recorded.as_ref())
            .await
            .map_err(|e| self.lost_if(e))?;
        if matches!(resolution, Resolution::Failed) {
            self.recorded(&mut journal, true, slot.seq, &name, KIND_JOIN)?;
            return Err(Error::ChildFailed { id: child.id });
        }
        self.resolved(&mut journal, slot.seq, &name, KIND_JOIN, resolution)
    }

    /// A step's queue, the run's journal (held while the step runs) and the step's place.
    async fn open_step(
        &self,
        name: &str,
    ) -> Result<(Queue<B>, tokio::sync::MutexGuard<'_, Journal>, Slot)> {
        check_durable_name("step", name)?;
        let queue = self.durable_queue()?;
        let mut journal = self.lock_journal()?;
        let slot = self.place(&mut journal, KIND_STEP, name).await?;
        Ok((queue, journal, slot))
    }

    /// The queue of a durable call's message.
    fn durable_queue(&self) -> Result<Queue<B>> {
        self.queue().cloned().ok_or_else(|| {
            Error::InvalidArgument(
                "steps, sleeps and event waits are for queue messages, not topic records".into(),
            )
        })
    }

    fn lock_journal(&self) -> Result<tokio::sync::MutexGuard<'_, Journal>> {
        self.journal().try_lock().map_err(|_| {
            Error::InvalidArgument(
                "durable calls run one at a time: do not nest steps or run them concurrently"
                    .into(),
            )
        })
    }

    /// Give the call of `kind` named `name` its place in the run: read the journal at the
    /// first call, then check the recorded row at this place, if any, is this call.
    async fn place(&self, journal: &mut Journal, kind: i16, name: &str) -> Result<Slot> {
        if journal.rows.is_none() {
            // Fencing tokens count a message's claims from 1 and never restart (a redrive keeps
            // counting): under its first claim a message can have no journal but what this
            // delivery records, and the read is saved.
            let rows = if self.receipt().token == 1 {
                Vec::new()
            } else {
                self.durable_queue()?.journal_rows(self.id()).await?
            };
            if !rows.is_empty() {
                self.inner_journaled();
            }
            journal.rows = Some(rows);
        }
        let seq = journal.next;
        let rows = journal.rows.as_deref().unwrap_or_default();
        let here = rows.iter().find(|r| r.seq == seq);
        let same_name = rows
            .iter()
            .find(|r| r.kind == kind && r.name == name && r.seq != seq);
        if let Some(row) = here
            && (row.kind != kind || row.name != name)
        {
            return Err(self.mismatch(seq, row, kind, name));
        }
        if let Some(row) = same_name {
            return Err(if row.seq < seq {
                Error::InvalidArgument(format!(
                    "{} {name:?} is used twice in one run: names are unique within a run",
                    StepKind::of_code(kind)
                ))
            } else {
                self.mismatch(seq, row, kind, name)
            });
        }
        journal.next += 1;
        Ok(Slot {
            seq,
            recorded: here.cloned(),
        })
    }

    fn mismatch(&self, seq: i32, row: &JournalRow, kind: i16, name: &str) -> Error {
        Error::StepMismatch {
            id: self.id(),
            seq: seq as u32,
            recorded: format!(
                "{} {:?} (call {})",
                StepKind::of_code(row.kind),
                row.name,
                row.seq
            ),
            requested: format!("{} {name:?}", StepKind::of_code(kind)),
        }
    }

    /// After a journal row's insert: noted when the lease held, [`Error::LeaseLost`] when not.
    fn recorded(
        &self,
        journal: &mut Journal,
        held: bool,
        seq: i32,
        name: &str,
        kind: i16,
    ) -> Result<()> {
        if !held {
            self.mark_lost();
            return Err(self.lease_lost_error());
        }
        journal.note(seq, name, kind);
        self.inner_journaled();
        Ok(())
    }

    /// After a sleep or an event wait: its payload when over (an event's; `None` for a sleep
    /// or a timeout), [`Error::Suspended`] when the run was put back to wait.
    fn resolved(
        &self,
        journal: &mut Journal,
        seq: i32,
        name: &str,
        kind: i16,
        resolution: Resolution,
    ) -> Result<Option<Vec<u8>>> {
        let held = !matches!(resolution, Resolution::Lost);
        self.recorded(journal, held, seq, name, kind)?;
        match resolution {
            Resolution::Over(payload) => Ok(payload),
            Resolution::Failed => Err(Error::InvalidArgument(format!(
                "{} {name:?} failed",
                StepKind::of_code(kind)
            ))),
            _ => Err(self.suspend()),
        }
    }

    fn lease_lost_error(&self) -> Error {
        Error::LeaseLost {
            id: self.id(),
            token: self.receipt().token,
        }
    }

    /// A failed suspension or record: a lost lease marks the context.
    fn lost_if(&self, e: Error) -> Error {
        if matches!(e, Error::LeaseLost { .. }) {
            self.mark_lost();
        }
        e
    }

    /// The run is suspended: its message is back in the queue, no longer this worker's.
    fn suspend(&self) -> Error {
        self.suspended_flag().store(true, Ordering::Relaxed);
        Error::Suspended { id: self.id() }
    }
}

impl Journal {
    /// Note a row recorded in this delivery, so that its name counts as used.
    fn note(&mut self, seq: i32, name: &str, kind: i16) {
        let rows = self.rows.get_or_insert_with(Vec::new);
        if rows.iter().any(|r| r.seq == seq) {
            return;
        }
        rows.push(JournalRow {
            seq,
            name: name.to_owned(),
            kind,
            state: DONE,
            result: None,
            wake_at_us: None,
            wake_in_us: None,
            recorded_at_us: 0,
        });
    }
}
