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

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use sqlx::Pool;
use tokio::task::JoinSet;

use super::args::{CONSUMERS, MIXED_PRODUCERS, MULTIROW_ROWS, RECEIVE_BATCH};
use super::backend::Db;
use super::context::Ctx;
use super::measure::body;
use super::outcome::Outcome;
use super::progress::Bar;
use super::raw::{
    multirow_insert, new_id, recreate, split, task_connection, transaction, with_table, write_on,
};
use super::report::Figure;
use super::track::Tracker;
use sqlmq_cli_common::poll::PollDelay;

/// Figure keys, referenced by the scenarios compared with them.
pub const DRAIN: &str = "raw.queue.drain.8";
/// See [`DRAIN`].
pub const MIXED: &str = "raw.queue.mixed.consume";

/// `raw.queue`.
pub async fn queue<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    with_table(ctx, "raw.queue", |pool, table, bar| async move {
        let n = ctx.plan.drain;
        bar.phase(&format!("fill {n} rows"), n);
        let ids = fill(&pool, &table, n, &bar).await?;
        let tracker = Arc::new(Tracker::new(n));
        tracker.sending_done();
        bar.phase(&format!("drain, {CONSUMERS} consumers"), n);
        let started = Instant::now();
        consumers(&pool, &table, &tracker, &bar).await?;
        let drained = tracker.last_delivery().saturating_duration_since(started);
        let drain = Figure::rate(
            DRAIN,
            format!("raw one-table queue drain, {CONSUMERS} consumers"),
            n,
            drained,
        )
        .checked(tracker.check(ids.iter()));

        recreate::<B>(&pool, &table).await?;
        let n = ctx.plan.mixed;
        bar.phase(
            &format!("{MIXED_PRODUCERS} producers + {CONSUMERS} consumers"),
            n,
        );
        let tracker = Arc::new(Tracker::new(n));
        let started = Instant::now();
        let consuming = {
            let (pool, table, tracker, bar) = (
                pool.clone(),
                table.clone(),
                Arc::clone(&tracker),
                bar.clone(),
            );
            tokio::spawn(async move { consumers(&pool, &table, &tracker, &bar).await })
        };
        let sent = produce(&pool, &table, n).await;
        tracker.sending_done();
        consuming.await??;
        let sent = sent?;
        let consumed = tracker.last_delivery().saturating_duration_since(started);
        let mixed = Figure::rate(
            MIXED,
            format!(
                "raw one-table queue mixed: deleted by {CONSUMERS} consumers beside \
                 {MIXED_PRODUCERS} producers"
            ),
            n,
            consumed,
        )
        .checked(tracker.check(sent.iter()));
        Ok(vec![drain, mixed])
    })
    .await
}

/// Insert `n` rows in multi-row INSERTs of [`MULTIROW_ROWS`]; returns their ids.
async fn fill<B: Db>(pool: &Pool<B>, table: &str, n: u64, bar: &Bar) -> Result<Vec<[u8; 16]>> {
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

/// [`MIXED_PRODUCERS`] producers inserting `n` rows one at a time, each its own write; returns
/// the ids written.
async fn produce<B: Db>(pool: &Pool<B>, table: &str, n: u64) -> Result<Vec<[u8; 16]>> {
    let insert: Arc<str> = B::RAW.insert.replace("{t}", table).into();
    let sent: Arc<Mutex<Vec<[u8; 16]>>> = Arc::default();
    let mut set = JoinSet::new();
    for count in split(n, MIXED_PRODUCERS) {
        let (pool, insert, sent) = (pool.clone(), insert.clone(), Arc::clone(&sent));
        set.spawn(async move {
            let mut held = task_connection(&pool, MIXED_PRODUCERS + CONSUMERS).await?;
            let payload = body(0);
            for _ in 0..count {
                let id = new_id();
                write_on::<B>(&pool, &mut held, insert.clone(), &[&id[..], &payload[..]]).await?;
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

/// [`CONSUMERS`] consumers taking batches until the tracker says stop.
async fn consumers<B: Db>(
    pool: &Pool<B>,
    table: &str,
    tracker: &Arc<Tracker<[u8; 16]>>,
    bar: &Bar,
) -> Result<()> {
    let claim: Arc<str> = B::RAW.claim.replace("{t}", table).into();
    let mut set = JoinSet::new();
    for _ in 0..CONSUMERS {
        let (pool, table, claim) = (pool.clone(), table.to_owned(), claim.clone());
        let (tracker, bar) = (Arc::clone(tracker), bar.clone());
        set.spawn(async move { consume(&pool, &table, &claim, &tracker, &bar).await });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    Ok(())
}

/// One consumer: a transaction per batch — the locking read, the delete, the commit — and the
/// adaptive poll delay of sqlmq's consumers when nothing came.
async fn consume<B: Db>(
    pool: &Pool<B>,
    table: &str,
    claim: &Arc<str>,
    tracker: &Tracker<[u8; 16]>,
    bar: &Bar,
) -> Result<()> {
    let mut poll = PollDelay::default();
    while !tracker.should_stop() {
        let mut conn = pool.acquire().await?;
        let mut tx = sqlx::Connection::begin_with(&mut *conn, B::BEGIN).await?;
        let ids = B::fetch_ids(&mut tx, claim.clone(), RECEIVE_BATCH as i64).await?;
        if ids.is_empty() {
            tx.commit().await?;
            drop(conn);
            tokio::time::sleep(poll.next_delay()).await;
            continue;
        }
        poll.reset();
        let raw = B::RAW;
        let list = vec![raw.list_item; ids.len()].join(raw.list_separator);
        let delete = raw
            .delete_list
            .replace("{t}", table)
            .replace("{list}", &list);
        let binds: Vec<&[u8]> = ids.iter().map(|id| &id[..]).collect();
        B::execute(&mut tx, delete.into(), &binds).await?;
        tx.commit().await?;
        tracker.record(ids.iter().copied());
        bar.inc(ids.len() as u64);
    }
    Ok(())
}
