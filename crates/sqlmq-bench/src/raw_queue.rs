//! `raw.queue`: the plainest durable queue the same server can run, as the ceiling a queue on
//! it can reach — one table of the raw shape (`raw.rs`), producers inserting single rows
//! (autocommit), consumers taking batches with PostgreSQL's pattern: a transaction, `SELECT
//! id, body … ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED` (on SQLite without `SKIP LOCKED`:
//! its one writer serialises the transactions), a `DELETE` of those ids, `COMMIT`. No
//! priorities, delays, retries, keys or leases: whatever sqlmq adds costs on top of this.
//!
//! Two figures: [`DRAIN`], a pre-filled table drained by [`CONSUMERS`] consumers, and
//! [`MIXED`], [`MIXED_PRODUCERS`] producers inserting while the consumers poll as sqlmq's
//! consumers do (`PollDelay`). sqlmq's `take_in` figures, the same pattern on sqlmq's tables,
//! are compared with them; `peer.postgres` runs the same pattern on PostgreSQL.
//!
//! The same two again with leases ([`LEASE_DRAIN`], [`LEASE_MIXED`]): the cheapest lease queue
//! the server can run (the lease in the message row, a claim transaction, a delete to ack),
//! compared with the lock-held figures. It is the ceiling of any design with leases on this
//! server, sqlmq's included: how close to the plain queue leases can come at all.
//!
//! And the plain pattern once more on a table kept in priority order whose ids are unique
//! ([`KEYED_DRAIN`], [`KEYED_MIXED`]): what a queue with priorities that finds and
//! deduplicates messages by id — sqlmq's guarantees — can reach at most when taking.
//!
//! And leases on that priority table, twice ([`KEYED_LEASE_DRAIN`], [`KEYED_LEASE_MIXED`];
//! [`INFLIGHT_DRAIN`], [`INFLIGHT_MIXED`]): one row per message in claim order with the lease in
//! it, the shape a one-row redesign of sqlmq's queues would take; the second time with an index
//! over the leases (`(queue_id, visible_at)`), without which expired leases and a dead process's
//! claims (released within about 20 s, whatever the lease length) are found only by reading
//! the whole backlog.
//!
//! Neither keeps a claim from reading past the messages in flight and scheduled at the head of
//! the queue (`raw.head` measures it), so two more one-row layouts put the state in the claim
//! index, with the id as primary key ([`STATED_DRAIN`], [`STATED_MIXED`]: a claim index
//! `(queue_id, state, priority, id)` and a second index over the timed states;
//! [`SINGLE_DRAIN`], [`SINGLE_MIXED`]: one index `(queue_id, state, priority, due_at, id)` for
//! every state, as River's jobs table has), and one keeps the rows themselves in that order
//! ([`CLUSTERED_DRAIN`], [`CLUSTERED_MIXED`]: primary key `(queue_id, state, priority, due_at,
//! id)`, the id unique; a state change moves the row).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use sqlx::Pool;
use tokio::task::JoinSet;

use super::args::{CONSUMERS, MIXED_PRODUCERS, MULTIROW_ROWS, RECEIVE_BATCH};
use super::backend::{Db, LayoutSql};
use super::context::Ctx;
use super::measure::body;
use super::outcome::Outcome;
use super::progress::Bar;
use super::raw::{
    multirow_insert, new_id, recreate_as, split, task_connection, transaction, with_table, write,
    write_on,
};
use super::report::Figure;
use super::track::Tracker;
use sqlmq_cli_common::poll::PollDelay;

