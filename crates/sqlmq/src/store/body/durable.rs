//! Durable execution's rows: a run's journal (`run_steps`), the events emitted (`events`) and
//! the runs waiting for them (`event_waits`). What to record and when is the engine's
//! (`worker/durable.rs`, `flow/events.rs`); these are its statements.
//!
//! A journal row is written only while its message's lease holds (the insert reads the lease
//! row), and `(message_id, seq)` and `(message_id, kind, name)` are unique: of two holders of one
//! message — a handler that lost its lease and the one that took it over — one records a step,
//! the other's insert fails and its transaction, with the step's own writes, rolls back.

use super::{Columns, SqlStore, Statement};
use crate::domain::{MessageId, Receipt, Result};
use crate::store::Backend;
use crate::store::rows::Entry;

/// The durable statements whose text differs by backend. Times are the database clock;
/// durations are bound as microseconds.
pub struct DurableSql {
    /// A run's journal (message), in order: `seq, name, kind, state, result, wake_at (µs),
    /// µs until wake_at` (both NULL without one), `recorded_at (µs)`.
    pub journal: &'static str,
    /// Record a journal row while the lease holds (message, seq, name, kind, state, µs from
    /// now to wake_at or NULL, result or NULL, lease id, token): one row, or none when the
    /// lease is gone.
    pub record: &'static str,
    /// The leases of messages, read with a shared lock so that none is taken over before the
    /// transaction ends (`{list}` of ids): `id, token`.
    pub leases_locked: &'static str,
    /// Insert completed steps (`{list}` of [`DurableSql::done_row`]).
    pub insert_done: &'static str,
    /// One completed step: message, seq, name, result.
    pub done_row: &'static str,
    /// Delete an event whose retention ended (name).
    pub drop_expired_event: &'static str,
    /// Emit an event unless one of the name is kept (name, payload, retention µs).
    pub emit: &'static str,
    /// An event, its row locked in share mode (name): `payload, emitted_at (µs)`.
    pub event_locked: &'static str,
    /// Wait for an event (name, message, queue): ignored when the run already waits.
    pub wait: &'static str,
    /// The runs waiting for an event, their rows locked (name): `message_id, queue_id`.
    pub waiters: &'static str,
    /// A delayed message's row, locked (id): `id, priority, attempts, token`.
    pub scheduled_row: &'static str,
    /// Delete up to n events whose retention ended (n).
    pub prune_events: &'static str,
    /// The events runs wait for, the longest awaited first (n): `name, runs, since (µs)`.
    pub awaited: &'static str,
    /// The runs waiting for an event, the longest first (name, n): `message_id, queue name,
    /// since (µs)`.
    pub waiting_runs: &'static str,
    /// A message's row, read with a shared lock so that its ack in progress is waited for (id):
    /// a row or none.
    pub message_locked: &'static str,
}

/// Mark a waiting journal row done or timed out (state, result, message, seq).
const FINISH: &str =
    "UPDATE {p}run_steps SET state = ?, result = ? WHERE message_id = ? AND seq = ? AND state = 1";
/// Forget a run's journal (message).
const FORGET: &str = "DELETE FROM {p}run_steps WHERE message_id = ?";
/// Forget the journals of runs (`{list}` of ids).
const FORGET_ALL: &str = "DELETE FROM {p}run_steps WHERE message_id IN ({list})";
/// The runs no longer wait for anything (`{list}` of ids).
const UNWAIT_RUNS: &str = "DELETE FROM {p}event_waits WHERE message_id IN ({list})";
/// A run no longer waits for an event (name, message).
const UNWAIT: &str = "DELETE FROM {p}event_waits WHERE name = ? AND message_id = ?";
/// No run waits for an event any more (name): the emit woke them.
const UNWAIT_EVENT: &str = "DELETE FROM {p}event_waits WHERE name = ?";
/// A run no longer waits for anything (message).
const UNWAIT_ALL: &str = "DELETE FROM {p}event_waits WHERE message_id = ?";
/// The next messages with a journal after one (id, n), in order: `message_id`.
const JOURNALS_AFTER: &str =
    "SELECT DISTINCT message_id FROM {p}run_steps WHERE message_id > ? ORDER BY message_id LIMIT ?";
