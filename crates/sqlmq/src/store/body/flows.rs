//! Batches, dependencies and results: the flow tables, kept in the transactions that send and
//! end messages.
//!
//! A *tracked* message — a batch's member or callback, a dependency, a dependant — has a
//! `flow_nodes` row and its stored key carries [`FLOW_MARK`] (`slots.rs`), before its line key
//! if it has one. Every path that ends a message already hands its stored key to
//! [`SqlStore::release_keys`]; the mark sends tracked ones here ([`SqlStore::end_flow`]), in the
//! same transaction, so untracked messages pay nothing and the claim's statements do not
//! change.
//!
//! - A dependant waits in `waiting` with `waiting` = its dependencies not yet acked and
//!   `held` = those that are dead letters. An ack lowers its dependants' `waiting` and
//!   releases (to `ready`, `scheduled` or its key's line) those left with none; a dead letter
//!   raises `held`, its redrive lowers it; a cancel cancels the dependants that wait on it.
//!   Each update takes the dependant's node row lock, so two dependencies acked at once
//!   serialise on it, and exactly one of them sees the count reach zero.
//! - A batch member's end updates the batch's counts with its row locked; the end that leaves
//!   a sealed batch with no member pending finishes it (`state` 2, which no later end changes)
//!   and releases or cancels its callbacks, which wait in `waiting` from the batch's creation.
//!   So each callback is released by exactly one transaction: the one whose commit finishes
//!   the batch.
//! - A dependency on a stored message that is not tracked yet tracks it first: with its lease
//!   row (if any) and message row locked, in the order an ack locks them, the mark is added to
//!   both keys, so that its end — whichever transaction commits it — comes here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::slots::{FLOW_MARK, line_key};
use super::{Columns, SqlStore, Statement};
use crate::domain::{
    BatchId, BatchState, BatchStatus, BatchStep, Error, MessageId, Result, Role, StepState,
    time_from_micros,
};
use crate::store::Backend;
use crate::store::rows::{
    DependencyRow, Entry, FlowItem, Keyed, ParkedRecord, PendingBatch, PendingRow,
};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// The flow statements that differ by backend.
pub struct FlowSql {
    /// The database clock in µs: one row, one column.
    pub now: &'static str,
    /// Nodes by id, locked (`{list}` of ids): `id, batch_id, role, state, queue_id`.
    pub lock_nodes: &'static str,
    /// A lease row by id, locked: `id`.
    pub lock_lease: &'static str,
    /// A message row by id, locked: `queue_id, ordering_key`.
    pub lock_message: &'static str,
    /// A batch row, locked (id): `state, pending, dead, cancelled`.
    pub lock_batch: &'static str,
}

/// What ended a tracked message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Acked (or taken): its dependants may run.
    Acked,
    /// Dead-lettered: its dependants are held.
    Dead,
    /// Cancelled, purged, or a dead letter deleted: its dependants are cancelled.
    Cancelled,
}

const PENDING: i16 = 0;
const SUCCEEDED: i16 = 1;
const DEAD: i16 = 2;
const CANCELLED: i16 = 3;

const INSERT_BATCH: &str = "INSERT INTO {p}batches \
    (id, state, members, pending, succeeded, dead, cancelled, created_us, finished_us) \
    VALUES (?, ?, 0, 0, 0, 0, 0, ?, NULL)";
const ADD_MEMBERS: &str = "UPDATE {p}batches SET members = members + ?, pending = pending + ? \
    WHERE id = ? AND state = 0";
const BATCH_STATE: &str = "SELECT state FROM {p}batches WHERE id = ?";
const SEAL: &str = "UPDATE {p}batches SET state = 1 WHERE id = ? AND state = 0";
const COUNT_ENDS: &str = "UPDATE {p}batches SET pending = pending - ?, succeeded = succeeded + ?, \
    dead = dead + ?, cancelled = cancelled + ? WHERE id = ? AND state < 2";
const REOPEN_MEMBER: &str = "UPDATE {p}batches SET pending = pending + 1, dead = dead - 1 \
    WHERE id = ? AND state < 2";
const FINISH: &str = "UPDATE {p}batches SET state = 2, finished_us = ? WHERE id = ?";
const CALLBACKS: &str =
    "SELECT id, role FROM {p}flow_nodes WHERE batch_id = ? AND role <> 0 AND state = 0";
const INSERT_NODES: &str = "INSERT INTO {p}flow_nodes \
    (id, queue_id, batch_id, step, role, waiting, held, state, ended_us) VALUES {list}";
const NODE_ROW: &str = "(?,?,?,?,?,?,?,?,NULL)";
const NODE_PARAMS: usize = 8;
const INSERT_EDGES: &str = "INSERT INTO {p}flow_edges (parent, child) VALUES {list}";
const EDGE_ROW: &str = "(?,?)";
const INSERT_WAITING: &str = "INSERT INTO {p}waiting \
    (id, queue_id, priority, delay_us, attempts, token) VALUES {list}";
