//! Durable calls of a run, by receipt: recording a step, a sleep, an event wait. One place
//! decides what each does with the run's journal row — the worker's positional API
//! (`worker/durable.rs`) and the named one for other consumers ([`Run`](super::Run)) only
//! choose the row's place.
//!
//! A suspension (a sleep or a wait not over) is a snooze in the same transaction as the
//! journal row: the message goes back to `scheduled` for the wake time without spending its
//! attempt, and the row says why. Both or neither commit.

use std::time::Duration;

use super::Queue;
use crate::coalesce::{Coalescer, Sink};
use crate::domain::{
    DONE, FAILED, JOIN_POLL, KIND_EVENT, KIND_JOIN, KIND_SLEEP, KIND_STEP, MessageId, Receipt,
    Result, TIMED_OUT, WAITING, child_event, micros_of,
};
use crate::store::{Backend, ChildState, JournalRow, NewStep};
use crate::tx;

/// How a sleep or an event wait ended for now.
#[derive(Debug)]
pub(crate) enum Resolution {
    /// Over: for an event wait, its payload (`None`: the deadline passed first).
    Over(Option<Vec<u8>>),
    /// Not over: the message is back in the queue until its wake time or its event.
    Suspended,
    /// A join's child became a dead letter.
    Failed,
    /// The receipt's lease is gone: nothing was written.
    Lost,
}

/// A durable write waiting for its shared commit: a step's record, or the ack of a run
/// (which forgets its journal).
pub(crate) enum DurableWrite {
    Step {
        receipt: Receipt,
        seq: i32,
        name: String,
        result: Vec<u8>,
    },
    Ack(Receipt),
}

/// Where a queue handle's durable writes go: one transaction for all that wait — the step
/// records first, then the acks, which forget the journals of the runs they acked.
pub(crate) struct DurableWrites<B: Backend>(Queue<B>);

impl<B: Backend> Clone for DurableWrites<B> {
    fn clone(&self) -> Self {
        DurableWrites(self.0.clone())
    }
}

impl<B: Backend> Sink for DurableWrites<B> {
    type Item = DurableWrite;
    /// Whether the lease held: the row was written, the message acked (false: nothing of it
    /// changed).
    type Answer = bool;

    async fn write(&self, writes: &[DurableWrite]) -> Result<Vec<bool>> {
        let queue = &self.0;
        tx::run(queue.conns(), "durable", |conn, _| {
            Box::pin(async move {
                let mut held = vec![true; writes.len()];
                let mut steps = Vec::new();
                let mut acks = Vec::new();
                for (i, w) in writes.iter().enumerate() {
                    match w {
                        DurableWrite::Step {
                            receipt,
                            seq,
                            name,
                            result,
                        } => steps.push((i, (*receipt, *seq, name.as_str(), result.as_slice()))),
                        DurableWrite::Ack(receipt) => acks.push((i, *receipt)),
                    }
                }
                if !steps.is_empty() {
                    let rows: Vec<_> = steps.iter().map(|(_, s)| *s).collect();
                    let recorded = queue.store().record_done_steps(conn, &rows).await?;
                    for ((i, _), ok) in steps.iter().zip(recorded) {
                        held[*i] = ok;
                    }
                }
                if !acks.is_empty() {
                    let receipts: Vec<Receipt> = acks.iter().map(|(_, r)| *r).collect();
                    let report = queue.ack_batch_in(conn, &receipts).await?;
                    // A lost lease's message belongs to another consumer, its journal with it.
                    let mut acked = Vec::with_capacity(acks.len());
                    for (i, r) in acks {
                        held[i] = !report.lost.contains(&r);
                        if held[i] {
                            acked.push(r.id);
                        }
                    }
                    queue.store().forget_runs(conn, &acked).await?;
                }
                Ok(held)
            })
        })
        .await
    }
}

/// The time left to a row's wake time (zero once it passed).
fn left(row: &JournalRow) -> Duration {
    crate::domain::duration_from_micros(row.wake_in_us.unwrap_or(0))
}

impl<B: Backend> Queue<B> {
    /// The journal of message `id`'s run.
    pub(crate) async fn journal_rows(&self, id: MessageId) -> Result<Vec<JournalRow>> {
        let mut conn = self.conns().read().await?;
        self.store().journal(&mut conn, id).await
    }

