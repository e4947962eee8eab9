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
    DONE, Error, KIND_EVENT, KIND_SLEEP, KIND_STEP, Result, StepKind, TIMED_OUT, WAITING,
    check_durable_name, check_durable_size, check_wait,
};
use crate::queue::Queue;
use crate::store::{Backend, JournalRow, NewStep};
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

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

fn decode<T: DeserializeOwned>(name: &str, bytes: Option<&[u8]>) -> Result<T> {
    serde_json::from_slice(bytes.unwrap_or(b"null")).map_err(|e| {
        Error::Corrupt(format!(
            "the recorded result of step {name:?} does not decode as this type: {e}"
        ))
    })
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
        check_durable_name("step", name)?;
        let queue = self.durable_queue()?;
        let mut journal = self.lock_journal()?;
        let slot = self.place(&mut journal, KIND_STEP, name).await?;
        if let Some(row) = slot.recorded {
            return decode(name, row.result.as_deref());
        }
        let value = work().await.map_err(|e| Error::StepFailed {
            step: name.to_owned(),
            source: e.into(),
        })?;
        let bytes = serde_json::to_vec(&value)?;
        check_durable_size(&bytes)?;
        let step = NewStep {
            seq: slot.seq,
            name,
            kind: KIND_STEP,
            state: DONE,
            wake_in_us: None,
            result: Some(&bytes),
        };
        let (store, receipt) = (queue.client().store(), self.receipt());
        let step = &step;
        let held = tx::run(queue.client().conns(), "step", |conn, _| {
            Box::pin(store.record_step(conn, receipt, step))
        })
        .await?;
        self.recorded(&mut journal, held, step)?;
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
        check_durable_name("step", name)?;
        let queue = self.durable_queue()?;
        let mut journal = self.lock_journal()?;
        let slot = self.place(&mut journal, KIND_STEP, name).await?;
        if let Some(row) = slot.recorded {
            return decode(name, row.result.as_deref());
        }
        let client = queue.client();
        let mut tx = tx::begin_for_caller(client.pool()).await?;
        let value = work(&mut tx).await.map_err(|e| Error::StepFailed {
            step: name.to_owned(),
            source: e.into(),
        })?;
        let bytes = serde_json::to_vec(&value)?;
        check_durable_size(&bytes)?;
        let step = NewStep {
            seq: slot.seq,
            name,
            kind: KIND_STEP,
            state: DONE,
            wake_in_us: None,
            result: Some(&bytes),
        };
        let held = client
            .store()
            .record_step(&mut tx, self.receipt(), &step)
            .await?;
        if held {
            tx.commit().await?;
        } else {
            let _ = tx.rollback().await;
        }
        self.recorded(&mut journal, held, &step)?;
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
        let seq = journal.next;
        let slot = self
            .place(&mut journal, KIND_SLEEP, &sleep_name(seq))
            .await?;
        let (store, receipt) = (queue.client().store(), self.receipt());
        match slot.recorded {
            Some(row) if row.state != WAITING => Ok(()),
            Some(row) => {
                let left = row.wake_in_us.unwrap_or(0);
                if left <= 0 {
                    tx::run(queue.client().conns(), "sleep", |conn, _| {
                        Box::pin(store.finish_step(conn, receipt.id, slot.seq, DONE, None))
                    })
                    .await?;
                    return Ok(());
                }
                let left = Duration::from_micros(left as u64);
                let queue = &queue;
                tx::run(queue.client().conns(), "sleep", |conn, _| {
                    Box::pin(queue.snooze_in(conn, receipt, left))
                })
                .await
                .map_err(|e| self.lost_if(e))?;
                Err(self.suspend())
            }
            None => {
                let name = sleep_name(slot.seq);
                let step = NewStep {
                    seq: slot.seq,
                    name: &name,
                    kind: KIND_SLEEP,
                    state: if duration.is_zero() { DONE } else { WAITING },
                    wake_in_us: Some(micros(duration)),
                    result: None,
                };
                let (step, queue) = (&step, &queue);
                let held = tx::run(queue.client().conns(), "sleep", |conn, _| {
                    Box::pin(async move {
                        if !store.record_step(conn, receipt, step).await? {
                            return Ok(false);
                        }
                        if !duration.is_zero() {
                            queue.snooze_in(conn, receipt, duration).await?;
                        }
                        Ok(true)
                    })
                })
                .await
                .map_err(|e| self.lost_if(e))?;
                self.recorded(&mut journal, held, step)?;
                if duration.is_zero() {
                    Ok(())
                } else {
                    Err(self.suspend())
                }
            }
        }
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
        let (store, receipt) = (queue.client().store(), self.receipt());
        let (seq, queue) = (slot.seq, &queue);
        let outcome = match slot.recorded {
            Some(row) if row.state == DONE => return decode(name, row.result.as_deref()).map(Some),
            Some(row) if row.state == TIMED_OUT => return Ok(None),
            // Resumed: the event came, the deadline passed, or neither (woken early): the
            // outcome is decided here, by the lease's holder, once.
            Some(row) => {
                let deadline = row.wake_at_us.unwrap_or(i64::MAX);
                tx::run(queue.client().conns(), "event wait", |conn, _| {
                    Box::pin(async move {
                        store
                            .wait_for_event(conn, name, receipt.id, queue.id())
                            .await?;
                        let event = store.event_locked(conn, name).await?;
                        let left = row.wake_in_us.unwrap_or(0);
                        let (state, payload) = match event {
                            Some((payload, at)) if at <= deadline => (DONE, Some(payload)),
                            _ if left <= 0 => (TIMED_OUT, None),
                            _ => {
                                let left = Duration::from_micros(left as u64);
                                queue.snooze_in(conn, receipt, left).await?;
                                return Ok(Waited::Suspended);
                            }
                        };
                        store
                            .finish_step(conn, receipt.id, seq, state, payload.as_deref())
                            .await?;
                        store.unwait(conn, name, receipt.id).await?;
                        Ok(Waited::Over(payload))
                    })
                })
                .await
            }
            None => {
                let wake_in_us = Some(micros(timeout));
                tx::run(queue.client().conns(), "event wait", |conn, _| {
                    Box::pin(async move {
                        // The wait first, then the event, read locked: an emit that commits
                        // meanwhile either sees this wait (and wakes the run) or is seen here.
                        store
                            .wait_for_event(conn, name, receipt.id, queue.id())
                            .await?;
                        let event = store.event_locked(conn, name).await?;
                        let (state, payload) = match event {
                            Some((payload, _)) => (DONE, Some(payload)),
                            None if timeout.is_zero() => (TIMED_OUT, None),
                            None => (WAITING, None),
                        };
                        let step = NewStep {
                            seq,
                            name,
                            kind: KIND_EVENT,
                            state,
                            wake_in_us,
                            result: payload.as_deref(),
                        };
                        if !store.record_step(conn, receipt, &step).await? {
                            return Ok(Waited::Lost);
                        }
                        if state == WAITING {
                            queue.snooze_in(conn, receipt, timeout).await?;
                            return Ok(Waited::Suspended);
                        }
                        store.unwait(conn, name, receipt.id).await?;
                        Ok(Waited::Over(payload))
                    })
                })
                .await
            }
        }
        .map_err(|e| self.lost_if(e))?;
        match outcome {
            Waited::Over(payload) => {
                journal.note(seq, name, KIND_EVENT);
                self.inner_journaled();
                payload.map(|p| decode(name, Some(&p))).transpose()
            }
            Waited::Suspended => {
                journal.note(seq, name, KIND_EVENT);
                self.inner_journaled();
                Err(self.suspend())
            }
            Waited::Lost => {
                self.mark_lost();
                Err(self.lease_lost_error())
            }
        }
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
            let client = self.client();
            let mut conn = client.conns().read().await?;
            let rows = client.store().journal(&mut conn, self.id()).await?;
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
    fn recorded(&self, journal: &mut Journal, held: bool, step: &NewStep<'_>) -> Result<()> {
        if !held {
            self.mark_lost();
            return Err(self.lease_lost_error());
        }
        journal.note(step.seq, step.name, step.kind);
        self.inner_journaled();
        Ok(())
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

/// How an event wait's transaction ended.
enum Waited {
    Over(Option<Vec<u8>>),
    Suspended,
    Lost,
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