const WAITING_ROW: &str = "(?,?,?,?,?,?)";
const WAITING_PARAMS: usize = 6;
const END_NODES: &str = "UPDATE {p}flow_nodes SET state = ?, ended_us = ? WHERE id IN ({list})";
const REOPEN_NODES: &str =
    "UPDATE {p}flow_nodes SET state = 0, ended_us = NULL WHERE id IN ({list})";
const CHILDREN: &str = "SELECT parent, child FROM {p}flow_edges WHERE parent IN ({list})";
const ADD_WAITING: &str = "UPDATE {p}flow_nodes SET waiting = waiting + ? WHERE id IN ({list})";
const ADD_HELD: &str = "UPDATE {p}flow_nodes SET held = held + ? WHERE id IN ({list})";
const RUNNABLE: &str = "SELECT n.id FROM {p}flow_nodes n JOIN {p}waiting w ON w.id = n.id \
    WHERE n.id IN ({list}) AND n.waiting <= 0 AND n.held <= 0 AND n.state = 0 AND n.role = 0";
const TAKE_WAITING: &str = "SELECT w.id, w.queue_id, w.priority, w.delay_us, w.attempts, \
    w.token, m.ordering_key FROM {p}waiting w JOIN {p}messages m ON m.id = w.id \
    WHERE w.id IN ({list})";
pub(crate) const DELETE_WAITING: &str = "DELETE FROM {p}waiting WHERE id IN ({list})";
const DEAD_ROW: &str = "SELECT id FROM {p}dead WHERE id = ?";
const MARK: &str = "UPDATE {p}messages SET ordering_key = ? WHERE id = ?";
const MARK_LEASE: &str = "UPDATE {p}leases SET ordering_key = ? WHERE id = ?";
const BATCH: &str = "SELECT state, members, pending, succeeded, dead, cancelled, created_us, \
    finished_us FROM {p}batches WHERE id = ?";
/// Batches of one state (state, n), the newest first: unfinished ones by their creation,
/// finished ones by their end (`finished`'s order, read backwards). Columns: id, then
/// [`BATCH`]'s.
const BATCHES_UNFINISHED: &str = "SELECT id, state, members, pending, succeeded, dead, cancelled, \
    created_us, finished_us FROM {p}batches WHERE state = ? ORDER BY created_us DESC, id DESC \
    LIMIT ?";
const BATCHES_FINISHED: &str = "SELECT id, state, members, pending, succeeded, dead, cancelled, \
    created_us, finished_us FROM {p}batches WHERE state = 2 ORDER BY finished_us DESC, id DESC \
    LIMIT ?";
const STEPS: &str = "SELECT n.id, q.name, n.step, n.role, n.state, n.held, \
    CASE WHEN w.id IS NULL THEN 0 ELSE 1 END, CASE WHEN r.id IS NULL THEN 0 ELSE 1 END \
    FROM {p}flow_nodes n JOIN {p}queues q ON q.id = n.queue_id \
    LEFT JOIN {p}waiting w ON w.id = n.id LEFT JOIN {p}results r ON r.id = n.id \
    WHERE n.batch_id = ? ORDER BY n.role, n.id";
const STEP_EDGES: &str = "SELECT e.child, e.parent FROM {p}flow_edges e \
    JOIN {p}flow_nodes n ON n.id = e.child WHERE n.batch_id = ? ORDER BY e.parent";
const DELETE_RESULT: &str = "DELETE FROM {p}results WHERE id = ?";
const INSERT_RESULT: &str = "INSERT INTO {p}results (id, result, expires_us) VALUES (?, ?, ?)";
const RESULT: &str = "SELECT result FROM {p}results WHERE id = ? AND expires_us > ?";
const DEPENDENCY_RESULTS: &str = "SELECT e.parent, n.step, r.result FROM {p}flow_edges e \
    LEFT JOIN {p}flow_nodes n ON n.id = e.parent \
    LEFT JOIN {p}results r ON r.id = e.parent AND r.expires_us > ? \
    WHERE e.child = ? ORDER BY e.parent";
const ORPHANED_NODES: &str = "SELECT n.id, n.state FROM {p}flow_nodes n \
    LEFT JOIN {p}messages m ON m.id = n.id \
    WHERE n.queue_id = ? AND n.state IN (0, 2) AND m.id IS NULL LIMIT 500";
const OLD_NODES: &str = "SELECT n.id FROM {p}flow_nodes n LEFT JOIN {p}batches b ON b.id = n.batch_id \
    WHERE n.state <> 0 AND n.ended_us < ? AND (b.id IS NULL OR b.state = 2) LIMIT 1000";