    /// Record the completed step `name` at `seq` with its result (JSON) while `receipt`'s
    /// lease holds: false when it does not (nothing written). Records made at about the same
    /// time by the handle's handlers share one transaction and one commit (`coalesce.rs`): a
    /// step's record must be durable before the handler goes on, and the commit is its cost.
    /// Should the shared commit fail — a row of the same place written by another holder of
    /// its message, say — each record is made again on its own, and only its own fails.
    pub(crate) async fn record_done_step(
        &self,
        receipt: Receipt,
        seq: i32,
        name: &str,
        result: &[u8],
    ) -> Result<bool> {
        let record = DurableWrite::Step {
            receipt,
            seq,
            name: name.to_owned(),
            result: result.to_vec(),
        };
        self.durable_writes().write(record).await
    }

    /// Ack a durable run's message and forget its journal, in one transaction shared with the
    /// other durable writes waiting at the same time (`coalesce.rs`). [`Error::LeaseLost`] when
    /// the receipt no longer holds the lease (nothing changed).
    pub(crate) async fn ack_run(&self, receipt: Receipt) -> Result<()> {
        if self
            .durable_writes()
            .write(DurableWrite::Ack(receipt))
            .await?
        {
            Ok(())
        } else {
            Err(crate::domain::Error::LeaseLost {
                id: receipt.id,
                token: receipt.token,
            })
        }
    }

    /// This handle's coalescer of durable writes (see [`Queue::record_done_step`]).
    fn durable_writes(&self) -> &Coalescer<DurableWrites<B>> {
        self.durable_cell()
            .get_or_init(|| Coalescer::start(DurableWrites(self.detached())))
    }

    /// [`Queue::record_done_step`] in the caller's transaction (with the step's own writes).
    pub(crate) async fn record_done_step_in(
        &self,
        conn: &mut B::Connection,
        receipt: Receipt,
        seq: i32,
        name: &str,
        result: &[u8],
    ) -> Result<bool> {
        let step = NewStep {
            seq,
            name,
            kind: KIND_STEP,
            state: DONE,
            wake_in_us: None,
            result: Some(result),
        };
        self.store().record_step(conn, receipt, &step).await
    }

    /// Sleep `duration` at `seq` (`recorded`: the journal's row there, from an earlier
    /// delivery).
    pub(crate) async fn sleep_at(
        &self,
        receipt: Receipt,
        seq: i32,
        name: &str,
        duration: Duration,
        recorded: Option<&JournalRow>,
    ) -> Result<Resolution> {
        let store = self.store();
        match recorded {
            Some(row) if row.state != WAITING => Ok(Resolution::Over(None)),
            Some(row) if left(row).is_zero() => {
                tx::run(self.conns(), "sleep", |conn, _| {
                    Box::pin(store.finish_step(conn, receipt.id, seq, DONE, None))
                })
                .await?;
                Ok(Resolution::Over(None))
            }
            // Delivered before its time (an operator's retry): back to sleep for the rest.
            Some(row) => {
                let rest = left(row);
                tx::run(self.conns(), "sleep", |conn, _| {
                    Box::pin(async move {
                        self.snooze_in(conn, receipt, rest).await?;
                        Ok(Resolution::Suspended)
                    })
                })
                .await
            }
            None => {
                let step = NewStep {
                    seq,
                    name,
                    kind: KIND_SLEEP,
                    state: if duration.is_zero() { DONE } else { WAITING },
                    wake_in_us: Some(micros_of(duration)),
                    result: None,
                };
                let step = &step;
                tx::run(self.conns(), "sleep", |conn, _| {
                    Box::pin(async move {
                        if !store.record_step(conn, receipt, step).await? {
                            return Ok(Resolution::Lost);
                        }
                        if duration.is_zero() {
                            return Ok(Resolution::Over(None));
                        }
                        self.snooze_in(conn, receipt, duration).await?;
                        Ok(Resolution::Suspended)
                    })
                })
                .await
            }
        }
    }