/// Which of these messages exist (`{list}` of ids): `id`.
const EXISTING: &str = "SELECT id FROM {p}messages WHERE id IN ({list})";
/// Whether a message is a dead letter (id): a row or none.
const IS_DEAD: &str = "SELECT 1 FROM {p}dead WHERE id = ?";
/// What a run waits for (message): `name`.
const WAITS_OF: &str = "SELECT name FROM {p}event_waits WHERE message_id = ? ORDER BY name";

/// Where a child run stands, for its parent's join.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildState {
    /// Still to be handled (or being handled).
    Pending,
    /// A dead letter.
    Dead,
    /// Gone: acked (or cancelled, purged).
    Gone,
}

/// One row of a run's journal.
#[derive(Clone, Debug)]
pub(crate) struct JournalRow {
    pub seq: i32,
    pub name: String,
    pub kind: i16,
    pub state: i16,
    pub result: Option<Vec<u8>>,
    /// A sleep's end or an event wait's deadline (µs since the epoch, database clock).
    pub wake_at_us: Option<i64>,
    /// From now (database clock) to `wake_at`: negative once it passed.
    pub wake_in_us: Option<i64>,
    /// When it was recorded (µs since the epoch, database clock).
    pub recorded_at_us: i64,
}

/// A journal row to write.
pub(crate) struct NewStep<'a> {
    pub seq: i32,
    pub name: &'a str,
    pub kind: i16,
    pub state: i16,
    /// From now to `wake_at`, µs (`None`: no wake time).
    pub wake_in_us: Option<i64>,
    pub result: Option<&'a [u8]>,
}