/// Figure keys, referenced by the scenarios compared with them.
pub const DRAIN: &str = "raw.queue.drain.8";
/// See [`DRAIN`].
pub const MIXED: &str = "raw.queue.mixed.consume";
/// The lease queue's figures, each compared with its lock-held counterpart.
pub const LEASE_DRAIN: &str = "raw.queue.lease.drain.8";
/// See [`LEASE_DRAIN`].
pub const LEASE_MIXED: &str = "raw.queue.lease.mixed.consume";
/// The priority queue's figures, each compared with its plain counterpart.
pub const KEYED_DRAIN: &str = "raw.queue.keyed.drain.8";
/// See [`KEYED_DRAIN`].
pub const KEYED_MIXED: &str = "raw.queue.keyed.mixed.consume";
/// The priority lease queue's figures, each compared with its plain counterpart.
pub const KEYED_LEASE_DRAIN: &str = "raw.queue.keyed.lease.drain.8";
/// See [`KEYED_LEASE_DRAIN`].
pub const KEYED_LEASE_MIXED: &str = "raw.queue.keyed.lease.mixed.consume";
/// The priority lease queue with an index over its leases, each compared with its plain
/// counterpart.
pub const INFLIGHT_DRAIN: &str = "raw.queue.keyed.inflight.drain.8";
/// See [`INFLIGHT_DRAIN`].
pub const INFLIGHT_MIXED: &str = "raw.queue.keyed.inflight.mixed.consume";
/// The one-row layout with the state in its claim index, each compared with the plain queue.
pub const STATED_DRAIN: &str = "raw.queue.stated.drain.8";
/// See [`STATED_DRAIN`].
pub const STATED_MIXED: &str = "raw.queue.stated.mixed.consume";
/// The one-row layout kept in every state's order, each compared with the plain queue.
pub const CLUSTERED_DRAIN: &str = "raw.queue.clustered.drain.8";
/// See [`CLUSTERED_DRAIN`].
pub const CLUSTERED_MIXED: &str = "raw.queue.clustered.mixed.consume";
/// The one-row layout kept in every state's order with its ids not unique, each compared with
/// the plain queue.
pub const LOOSE_DRAIN: &str = "raw.queue.clustered.loose.drain.8";
/// See [`LOOSE_DRAIN`].
pub const LOOSE_MIXED: &str = "raw.queue.clustered.loose.mixed.consume";
/// Taking from the one-row layout with the state in its claim index (no leases), each compared
/// with the plain queue.
pub const STATED_TAKE_DRAIN: &str = "raw.queue.stated.take.drain.8";
/// See [`STATED_TAKE_DRAIN`].
pub const STATED_TAKE_MIXED: &str = "raw.queue.stated.take.mixed.consume";
/// Taking from the one-row layout kept in every state's order (no leases), each compared with
/// the plain queue.
pub const CLUSTERED_TAKE_DRAIN: &str = "raw.queue.clustered.take.drain.8";
/// See [`CLUSTERED_TAKE_DRAIN`].
pub const CLUSTERED_TAKE_MIXED: &str = "raw.queue.clustered.take.mixed.consume";
/// The one-row layout with one index for every state, each compared with the plain queue.
pub const SINGLE_DRAIN: &str = "raw.queue.single.drain.8";
/// See [`SINGLE_DRAIN`].
pub const SINGLE_MIXED: &str = "raw.queue.single.mixed.consume";

/// How the consumers of a raw queue take rows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Lock, delete, commit: one transaction per batch, no leases (as `take_in`).
    Take,
    /// The cheapest queue with leases the server can run, as the ceiling of sqlmq's leases:
    /// the lease in the message row itself (no second table), a claim transaction that
    /// locks a batch of visible rows, sets their visibility 30 s ahead and bumps their
    /// tokens, then one DELETE per batch to ack — two commits per batch, and nothing else
    /// (no fencing check, no attempts, no priorities).
    Lease,
    /// As [`Shape::Take`], on a table kept in priority order whose ids are unique: the
    /// ceiling of taking from a queue with priorities that finds messages by id.
    Keyed,
    /// As [`Shape::Lease`], on [`Shape::Keyed`]'s table: one row per message in claim order,
    /// the lease in it, acks by the unique id.
    KeyedLease,
    /// As [`Shape::KeyedLease`], with an index over the leases, `(queue_id, visible_at)`,
    /// as sqlmq's lease expiry and its release of a dead process's claims need.
    Inflight,
    /// One row per message, the id its primary key, the state in the claim index
    /// ([`RawSql::stated`](crate::backend::RawSql::stated)).
    Stated,
    /// As [`Shape::Stated`]'s table, taken from as [`Shape::Take`] (no leases): the ceiling of
    /// `take_in` in one row per message.
    StatedTake,
    /// One row per message, its primary key every state's order, the id unique
    /// ([`RawSql::clustered`](crate::backend::RawSql::clustered)).
    Clustered,
    /// As [`Shape::Clustered`]'s table, taken from as [`Shape::Take`] (no leases).
    ClusteredTake,
    /// [`Shape::Clustered`] with the id indexed but not unique
    /// ([`RawSql::loose`](crate::backend::RawSql::loose)).
    Loose,
    /// One row per message, the id its primary key, one index for every state
    /// ([`RawSql::single`](crate::backend::RawSql::single)).
    Single,
}