const DELETE_NODES: &str = "DELETE FROM {p}flow_nodes WHERE id IN ({list})";
const DELETE_EDGES_OF: [&str; 2] = [
    "DELETE FROM {p}flow_edges WHERE parent IN ({list})",
    "DELETE FROM {p}flow_edges WHERE child IN ({list})",
];
const OLD_BATCHES: &str = "SELECT id FROM {p}batches b WHERE state = 2 AND finished_us < ? \
    AND NOT EXISTS (SELECT 1 FROM {p}flow_nodes n WHERE n.batch_id = b.id) LIMIT 1000";
const DELETE_BATCH: &str = "DELETE FROM {p}batches WHERE id = ?";
const INSERT_RECORDS: &str = "INSERT INTO {p}flow_records \
    (id, batch_id, role, topic_id, partition_no, record_key, headers, body) VALUES {list}";
const RECORD_ROW: &str = "(?,?,?,?,?,?,?,?)";
const PARKED: &str = "SELECT id, role, topic_id, partition_no, record_key, headers, body \
    FROM {p}flow_records WHERE batch_id = ? ORDER BY id";
const DELETE_PARKED: &str = "DELETE FROM {p}flow_records WHERE batch_id = ?";
const OLD_RESULTS: &str = "SELECT id FROM {p}results WHERE expires_us < ? LIMIT 1000";
const DELETE_RESULTS: &str = "DELETE FROM {p}results WHERE id IN ({list})";

/// Messages going into a queue's lines: into `ready`/`scheduled` (with their delay), and
/// behind their keys.
type Lines = (Vec<(Entry, i64)>, Vec<Keyed>);

/// Each message's first end only (a list may name one twice).
fn dedup_ends(ended: Vec<(MessageId, Ending)>) -> Vec<(MessageId, Ending)> {
    let mut seen = BTreeSet::new();
    ended
        .into_iter()
        .filter(|(id, _)| seen.insert(*id))
        .collect()
}

/// A node as its end reads it.
struct Node {
    batch: Option<BatchId>,
    role: Role,
    state: i16,
}

/// How a batch's counts move: pending down by the sum, each outcome up by its count.
#[derive(Default)]
struct Ends {
    succeeded: i64,
    dead: i64,
    cancelled: i64,
}

/// A batch's counts from `row`'s [`BATCH`] columns, from column `at` on (no steps).
fn counts<R: Columns>(row: &R, id: BatchId, at: usize) -> Result<BatchStatus>
where
    R::Database: super::Types,
{
    let count = |i: usize| -> Result<u64> { Ok(row.col::<i64>(at + i)?.max(0) as u64) };
    Ok(BatchStatus {
        id,
        state: BatchState::from_code(row.col(at)?),
        members: count(1)?,
        pending: count(2)?,
        succeeded: count(3)?,
        dead: count(4)?,
        cancelled: count(5)?,
        created_at: time_from_micros(row.col(at + 6)?),
        finished_at: row.col::<Option<i64>>(at + 7)?.map(time_from_micros),
        steps: Vec::new(),
    })
}

impl<B: Backend> SqlStore<B> {
    /// The database clock in µs.
    async fn flow_now(&self, conn: &mut B::Connection) -> Result<i64> {
        let row = self.query(B::FLOWS.now).first(conn).await?;
        row.map_or(Ok(0), |r| r.col(0))
    }