    /// Wait at `seq` for the event `name`, at most `timeout` from the first time
    /// (`recorded`: the journal's row there, from an earlier delivery).
    pub(crate) async fn wait_at(
        &self,
        receipt: Receipt,
        seq: i32,
        name: &str,
        timeout: Duration,
        recorded: Option<&JournalRow>,
    ) -> Result<Resolution> {
        let store = self.store();
        match recorded {
            Some(row) if row.state == DONE => Ok(Resolution::Over(Some(
                row.result.clone().unwrap_or_default(),
            ))),
            Some(row) if row.state == TIMED_OUT => Ok(Resolution::Over(None)),
            // Resumed: the event came, the deadline passed, or neither (woken early): the
            // outcome is decided here, by the lease's holder, once.
            Some(row) => {
                let deadline = row.wake_at_us.unwrap_or(i64::MAX);
                let rest = left(row);
                tx::run(self.conns(), "event wait", |conn, _| {
                    Box::pin(async move {
                        store
                            .wait_for_event(conn, name, receipt.id, self.id())
                            .await?;
                        let event = store.event_locked(conn, name).await?;
                        let (state, payload) = match event {
                            Some((payload, at)) if at <= deadline => (DONE, Some(payload)),
                            _ if rest.is_zero() => (TIMED_OUT, None),
                            _ => {
                                self.snooze_in(conn, receipt, rest).await?;
                                return Ok(Resolution::Suspended);
                            }
                        };
                        store
                            .finish_step(conn, receipt.id, seq, state, payload.as_deref())
                            .await?;
                        store.unwait(conn, name, receipt.id).await?;
                        Ok(Resolution::Over(payload))
                    })
                })
                .await
            }
            None => {
                let wake_in_us = Some(micros_of(timeout));
                tx::run(self.conns(), "event wait", |conn, _| {
                    Box::pin(async move {
                        // The wait first, then the event, read locked: an emit that commits
                        // meanwhile either sees this wait (and wakes the run) or is seen here
                        // (`flow/events.rs`).
                        store
                            .wait_for_event(conn, name, receipt.id, self.id())
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
                            return Ok(Resolution::Lost);
                        }
                        if state == WAITING {
                            self.snooze_in(conn, receipt, timeout).await?;
                            return Ok(Resolution::Suspended);
                        }
                        store.unwait(conn, name, receipt.id).await?;
                        Ok(Resolution::Over(payload))
                    })
                })
                .await
            }
        }
    }

    /// Join at `seq` the child run `child` (`recorded`: the journal's row there): its result
    /// once it was acked, [`Resolution::Failed`] once it is a dead letter, else suspended until
    /// its end wakes this run (or [`JOIN_POLL`] passes, to look again).
    pub(crate) async fn join_at(
        &self,
        receipt: Receipt,
        seq: i32,
        child: MessageId,
        recorded: Option<&JournalRow>,
    ) -> Result<Resolution> {
        match recorded.map(|r| r.state) {
            Some(DONE) => return Ok(Resolution::Over(recorded.and_then(|r| r.result.clone()))),
            Some(FAILED) => return Ok(Resolution::Failed),
            _ => {}
        }
        let (store, name) = (self.store(), child_event(child));
        let (name, new) = (name.as_str(), recorded.is_none());
        tx::run(self.conns(), "join", |conn, _| {
            Box::pin(async move {
                // The wait first, then the child, read locked: the child's end either sees
                // this wait (and wakes the run) or is seen here.
                store
                    .wait_for_event(conn, name, receipt.id, self.id())
                    .await?;
                let (state, result) = match store.child_state(conn, child).await? {
                    ChildState::Gone => (DONE, store.result_of(conn, child).await?),
                    ChildState::Dead => (FAILED, None),
                    ChildState::Pending => (WAITING, None),
                };
                if new {
                    let step = NewStep {
                        seq,
                        name,
                        kind: KIND_JOIN,
                        state,
                        wake_in_us: None,
                        result: result.as_deref(),
                    };
                    if !store.record_step(conn, receipt, &step).await? {
                        return Ok(Resolution::Lost);
                    }
                } else if state != WAITING {
                    store
                        .finish_step(conn, receipt.id, seq, state, result.as_deref())
                        .await?;
                }
                if state == WAITING {
                    self.snooze_in(conn, receipt, JOIN_POLL).await?;
                    return Ok(Resolution::Suspended);
                }
                store.unwait(conn, name, receipt.id).await?;
                Ok(if state == DONE {
                    Resolution::Over(result)
                } else {
                    Resolution::Failed
                })
            })
        })
        .await
    }
}