impl Shape {
    /// The one-row layout's statements, for the shapes that are one.
    fn layout<B: Db>(self) -> Option<&'static LayoutSql> {
        match self {
            Shape::Stated | Shape::StatedTake => Some(&B::RAW.stated),
            Shape::Clustered | Shape::ClusteredTake => Some(&B::RAW.clustered),
            Shape::Loose => Some(&B::RAW.loose),
            Shape::Single => Some(&B::RAW.single),
            _ => None,
        }
    }

    /// The table, then its other indexes.
    fn create<B: Db>(self) -> Vec<&'static str> {
        match self {
            Shape::Take => vec![B::RAW.create],
            Shape::Lease => vec![B::RAW.lease_create],
            Shape::Keyed => vec![B::RAW.keyed_create],
            Shape::KeyedLease => vec![B::RAW.keyed_lease_create],
            Shape::Inflight => vec![B::RAW.keyed_lease_create, B::RAW.inflight_index],
            Shape::Stated
            | Shape::StatedTake
            | Shape::Clustered
            | Shape::ClusteredTake
            | Shape::Loose
            | Shape::Single => self.layout::<B>().expect("a layout").create.to_vec(),
        }
    }

    pub(crate) fn claim<B: Db>(self) -> &'static str {
        match self {
            Shape::Take => B::RAW.claim,
            Shape::Lease => B::RAW.lease_claim,
            Shape::Keyed => B::RAW.keyed_claim,
            Shape::KeyedLease | Shape::Inflight => B::RAW.keyed_lease_claim,
            Shape::Stated
            | Shape::StatedTake
            | Shape::Clustered
            | Shape::ClusteredTake
            | Shape::Loose
            | Shape::Single => self.layout::<B>().expect("a layout").claim,
        }
    }

    pub(crate) fn delete_list<B: Db>(self) -> &'static str {
        match self {
            // Through the unique (or, loose, plain) index of the id, where it is not the
            // primary key.
            Shape::Keyed
            | Shape::KeyedLease
            | Shape::Inflight
            | Shape::Clustered
            | Shape::ClusteredTake
            | Shape::Loose => B::RAW.keyed_delete_list,
            Shape::Take | Shape::Lease | Shape::Stated | Shape::StatedTake | Shape::Single => {
                B::RAW.delete_list
            }
        }
    }

    /// The statement that leases a claimed batch; `None` for a take.
    pub(crate) fn lease<B: Db>(self) -> Option<&'static str> {
        match self {
            Shape::Take | Shape::Keyed | Shape::StatedTake | Shape::ClusteredTake => None,
            Shape::Lease => Some(B::RAW.lease_update),
            Shape::KeyedLease | Shape::Inflight => Some(B::RAW.keyed_lease_update),
            Shape::Stated | Shape::Clustered | Shape::Loose | Shape::Single => {
                Some(self.layout::<B>().expect("a layout").lease)
            }
        }
    }

    /// The statement that puts the first `{n}` claimable rows out of sight in state `{state}`
    /// (`raw.head`); `None` for a take.
    pub(crate) fn hide<B: Db>(self) -> Option<&'static str> {
        match self {
            Shape::Take | Shape::Keyed | Shape::Lease => None,
            Shape::KeyedLease | Shape::Inflight => Some(B::RAW.inflight_hide),
            Shape::Stated
            | Shape::StatedTake
            | Shape::Clustered
            | Shape::ClusteredTake
            | Shape::Loose
            | Shape::Single => Some(self.layout::<B>().expect("a layout").hide),
        }
    }

    /// Drop and create this shape's table.
    pub(crate) async fn recreate<B: Db>(self, pool: &Pool<B>, table: &str) -> Result<()> {
        let create = self.create::<B>();
        recreate_as::<B>(pool, table, create[0]).await?;
        let mut conn = pool.acquire().await?;
        for index in &create[1..] {
            B::execute(&mut conn, index.replace("{t}", table).into(), &[]).await?;
        }
        Ok(())
    }
}