    /// Lock nodes by id (in id order): id → node.
    async fn lock_nodes(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, Node>> {
        let mut sorted = ids.to_vec();
        sorted.sort();
        sorted.dedup();
        let rows = self
            .fetch_id_list(conn, B::FLOWS.lock_nodes, &sorted)
            .await?;
        rows.iter()
            .map(|r| {
                let batch: Option<Vec<u8>> = r.col(1)?;
                Ok((
                    r.id_at(0)?,
                    Node {
                        batch: batch.as_deref().map(BatchId::from_slice).transpose()?,
                        role: Role::from_code(r.col(2)?),
                        state: r.col(3)?,
                    },
                ))
            })
            .collect()
    }

    /// A batch's state, or why members cannot be added to it.
    async fn refuse_closed(&self, conn: &mut B::Connection, id: BatchId) -> Error {
        match self.query(BATCH_STATE).arg(id.bytes()).first(conn).await {
            Ok(Some(_)) => Error::BatchSealed(id),
            Ok(None) => Error::BatchNotFound(id),
            Err(e) => e,
        }
    }

    async fn insert_waiting(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        rows: &[(Entry, i64)],
    ) -> Result<()> {
        self.insert_values(
            conn,
            INSERT_WAITING,
            WAITING_ROW,
            WAITING_PARAMS,
            rows,
            |q, (e, delay)| {
                q.arg(e.id.bytes())
                    .arg(queue_id)
                    .arg(e.priority)
                    .arg(*delay)
                    .arg(e.attempts)
                    .arg(e.token)
            },
        )
        .await
    }

    /// Track a stored message that is not tracked yet, because a message is sent that depends
    /// on it: lock its lease (if claimed) and its row, in an ack's order, mark both keys, and
    /// give it a node. Returns its state (pending or dead).
    async fn track_existing(&self, conn: &mut B::Connection, id: MessageId) -> Result<i16> {
        self.query(B::FLOWS.lock_lease)
            .arg(id.bytes())
            .first(conn)
            .await?;
        let row = self
            .query(B::FLOWS.lock_message)
            .arg(id.bytes())
            .first(conn)
            .await?
            .ok_or(Error::DependencyNotFound(id))?;
        let queue_id: i32 = row.col(0)?;
        let key: Option<Vec<u8>> = row.col(1)?;
        let mut marked = vec![FLOW_MARK as u8];
        marked.extend(key.unwrap_or_default());
        if marked.len() > crate::domain::MAX_NAME_LEN {
            return Err(Error::InvalidArgument(format!(
                "dependency {id} has a key of {} bytes: a dependency's key is at most {} bytes",
                marked.len() - 1,
                crate::domain::MAX_NAME_LEN - 1
            )));
        }
        for statement in [MARK, MARK_LEASE] {
            self.query(statement)
                .arg(marked.as_slice())
                .arg(id.bytes())
                .run(conn)
                .await?;
        }
        let dead = self.query(DEAD_ROW).arg(id.bytes()).first(conn).await?;
        let state = if dead.is_some() { DEAD } else { PENDING };
        self.list_query(INSERT_NODES, NODE_ROW, 1)
            .arg(id.bytes())
            .arg(queue_id)
            .arg(None::<&[u8]>)
            .arg(None::<&[u8]>)
            .arg(Role::Member.code())
            .arg(0i64)
            .arg(0i64)
            .arg(state)
            .run(conn)
            .await?;
        Ok(state)
    }

    /// Record how tracked messages ended, in the transaction that ended them: their nodes,
    /// their batches (finishing those they complete), their dependants (released, held or
    /// cancelled). Cancelling a dependant ends it too, so this works through a list.
    pub(crate) async fn end_flow(
        &self,
        conn: &mut B::Connection,
        ended: Vec<(MessageId, Ending)>,
    ) -> Result<()> {
        let mut work = dedup_ends(ended);
        let mut batches: BTreeMap<BatchId, Ends> = BTreeMap::new();
        let mut now = None;
        while !work.is_empty() {
            let ids: Vec<MessageId> = work.iter().map(|(id, _)| *id).collect();
            let nodes = self.lock_nodes(conn, &ids).await?;
            let now_us = match now {
                Some(n) => n,
                None => *now.insert(self.flow_now(conn).await?),
            };
            let mut acked = Vec::new();
            let mut dead = Vec::new();
            let mut cancelled = Vec::new();
            for (id, how) in std::mem::take(&mut work) {
                let Some(node) = nodes.get(&id) else { continue };
                let state = match (node.state, how) {
                    (PENDING, Ending::Acked) => SUCCEEDED,
                    (PENDING, Ending::Dead) => DEAD,
                    (PENDING | DEAD, Ending::Cancelled) => CANCELLED,
                    // Ended already (a second release of the same end): nothing moves.
                    _ => continue,
                };
                if let (Some(b), Role::Member, PENDING) = (node.batch, node.role, node.state) {
                    let ends = batches.entry(b).or_default();
                    match state {
                        SUCCEEDED => ends.succeeded += 1,
                        DEAD => ends.dead += 1,
                        _ => ends.cancelled += 1,
                    }
                }
                match state {
                    SUCCEEDED => acked.push(id),
                    DEAD => dead.push(id),
                    _ => cancelled.push(id),
                }
            }
            for (ids, state) in [(&acked, SUCCEEDED), (&dead, DEAD), (&cancelled, CANCELLED)] {
                self.exec_with_ids(conn, END_NODES, &[state.into(), now_us], ids)
                    .await?;
            }
            let runnable = self.adjust_children(conn, &acked, ADD_WAITING, -1).await?;
            self.release_waiting(conn, &runnable).await?;
            self.adjust_children(conn, &dead, ADD_HELD, 1).await?;
            let children = self.children(conn, &cancelled).await?;
            let doomed: Vec<MessageId> = children.into_keys().collect();
            self.cancel_waiting(conn, &doomed).await?;
            work = doomed.into_iter().map(|c| (c, Ending::Cancelled)).collect();
        }
        for (batch, ends) in batches {
            self.query(COUNT_ENDS)
                .arg(ends.succeeded + ends.dead + ends.cancelled)
                .arg(ends.succeeded)
                .arg(ends.dead)
                .arg(ends.cancelled)
                .arg(batch.bytes())
                .run(conn)
                .await?;
            self.finish_if_done(conn, batch).await?;
        }
        Ok(())
    }

    /// Run `template` — its `values`, then a `{list}` of ids — for `ids`, in bucketed chunks
    /// (a padded list repeats its last id, which changes nothing in an `IN` list).
    async fn exec_with_ids(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        values: &[i64],
        ids: &[MessageId],
    ) -> Result<()> {
        for chunk in ids.chunks(MAX_LIST) {
            let mut q = self.list_query(template, "?", bucket(chunk.len()));
            for v in values {
                q = q.arg(*v);
            }
            for id in padded(chunk) {
                q = q.arg(id.bytes());
            }
            q.run(conn).await?;
        }
        Ok(())
    }

    /// The dependants of `parents`, with how many of them each depends on.
    async fn children(
        &self,
        conn: &mut B::Connection,
        parents: &[MessageId],
    ) -> Result<BTreeMap<MessageId, i64>> {
        // One row per edge: `IN` matches a row once, so a padded list repeats none.
        let rows = self.fetch_id_list(conn, CHILDREN, parents).await?;
        let mut children: BTreeMap<MessageId, i64> = BTreeMap::new();
        for r in &rows {
            *children.entry(r.id_at(1)?).or_default() += 1;
        }
        Ok(children)
    }

    /// Add `sign` × (edges from `parents`) to a counter of each dependant (in id order, so
    /// concurrent ends lock them in one order); returns the dependants that can run now.
    async fn adjust_children(
        &self,
        conn: &mut B::Connection,
        parents: &[MessageId],
        statement: &'static str,
        sign: i64,
    ) -> Result<Vec<MessageId>> {
        if parents.is_empty() {
            return Ok(Vec::new());
        }
        let children = self.children(conn, parents).await?;
        // One statement per distinct count (nearly always one: a dependant names each
        // dependency once), over the dependants in id order.
        let mut by_count: BTreeMap<i64, Vec<MessageId>> = BTreeMap::new();
        for (c, n) in &children {
            by_count.entry(*n).or_default().push(*c);
        }
        for (n, ids) in &by_count {
            self.exec_with_ids(conn, statement, &[sign * n], ids)
                .await?;
        }
        let ids: Vec<MessageId> = children.into_keys().collect();
        let rows = self.fetch_id_list(conn, RUNNABLE, &ids).await?;
        let runnable: BTreeSet<MessageId> =
            rows.iter().map(|r| r.id_at(0)).collect::<Result<_>>()?;
        Ok(runnable.into_iter().collect())
    }

    /// Move waiting messages into line: `ready` or `scheduled` (their own delay counts from
    /// now), or behind their key.
    async fn release_waiting(&self, conn: &mut B::Connection, ids: &[MessageId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let rows = self.fetch_id_list(conn, TAKE_WAITING, ids).await?;
        let mut by_queue: BTreeMap<i32, Lines> = BTreeMap::new();
        let mut taken = Vec::with_capacity(rows.len());
        for r in &rows {
            let entry = Entry {
                id: r.id_at(0)?,
                priority: r.col(2)?,
                attempts: r.col(4)?,
                token: r.col(5)?,
            };
            taken.push(entry.id);
            let delay_us: i64 = r.col(3)?;
            let stored: Option<Vec<u8>> = r.col(6)?;
            let (placed, keyed) = by_queue.entry(r.col(1)?).or_default();
            match stored.as_deref().and_then(|k| line_key(k).1) {
                Some(key) => keyed.push(Keyed {
                    key: String::from_utf8(key.to_vec())
                        .map_err(|e| Error::Corrupt(format!("stored key: {e}")))?,
                    entry,
                    delay_us,
                }),
                None => placed.push((entry, delay_us)),
            }
        }
        self.exec_id_list(conn, DELETE_WAITING, &taken).await?;
        for (queue_id, (placed, keyed)) in by_queue {
            self.place(conn, queue_id, &placed).await?;
            self.enqueue_keyed(conn, queue_id, keyed).await?;
        }
        Ok(())
    }

    /// Delete waiting messages for good (their nodes are ended by the caller).
    async fn cancel_waiting(&self, conn: &mut B::Connection, ids: &[MessageId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.exec_id_list(conn, DELETE_WAITING, ids).await?;
        self.exec_id_list(conn, B::SETTLE.delete_messages, ids)
            .await?;
        Ok(())
    }

    /// Finish `batch` if it is sealed and no member is pending: release the callbacks whose
    /// condition holds and cancel the others. Its row is locked first, so only one
    /// transaction finishes it.
    async fn finish_if_done(&self, conn: &mut B::Connection, batch: BatchId) -> Result<()> {
        let Some(row) = self
            .query(B::FLOWS.lock_batch)
            .arg(batch.bytes())
            .first(conn)
            .await?
        else {
            return Ok(());
        };
        let (state, pending): (i16, i64) = (row.col(0)?, row.col(1)?);
        if state != 1 || pending > 0 {
            return Ok(());
        }
        let failed = row.col::<i64>(2)? + row.col::<i64>(3)? > 0;
        let now = self.flow_now(conn).await?;
        self.query(FINISH)
            .arg(now)
            .arg(batch.bytes())
            .run(conn)
            .await?;
        let rows = self.query(CALLBACKS).arg(batch.bytes()).rows(conn).await?;
        let mut send = Vec::new();
        let mut drop = Vec::new();
        for r in &rows {
            let id = r.id_at(0)?;
            let fires = Role::from_code(r.col(1)?).fires(failed);
            if fires { &mut send } else { &mut drop }.push(id);
        }
        // A released callback's node stays pending until its own ack; a dropped one ends now.
        self.exec_with_ids(conn, END_NODES, &[CANCELLED.into(), now], &drop)
            .await?;
        self.release_waiting(conn, &send).await?;
        self.cancel_waiting(conn, &drop).await?;
        self.publish_parked(conn, batch, failed).await
    }

    /// Publish the finished batch's callbacks to topics whose condition holds, in its
    /// transaction, and forget them all.
    async fn publish_parked(
        &self,
        conn: &mut B::Connection,
        batch: BatchId,
        failed: bool,
    ) -> Result<()> {
        let rows = self.query(PARKED).arg(batch.bytes()).rows(conn).await?;
        if rows.is_empty() {
            return Ok(());
        }
        for r in &rows {
            if !Role::from_code(r.col(1)?).fires(failed) {
                continue;
            }
            let headers: Option<Vec<u8>> = r.col(5)?;
            let key: Option<Vec<u8>> = r.col(4)?;
            let body: Vec<u8> = r.col(6)?;
            let row = PendingRow {
                partition: r.col(3)?,
                id: r.id_at(0)?,
                key: key.as_deref(),
                headers: headers
                    .map(String::from_utf8)
                    .transpose()
                    .map_err(|e| Error::Corrupt(format!("parked headers: {e}")))?,
                body: &body,
            };
            let one = PendingBatch {
                topic_id: r.col(2)?,
                rows: std::slice::from_ref(&row),
            };
            B::publish(self, conn, &one).await?;
        }
        self.query(DELETE_PARKED)
            .arg(batch.bytes())
            .run(conn)
            .await?;
        Ok(())
    }

    /// Dead letters of tracked messages went back in line: their dependants are held by one
    /// dependency fewer, their batches (unless finished) count them pending again.
    pub(crate) async fn redrive_flow(
        &self,
        conn: &mut B::Connection,
        ids: &[MessageId],
    ) -> Result<()> {
        let nodes = self.lock_nodes(conn, ids).await?;
        let mut back = Vec::new();
        for (id, node) in &nodes {
            if node.state != DEAD {
                continue;
            }
            if let (Some(b), Role::Member) = (node.batch, node.role) {
                self.query(REOPEN_MEMBER).arg(b.bytes()).run(conn).await?;
            }
            back.push(*id);
        }
        self.exec_with_ids(conn, REOPEN_NODES, &[], &back).await?;
        self.adjust_children(conn, &back, ADD_HELD, -1).await?;
        Ok(())
    }

    /// Nodes of `queue_id` whose messages are gone without an end (a purge deletes rows in
    /// bulk): end them as cancelled. Returns how many.
    pub(crate) async fn repair_flows(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
    ) -> Result<usize> {
        let rows = self.query(ORPHANED_NODES).arg(queue_id).rows(conn).await?;
        let ids = rows
            .iter()
            .map(|r| Ok((r.id_at(0)?, Ending::Cancelled)))
            .collect::<Result<Vec<_>>>()?;
        let n = ids.len();
        self.end_flow(conn, ids).await?;
        Ok(n)
    }
}

/// The flow tables' rows. A tracked message's end is recorded by the store itself, in the
/// transaction of the end; these are what the engine calls.
impl<B: Backend> SqlStore<B> {
    /// Keep a new batch's callbacks to topics until it finishes.
    pub(crate) async fn park_records(
        &self,
        conn: &mut B::Connection,
        batch: BatchId,
        records: &[ParkedRecord],
    ) -> Result<()> {
        self.insert_values(conn, INSERT_RECORDS, RECORD_ROW, 8, records, |q, r| {
            q.arg(r.id.bytes())
                .arg(batch.bytes())
                .arg(r.role.code())
                .arg(r.topic_id)
                .arg(r.partition)
                .arg(r.key.as_deref().map(str::as_bytes))
                .arg(r.headers.as_deref().map(str::as_bytes))
                .arg(r.body.as_slice())
        })
        .await
    }

    /// Record tracked messages just inserted into `queue_id` (their rows carry the mark):
    /// their nodes and dependencies, each batch's new members; then put each where it belongs
    /// — in line when nothing holds it, otherwise in `waiting`.
    pub(crate) async fn flow_send(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        items: &[FlowItem],
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let parents: Vec<MessageId> = items
            .iter()
            .flat_map(|i| i.depends_on.iter().copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut states = self.lock_nodes(conn, &parents).await?;
        // A dependency sent in this same statement group has no node yet.
        let sent: HashSet<MessageId> = items.iter().map(|i| i.id).collect();
        for &p in &parents {
            if let Some(node) = states.get(&p) {
                if node.state == CANCELLED {
                    return Err(Error::DependencyNotFound(p));
                }
            } else if !sent.contains(&p) {
                let state = self.track_existing(conn, p).await?;
                states.insert(
                    p,
                    Node {
                        batch: None,
                        role: Role::Member,
                        state,
                    },
                );
            }
        }
        // The batches' rows after the dependencies' nodes: the order an end takes them in.
        let mut members: BTreeMap<BatchId, i64> = BTreeMap::new();
        for item in items.iter().filter(|i| i.role == Role::Member) {
            if let Some(b) = item.batch {
                *members.entry(b).or_default() += 1;
            }
        }
        for (&batch, &n) in &members {
            let added = self
                .query(ADD_MEMBERS)
                .arg(n)
                .arg(n)
                .arg(batch.bytes())
                .run(conn)
                .await?;
            if added != 1 {
                return Err(self.refuse_closed(conn, batch).await);
            }
        }
        let mut nodes = Vec::with_capacity(items.len());
        let mut edges = Vec::new();
        let mut placed = Vec::new();
        let mut keyed = Vec::new();
        let mut waiting = Vec::new();
        for item in items {
            let (mut unmet, mut held) = (0i64, 0i64);
            for p in &item.depends_on {
                edges.push((*p, item.id));
                match states.get(p).map(|n| n.state) {
                    Some(SUCCEEDED) => {}
                    Some(DEAD) => {
                        unmet += 1;
                        held += 1;
                    }
                    // Pending, or sent in this same statement group (not acked yet).
                    _ => unmet += 1,
                }
            }
            nodes.push((item, unmet, held));
            let entry = Entry {
                id: item.id,
                priority: item.priority,
                attempts: 0,
                token: 0,
            };
            if unmet > 0 || item.role != Role::Member {
                waiting.push((entry, item.delay_us));
            } else {
                match &item.line_key {
                    Some(key) => keyed.push(Keyed {
                        key: key.clone(),
                        entry,
                        delay_us: item.delay_us,
                    }),
                    None => placed.push((entry, item.delay_us)),
                }
            }
        }
        self.insert_values(
            conn,
            INSERT_NODES,
            NODE_ROW,
            NODE_PARAMS,
            &nodes,
            |q, (item, unmet, held)| {
                q.arg(item.id.bytes())
                    .arg(queue_id)
                    .arg(item.batch.as_ref().map(BatchId::bytes))
                    .arg(item.step.as_deref().map(str::as_bytes))
                    .arg(item.role.code())
                    .arg(*unmet)
                    .arg(*held)
                    .arg(PENDING)
            },
        )
        .await?;
        self.insert_values(conn, INSERT_EDGES, EDGE_ROW, 2, &edges, |q, (p, c)| {
            q.arg(p.bytes()).arg(c.bytes())
        })
        .await?;
        self.insert_waiting(conn, queue_id, &waiting).await?;
        self.place(conn, queue_id, &placed).await?;
        self.enqueue_keyed(conn, queue_id, keyed).await
    }

    /// Create a batch, open or sealed (then it finishes when its last member does).
    pub(crate) async fn create_batch_row(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
        open: bool,
    ) -> Result<()> {
        let now = self.flow_now(conn).await?;
        self.query(INSERT_BATCH)
            .arg(id.bytes())
            .arg(if open { 0i16 } else { 1i16 })
            .arg(now)
            .run(conn)
            .await?;
        Ok(())
    }

    /// Seal an open batch; finish it when no member is pending. False when it is not open.
    pub(crate) async fn seal_batch_row(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
    ) -> Result<bool> {
        let sealed = self.query(SEAL).arg(id.bytes()).run(conn).await? == 1;
        if sealed {
            self.finish_if_done(conn, id).await?;
        }
        Ok(sealed)
    }

    /// Up to `n` batches in `state`, the newest first, with their counts (no steps).
    pub(crate) async fn batches(
        &self,
        conn: &mut B::Connection,
        state: BatchState,
        n: usize,
    ) -> Result<Vec<BatchStatus>> {
        let query = match state {
            BatchState::Open => self.query(BATCHES_UNFINISHED).arg(0_i16),
            BatchState::Sealed => self.query(BATCHES_UNFINISHED).arg(1_i16),
            BatchState::Finished => self.query(BATCHES_FINISHED),
        };
        let rows = query.arg(n as i64).rows(conn).await?;
        rows.iter()
            .map(|row| counts(row, BatchId::from_slice(row.id_at(0)?.bytes())?, 1))
            .collect()
    }

    /// A batch's counts and messages.
    pub(crate) async fn batch_status(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
    ) -> Result<Option<BatchStatus>> {
        let Some(row) = self.query(BATCH).arg(id.bytes()).first(conn).await? else {
            return Ok(None);
        };
        let mut status = counts(&row, id, 0)?;
        let mut deps: HashMap<MessageId, Vec<MessageId>> = HashMap::new();
        for r in self.query(STEP_EDGES).arg(id.bytes()).rows(conn).await? {
            deps.entry(r.id_at(0)?).or_default().push(r.id_at(1)?);
        }
        for r in self.query(STEPS).arg(id.bytes()).rows(conn).await? {
            let step_id = r.id_at(0)?;
            status.steps.push(BatchStep {
                id: step_id,
                queue: r.col(1)?,
                step: r.opt_text_at(2)?,
                role: Role::from_code(r.col(3)?),
                state: StepState::of(r.col(4)?, r.col::<i64>(6)? != 0, r.col(5)?),
                depends_on: deps.remove(&step_id).unwrap_or_default(),
                has_result: r.col::<i64>(7)? != 0,
            });
        }
        Ok(Some(status))
    }

    /// Keep `result` as the result of acked message `id` for `ttl_us`.
    pub(crate) async fn put_result(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
        result: &[u8],
        ttl_us: i64,
    ) -> Result<()> {
        let now = self.flow_now(conn).await?;
        self.query(DELETE_RESULT).arg(id.bytes()).run(conn).await?;
        self.query(INSERT_RESULT)
            .arg(id.bytes())
            .arg(result)
            .arg(now.saturating_add(ttl_us))
            .run(conn)
            .await?;
        Ok(())
    }

    /// The result an ack of `id` left, if it has not expired.
    pub(crate) async fn result_of(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Option<Vec<u8>>> {
        let now = self.flow_now(conn).await?;
        let row = self
            .query(RESULT)
            .arg(id.bytes())
            .arg(now)
            .first(conn)
            .await?;
        row.map(|r| r.col(0)).transpose()
    }

    /// The dependencies of `id`: each one's id, step name and result (if its ack left one).
    pub(crate) async fn dependency_results(
        &self,
        conn: &mut B::Connection,
        id: MessageId,
    ) -> Result<Vec<DependencyRow>> {
        let now = self.flow_now(conn).await?;
        let rows = self
            .query(DEPENDENCY_RESULTS)
            .arg(now)
            .arg(id.bytes())
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.id_at(0)?, r.opt_text_at(1)?, r.col(2)?)))
            .collect()
    }

    /// Delete what the flow tables keep past `cutoff_us` (µs on the database clock): ended
    /// nodes of finished batches (or of none) with their edges, finished batches left without
    /// nodes, expired results; a bounded step. Returns how many rows went.
    pub(crate) async fn prune_flows(
        &self,
        conn: &mut B::Connection,
        cutoff_us: i64,
    ) -> Result<usize> {
        let now = self.flow_now(conn).await?;
        let rows = self.query(OLD_NODES).arg(cutoff_us).rows(conn).await?;
        let nodes = rows
            .iter()
            .map(|r| r.id_at(0))
            .collect::<Result<Vec<_>>>()?;
        for statement in DELETE_EDGES_OF {
            self.exec_id_list(conn, statement, &nodes).await?;
        }
        self.exec_id_list(conn, DELETE_NODES, &nodes).await?;
        let rows = self.query(OLD_BATCHES).arg(cutoff_us).rows(conn).await?;
        for r in &rows {
            let id: Vec<u8> = r.col(0)?;
            self.query(DELETE_BATCH)
                .arg(id.as_slice())
                .run(conn)
                .await?;
        }
        let results = self.query(OLD_RESULTS).arg(now).rows(conn).await?;
        let results = results
            .iter()
            .map(|r| r.id_at(0))
            .collect::<Result<Vec<_>>>()?;
        self.exec_id_list(conn, DELETE_RESULTS, &results).await?;
        Ok(nodes.len() + rows.len() + results.len())
    }
}