/// A run's journal and the events it waits for.
impl<B: Backend> SqlStore<B> {
    /// The journal of a message's run, in order.
    pub(crate) async fn journal(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Vec<JournalRow>> {
        let rows = self
            .query(B::DURABLE.journal)
            .arg(id.bytes())
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(JournalRow {
                    seq: r.col(0)?,
                    name: r.opt_text_at(1)?.unwrap_or_default(),
                    kind: r.col(2)?,
                    state: r.col(3)?,
                    result: r.col(4)?,
                    wake_at_us: r.col(5)?,
                    wake_in_us: r.col(6)?,
                    recorded_at_us: r.col(7)?,
                })
            })
            .collect()
    }

    /// Record a journal row while `receipt`'s lease holds: false when it does not (nothing
    /// written). A row of the same seq or name fails with the backend's unique violation.
    pub(crate) async fn record_step(
        &self,
        conn: &mut B::Connection,
        receipt: Receipt,
        step: &NewStep<'_>,
    ) -> Result<bool> {
        let n = self
            .query(B::DURABLE.record)
            .arg(receipt.id.bytes())
            .arg(step.seq)
            .arg(step.name.as_bytes())
            .arg(step.kind)
            .arg(step.state)
            .arg(step.wake_in_us)
            .arg(step.result)
            .arg(receipt.id.bytes())
            .arg(receipt.token as i64)
            .run(conn)
            .await?;
        Ok(n == 1)
    }

    /// Record completed steps while their receipts hold the leases, in the caller's
    /// transaction, in two statements whatever their number: the leases read locked, then one
    /// insert of the steps whose lease held. Answers, for each, whether it held. A step of a
    /// place or name already recorded fails the whole with the backend's unique violation.
    pub(crate) async fn record_done_steps(
        &self,
        conn: &mut B::Connection,
        steps: &[(Receipt, i32, &str, &[u8])],
    ) -> Result<Vec<bool>> {
        let ids: Vec<MessageId> = steps.iter().map(|(r, ..)| r.id).collect();
        let rows = self
            .fetch_id_list(conn, B::DURABLE.leases_locked, &ids)
            .await?;
        let mut tokens = std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            tokens.insert(r.id_at(0)?, r.col::<i64>(1)?);
        }
        let held: Vec<bool> = steps
            .iter()
            .map(|(r, ..)| tokens.get(&r.id) == Some(&(r.token as i64)))
            .collect();
        let written: Vec<&(Receipt, i32, &str, &[u8])> = steps
            .iter()
            .zip(&held)
            .filter(|(_, h)| **h)
            .map(|(s, _)| s)
            .collect();
        self.insert_values(
            conn,
            B::DURABLE.insert_done,
            B::DURABLE.done_row,
            4,
            &written,
            |q, (r, seq, name, result)| {
                q.arg(r.id.bytes())
                    .arg(*seq)
                    .arg(name.as_bytes())
                    .arg(*result)
            },
        )
        .await?;
        Ok(held)
    }

    /// End a waiting journal row with `state` and `result`: false when it was not waiting.
    pub(crate) async fn finish_step(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
        seq: i32,
        state: i16,
        result: Option<&[u8]>,
    ) -> Result<bool> {
        let n = self
            .query(FINISH)
            .arg(state)
            .arg(result)
            .arg(id.bytes())
            .arg(seq)
            .run(conn)
            .await?;
        Ok(n == 1)
    }

    /// Forget a finished run: its journal and its waits.
    pub(crate) async fn forget_run(&self, conn: &mut B::Connection, id: MessageId) -> Result<()> {
        self.query(FORGET).arg(id.bytes()).run(conn).await?;
        self.query(UNWAIT_ALL).arg(id.bytes()).run(conn).await?;
        Ok(())
    }

    /// Forget finished runs, their journals and their waits (any number of ids).
    pub(crate) async fn forget_runs(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<()> {
        self.exec_id_list(conn, FORGET_ALL, ids).await?;
        self.exec_id_list(conn, UNWAIT_RUNS, ids).await?;
        Ok(())
    }

    /// Emit an event kept for `retention_us`: true when this emit is the one kept, false when
    /// an event of the name was kept already (the first emit wins).
    pub(crate) async fn emit_event(
        &self,
        conn: &mut B::Connection,
        name: &str,
        payload: &[u8],
        retention_us: i64,
    ) -> Result<bool> {
        self.query(B::DURABLE.drop_expired_event)
            .arg(name.as_bytes())
            .run(conn)
            .await?;
        let n = self
            .query(B::DURABLE.emit)
            .arg(name.as_bytes())
            .arg(payload)
            .arg(retention_us)
            .run(conn)
            .await?;
        Ok(n == 1)
    }

    /// The kept event of a name, read with a shared lock so that an emit in progress is waited
    /// for: `(payload, emitted_at µs)`.
    pub(crate) async fn event_locked(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> Result<Option<(Vec<u8>, i64)>> {
        let row = self
            .query(B::DURABLE.event_locked)
            .arg(name.as_bytes())
            .first(conn)
            .await?;
        row.map(|r| Ok((r.col(0)?, r.col(1)?))).transpose()
    }

    /// Register that message `id` of queue `queue_id` waits for event `name`.
    pub(crate) async fn wait_for_event(
        &self,
        conn: &mut B::Connection,
        name: &str,
        id: MessageId,
        queue_id: i32,
    ) -> Result<()> {
        self.query(B::DURABLE.wait)
            .arg(name.as_bytes())
            .arg(id.bytes())
            .arg(queue_id)
            .run(conn)
            .await?;
        Ok(())
    }

    /// Message `id` no longer waits for event `name`.
    pub(crate) async fn unwait(
        &self,
        conn: &mut B::Connection,
        name: &str,
        id: MessageId,
    ) -> Result<()> {
        self.query(UNWAIT)
            .arg(name.as_bytes())
            .arg(id.bytes())
            .run(conn)
            .await?;
        Ok(())
    }

    /// No run waits for event `name` any more: its emit woke them all.
    pub(crate) async fn unwait_event(&self, conn: &mut B::Connection, name: &str) -> Result<()> {
        self.query(UNWAIT_EVENT)
            .arg(name.as_bytes())
            .run(conn)
            .await?;
        Ok(())
    }

    /// The events message `id` waits for.
    pub(crate) async fn waits_of(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Vec<String>> {
        let rows = self.query(WAITS_OF).arg(id.bytes()).rows(conn).await?;
        rows.iter()
            .map(|r| Ok(r.opt_text_at(0)?.unwrap_or_default()))
            .collect()
    }

    /// Where message `id` stands, its row read locked (an ack in progress is waited for).
    pub(crate) async fn child_state(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<ChildState> {
        let row = self
            .query(B::DURABLE.message_locked)
            .arg(id.bytes())
            .first(conn)
            .await?;
        if row.is_none() {
            return Ok(ChildState::Gone);
        }
        let dead = self.query(IS_DEAD).arg(id.bytes()).first(conn).await?;
        Ok(if dead.is_some() {
            ChildState::Dead
        } else {
            ChildState::Pending
        })
    }

    /// The events runs wait for, the longest awaited first: `(name, runs, since µs)`.
    pub(crate) async fn awaited_events(
        &self,
        conn: &mut B::Connection,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>> {
        let rows = self
            .query(B::DURABLE.awaited)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.opt_text_at(0)?.unwrap_or_default(), r.col(1)?, r.col(2)?)))
            .collect()
    }

    /// The runs waiting for event `name`, the longest first: `(message, queue name, since µs)`.
    pub(crate) async fn waiting_runs(
        &self,
        conn: &mut B::Connection,
        name: &str,
        limit: usize,
    ) -> Result<Vec<(MessageId, String, i64)>> {
        let rows = self
            .query(B::DURABLE.waiting_runs)
            .arg(name.as_bytes())
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.id_at(0)?, r.col(1)?, r.col(2)?)))
            .collect()
    }

    /// The runs waiting for event `name`, their wait rows locked: `(message, queue)`.
    pub(crate) async fn waiters(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> Result<Vec<(MessageId, i32)>> {
        let rows = self
            .query(B::DURABLE.waiters)
            .arg(name.as_bytes())
            .rows(conn)
            .await?;
        rows.iter().map(|r| Ok((r.id_at(0)?, r.col(1)?))).collect()
    }

    /// Move a delayed message into `ready` now, if it is still delayed: a suspended run whose
    /// event came. Returns whether it was.
    pub(crate) async fn wake_now(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        id: MessageId,
    ) -> Result<bool> {
        let Some(entry) = self.take_scheduled(conn, id).await? else {
            return Ok(false);
        };
        self.place(conn, queue_id, &[(entry, 0)]).await?;
        Ok(true)
    }

    /// Take delayed message `id` out of `scheduled` (its row locked first), to put it back in
    /// line: its place there, or `None` when it is not delayed. Shared with a replacing send
    /// (`enqueue.rs`).
    pub(crate) async fn take_scheduled(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Option<Entry>> {
        let Some(row) = self
            .query(B::DURABLE.scheduled_row)
            .arg(id.bytes())
            .first(conn)
            .await?
        else {
            return Ok(None);
        };
        let entry = Entry {
            id: row.id_at(0)?,
            priority: row.col(1)?,
            attempts: row.col(2)?,
            token: row.col(3)?,
        };
        self.exec_id_list(conn, B::MAINTAIN.delete_scheduled, &[id])
            .await?;
        Ok(Some(entry))
    }

    /// Delete up to `limit` events whose retention ended, and look at the journals of up to
    /// `limit` messages after `after` (in id order), forgetting those whose message is gone
    /// (acked without the journal, cancelled, purged). Returns the events deleted, the
    /// journals forgotten, and where the next look starts (`None`: back at the beginning).
    /// Each call reads a bounded page: a million sleeping runs cost the housekeeping no more.
    pub(crate) async fn prune_durable(
        &self,
        conn: &mut B::Connection,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<(u64, usize, Option<MessageId>)> {
        let events = self
            .query(B::DURABLE.prune_events)
            .arg(limit as i64)
            .run(conn)
            .await?;
        let start = [0u8; 16];
        let from: &[u8] = after.as_ref().map_or(&start[..], |id| id.bytes());
        let rows = self
            .query(JOURNALS_AFTER)
            .arg(from)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        let page = rows
            .iter()
            .map(|r| r.id_at(0))
            .collect::<Result<Vec<MessageId>>>()?;
        let existing = self.fetch_id_list(conn, EXISTING, &page).await?;
        let existing = existing
            .iter()
            .map(|r| r.id_at(0))
            .collect::<Result<std::collections::HashSet<MessageId>>>()?;
        let mut forgotten = 0;
        for id in page.iter().filter(|id| !existing.contains(id)) {
            self.forget_run(conn, *id).await?;
            forgotten += 1;
        }
        let next = if page.len() < limit {
            None
        } else {
            page.last().copied()
        };
        Ok((events, forgotten, next))
    }
}