/// `raw.queue`.
pub async fn queue<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    with_table(ctx, "raw.queue", |pool, table, bar| async move {
        let mut figures = Vec::new();
        for shape in [
            Shape::Take,
            Shape::Lease,
            Shape::Keyed,
            Shape::KeyedLease,
            Shape::Inflight,
            Shape::Stated,
            Shape::StatedTake,
            Shape::Clustered,
            Shape::ClusteredTake,
            Shape::Loose,
            Shape::Single,
        ] {
            figures.extend(run_shape(ctx, &pool, &table, &bar, shape).await?);
        }
        Ok(figures)
    })
    .await
}

/// The drain and the mixed figure of one shape, each on a fresh table.
async fn run_shape<B: Db>(
    ctx: &Ctx<B>,
    pool: &Pool<B>,
    table: &str,
    bar: &Bar,
    shape: Shape,
) -> Result<Vec<Figure>> {
    let (name, drain_key, mixed_key, acked) = match shape {
        Shape::Take => ("queue", DRAIN, MIXED, "deleted"),
        Shape::Lease => ("lease queue", LEASE_DRAIN, LEASE_MIXED, "acked"),
        Shape::Keyed => ("priority queue", KEYED_DRAIN, KEYED_MIXED, "deleted"),
        Shape::KeyedLease => (
            "priority lease queue",
            KEYED_LEASE_DRAIN,
            KEYED_LEASE_MIXED,
            "acked",
        ),
        Shape::Inflight => (
            "priority lease queue, leases indexed",
            INFLIGHT_DRAIN,
            INFLIGHT_MIXED,
            "acked",
        ),
        Shape::Stated => (
            "lease queue, state in the claim index",
            STATED_DRAIN,
            STATED_MIXED,
            "acked",
        ),
        Shape::StatedTake => (
            "queue, state in the claim index",
            STATED_TAKE_DRAIN,
            STATED_TAKE_MIXED,
            "deleted",
        ),
        Shape::Clustered => (
            "lease queue, kept in every state's order",
            CLUSTERED_DRAIN,
            CLUSTERED_MIXED,
            "acked",
        ),
        Shape::ClusteredTake => (
            "queue, kept in every state's order",
            CLUSTERED_TAKE_DRAIN,
            CLUSTERED_TAKE_MIXED,
            "deleted",
        ),
        Shape::Loose => (
            "lease queue, kept in every state's order, ids not unique",
            LOOSE_DRAIN,
            LOOSE_MIXED,
            "acked",
        ),
        Shape::Single => (
            "lease queue, one index for every state",
            SINGLE_DRAIN,
            SINGLE_MIXED,
            "acked",
        ),
    };
    shape.recreate::<B>(pool, table).await?;
    let n = ctx.plan.drain;
    bar.phase(&format!("{name}: fill {n} rows"), n);
    let ids = fill(pool, table, n, bar).await?;
    let tracker = Arc::new(Tracker::new(n));
    tracker.sending_done();
    bar.phase(&format!("{name}: drain, {CONSUMERS} consumers"), n);
    let deadlocks = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    consumers(pool, table, shape, &tracker, bar, &deadlocks).await?;
    let drained = tracker.last_delivery().saturating_duration_since(started);
    let mut drain = Figure::rate(
        drain_key,
        format!("raw one-table {name} drain, {CONSUMERS} consumers"),
        n,
        drained,
    )
    .checked(tracker.check(ids.iter()));
    drain = with_deadlocks(drain, &deadlocks);

    shape.recreate::<B>(pool, table).await?;
    let n = ctx.plan.mixed;
    bar.phase(
        &format!("{name}: {MIXED_PRODUCERS} producers + {CONSUMERS} consumers"),
        n,
    );
    let tracker = Arc::new(Tracker::new(n));
    let deadlocks = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let consuming = {
        let (pool, table, tracker, bar) = (
            pool.clone(),
            table.to_owned(),
            Arc::clone(&tracker),
            bar.clone(),
        );
        let deadlocks = Arc::clone(&deadlocks);
        tokio::spawn(
            async move { consumers(&pool, &table, shape, &tracker, &bar, &deadlocks).await },
        )
    };
    let sent = produce(pool, table, n, &deadlocks).await;
    tracker.sending_done();
    consuming.await??;
    let sent = sent?;
    let consumed = tracker.last_delivery().saturating_duration_since(started);
    let mut mixed = Figure::rate(
        mixed_key,
        format!(
            "raw one-table {name} mixed: {acked} by {CONSUMERS} consumers beside \
             {MIXED_PRODUCERS} producers"
        ),
        n,
        consumed,
    )
    .checked(tracker.check(sent.iter()));
    mixed = with_deadlocks(mixed, &deadlocks);
    if shape != Shape::Take {
        drain = drain.against(DRAIN);
        mixed = mixed.against(MIXED);
    }
    Ok(vec![drain, mixed])
}

/// `figure`, noting how many transactions the server ended as deadlocks (and ran again), if any.
fn with_deadlocks(figure: Figure, deadlocks: &AtomicU64) -> Figure {
    match deadlocks.load(Ordering::Relaxed) {
        0 => figure,
        n => figure.note(format!(
            "{n} transactions ended as deadlocks or lock wait timeouts and ran again"
        )),
    }
}

/// Insert `n` rows in multi-row INSERTs of [`MULTIROW_ROWS`]; returns their ids.
pub(crate) async fn fill<B: Db>(
    pool: &Pool<B>,
    table: &str,
    n: u64,
    bar: &Bar,
) -> Result<Vec<[u8; 16]>> {
    let payload = body(0);
    let mut conn = pool.acquire().await?;
    let mut ids = Vec::with_capacity(n as usize);
    let mut left = n as usize;
    while left > 0 {
        let rows = left.min(MULTIROW_ROWS);
        let sql = multirow_insert::<B>(table, rows);
        let chunk: Vec<[u8; 16]> = (0..rows).map(|_| new_id()).collect();
        let binds: Vec<&[u8]> = chunk
            .iter()
            .flat_map(|id| [&id[..], &payload[..]])
            .collect();
        transaction::<B>(&mut conn, sql.into(), &binds).await?;
        ids.extend(chunk);
        left -= rows;
        bar.inc(rows as u64);
    }
    Ok(ids)
}

/// [`MIXED_PRODUCERS`] producers inserting `n` rows one at a time, each its own write (run
/// again after a deadlock, counted in `deadlocks`); returns the ids written.
async fn produce<B: Db>(
    pool: &Pool<B>,
    table: &str,
    n: u64,
    deadlocks: &Arc<AtomicU64>,
) -> Result<Vec<[u8; 16]>> {
    let insert: Arc<str> = B::RAW.insert.replace("{t}", table).into();
    let sent: Arc<Mutex<Vec<[u8; 16]>>> = Arc::default();
    let mut set = JoinSet::new();
    for count in split(n, MIXED_PRODUCERS) {
        let (pool, insert, sent) = (pool.clone(), insert.clone(), Arc::clone(&sent));
        let deadlocks = Arc::clone(deadlocks);
        set.spawn(async move {
            let mut held = task_connection(&pool, MIXED_PRODUCERS + CONSUMERS).await?;
            let payload = body(0);
            for _ in 0..count {
                let id = new_id();
                let binds = [&id[..], &payload[..]];
                loop {
                    match write_on::<B>(&pool, &mut held, insert.clone(), &binds).await {
                        Err(e) if deadlocked(&e) => deadlocks.fetch_add(1, Ordering::Relaxed),
                        sent => break sent?,
                    };
                }
                sent.lock().expect("poisoned").push(id);
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    let sent = std::mem::take(&mut *sent.lock().expect("poisoned"));
    Ok(sent)
}

/// [`CONSUMERS`] consumers taking batches until the tracker says stop, counting the
/// transactions the server ended as deadlocks (run again) in `deadlocks`.
async fn consumers<B: Db>(
    pool: &Pool<B>,
    table: &str,
    shape: Shape,
    tracker: &Arc<Tracker<[u8; 16]>>,
    bar: &Bar,
    deadlocks: &Arc<AtomicU64>,
) -> Result<()> {
    let claim: Arc<str> = shape.claim::<B>().replace("{t}", table).into();
    let mut set = JoinSet::new();
    for _ in 0..CONSUMERS {
        let (pool, table, claim) = (pool.clone(), table.to_owned(), claim.clone());
        let (tracker, bar, deadlocks) = (Arc::clone(tracker), bar.clone(), Arc::clone(deadlocks));
        set.spawn(async move {
            consume(&pool, &table, shape, &claim, &tracker, &bar, &deadlocks).await
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    Ok(())
}

/// One consumer: a transaction per batch — the locking read, then the delete (a take) or the
/// lease (then the ack, a delete committed on its own) — and the adaptive poll delay of
/// sqlmq's consumers when nothing came. A transaction the server ends as a deadlock runs again,
/// as any real consumer's would, and is counted in `deadlocks`.
async fn consume<B: Db>(
    pool: &Pool<B>,
    table: &str,
    shape: Shape,
    claim: &Arc<str>,
    tracker: &Tracker<[u8; 16]>,
    bar: &Bar,
    deadlocks: &AtomicU64,
) -> Result<()> {
    let mut poll = PollDelay::default();
    let raw = B::RAW;
    while !tracker.should_stop() {
        let mut conn = pool.acquire().await?;
        let ids = loop {
            match claim_batch::<B>(&mut conn, table, shape, claim).await {
                Err(e) if deadlocked(&e) => deadlocks.fetch_add(1, Ordering::Relaxed),
                claimed => break claimed?,
            };
        };
        if ids.is_empty() {
            drop(conn);
            tokio::time::sleep(poll.next_delay()).await;
            continue;
        }
        poll.reset();
        if shape.lease::<B>().is_some() {
            // The handlers ran; the batch's ack.
            let list = vec![raw.list_item; ids.len()].join(raw.list_separator);
            let delete: Arc<str> = (shape.delete_list::<B>())
                .replace("{t}", table)
                .replace("{list}", &list)
                .into();
            let binds: Vec<&[u8]> = ids.iter().map(|id| &id[..]).collect();
            loop {
                match write::<B>(&mut conn, delete.clone(), &binds).await {
                    Err(e) if deadlocked(&e) => deadlocks.fetch_add(1, Ordering::Relaxed),
                    acked => break acked?,
                };
            }
        }
        tracker.record(ids.iter().copied());
        bar.inc(ids.len() as u64);
    }
    Ok(())
}

/// One claim transaction: the locking read of up to [`RECEIVE_BATCH`] rows, then their delete
/// (a take) or their lease, and the commit. Returns the ids (none: nothing to claim).
async fn claim_batch<B: Db>(
    conn: &mut B::Connection,
    table: &str,
    shape: Shape,
    claim: &Arc<str>,
) -> Result<Vec<[u8; 16]>> {
    let raw = B::RAW;
    let mut tx = sqlx::Connection::begin_with(conn, <B as Db>::BEGIN).await?;
    let ids = B::fetch_ids(&mut tx, claim.clone(), RECEIVE_BATCH as i64).await?;
    if !ids.is_empty() {
        let list = vec![raw.list_item; ids.len()].join(raw.list_separator);
        let binds: Vec<&[u8]> = ids.iter().map(|id| &id[..]).collect();
        let write = match shape.lease::<B>() {
            None => shape.delete_list::<B>(),
            Some(lease) => lease,
        };
        let write = write.replace("{t}", table).replace("{list}", &list);
        B::execute(&mut tx, write.into(), &binds).await?;
    }
    tx.commit().await?;
    Ok(ids)
}

/// Whether `e` is the server ending a transaction as a deadlock (MySQL 1213, SQLSTATE 40001)
/// or a statement after a lock wait timeout (1205, whose transaction is rolled back here when
/// it is dropped): the transaction may run again.
pub(crate) fn deadlocked(e: &anyhow::Error) -> bool {
    e.downcast_ref::<sqlx::Error>()
        .and_then(|e| e.as_database_error())
        .is_some_and(|e| {
            e.code().as_deref() == Some("40001")
                || e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|e| e.number() == 1205)
        })
}
