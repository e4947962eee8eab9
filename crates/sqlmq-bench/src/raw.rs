//! Raw baselines: what the same database does with plain SQL on a table shaped like sqlmq's
//! message table (on MySQL `BINARY(16)` id primary key, `INT` queue id, `SMALLINT` priority,
//! `MEDIUMBLOB` body, `DATETIME(6)` creation time; on SQLite the same in its types, see
//! `backend/`), in the same run, with the same body size.
//!
//! They run on the pool of a `sqlmq::Client`, so that they get the very connection settings
//! sqlmq's own statements get (on MySQL notably `TCP_NODELAY`, which sqlx 0.9.0 does not set and
//! the library sets on the pools it builds; on SQLite WAL, `synchronous = FULL`, the busy
//! timeout, and the one writer connection); a plain sqlx pool would make the baselines unfairly
//! slow or fast. Each task holds one connection for its whole loop: nothing but the statements
//! is measured. On SQLite the pool is the client's one writer, so the tasks of a "16 writers"
//! baseline take turns on it write by write, as sqlmq's producers do.
//!
//! Each write commits as sqlmq's writes commit on the backend: alone (autocommit) on MySQL, in a
//! `BEGIN IMMEDIATE` … `COMMIT` of its own on SQLite.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sqlx::Pool;
use sqlx::pool::PoolConnection;
use tokio::task::JoinSet;

use super::args::{MANY, MULTIROW_ROWS, SMALL_MULTIROW_ROWS};
use super::backend::Db;
use super::context::Ctx;
use super::measure::body;
use super::outcome::Outcome;
use super::progress::Bar;
use super::report::Figure;

/// Figure keys, referenced by the scenarios compared with them.
pub const INSERT_ONE: &str = "raw.insert.1";
/// See [`INSERT_ONE`].
pub const INSERT_MANY: &str = "raw.insert.16";
/// See [`INSERT_ONE`].
pub const MULTIROW: &str = "raw.multirow";
/// See [`INSERT_ONE`].
pub const MULTIROW_SMALL: &str = "raw.multirow.100";
/// See [`INSERT_ONE`].
pub const LIFECYCLE: &str = "raw.lifecycle.16";

/// `raw.insert`: single-row INSERTs, each its own write, on 1 and on [`MANY`] connections (on
/// SQLite: tasks sharing the writer).
pub async fn insert<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    with_table(ctx, "raw.insert", |pool, table, bar| async move {
        let plan = &ctx.plan;
        bar.phase("INSERT, 1 connection", plan.raw_insert_one);
        let one = parallel::<B>(&pool, &table, 1, plan.raw_insert_one, &bar, false).await?;
        recreate::<B>(&pool, &table).await?;
        bar.phase(
            &format!("INSERT, {MANY} {}", B::WRITERS),
            plan.raw_insert_many,
        );
        let many = parallel::<B>(&pool, &table, MANY, plan.raw_insert_many, &bar, false).await?;
        Ok(vec![
            Figure::rows(INSERT_ONE, "raw INSERT, 1 conn", plan.raw_insert_one, one),
            Figure::rows(
                INSERT_MANY,
                format!("raw INSERT, {MANY} {}", B::WRITERS),
                plan.raw_insert_many,
                many,
            ),
        ])
    })
    .await
}

/// `raw.lifecycle`: a message's minimal durable life, an INSERT then a DELETE by primary key,
/// each its own write, on [`MANY`] connections (on SQLite: tasks sharing the writer).
pub async fn lifecycle<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    with_table(ctx, "raw.lifecycle", |pool, table, bar| async move {
        let n = ctx.plan.raw_lifecycle;
        bar.phase(&format!("INSERT+DELETE, {MANY} {}", B::WRITERS), n);
        let elapsed = parallel::<B>(&pool, &table, MANY, n, &bar, true).await?;
        Ok(vec![Figure::rate(
            LIFECYCLE,
            format!("raw INSERT+DELETE, {MANY} {}", B::WRITERS),
            n,
            elapsed,
        )])
    })
    .await
}

/// `raw.multirow`: multi-row INSERTs of [`MULTIROW_ROWS`] rows, one transaction each, on one
/// connection (as one `send_batch` uses one connection); then the same rows in transactions of
/// [`SMALL_MULTIROW_ROWS`], the size of the small `send_batch` — the most any design that
/// writes 100 messages per call can reach, compared with the 1 000-row figure.
pub async fn multirow<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    with_table(ctx, "raw.multirow", |pool, table, bar| async move {
        let rows = ctx.plan.raw_multirow_rows;
        let mut figures = Vec::new();
        for (key, per_tx) in [
            (MULTIROW, MULTIROW_ROWS),
            (MULTIROW_SMALL, SMALL_MULTIROW_ROWS),
        ] {
            recreate::<B>(&pool, &table).await?;
            let statements = rows.div_ceil(per_tx as u64);
            bar.phase(&format!("{per_tx}-row INSERT per tx"), rows);
            let sql: Arc<str> = multirow_insert::<B>(&table, per_tx).into();
            let payload = body(0);
            let mut conn = pool.acquire().await?;
            let started = Instant::now();
            for _ in 0..statements {
                let ids: Vec<[u8; 16]> = (0..per_tx).map(|_| new_id()).collect();
                let binds: Vec<&[u8]> = ids.iter().flat_map(|id| [&id[..], &payload[..]]).collect();
                transaction::<B>(&mut conn, sql.clone(), &binds).await?;
                bar.inc(per_tx as u64);
            }
            let elapsed = started.elapsed();
            let figure = Figure::rows(
                key,
                format!("raw multi-row INSERT, {per_tx}/tx"),
                statements * per_tx as u64,
                elapsed,
            );
            figures.push(if key == MULTIROW {
                figure
            } else {
                figure.against(MULTIROW)
            });
        }
        Ok(figures)
    })
    .await
}

/// The raw INSERT of `rows` rows into `table` in one statement.
pub(crate) fn multirow_insert<B: Db>(table: &str, rows: usize) -> String {
    let raw = B::RAW;
    let values = vec![raw.row; rows].join(",");
    raw.insert
        .replace("{t}", table)
        .replace(&format!("VALUES {}", raw.row), &format!("VALUES {values}"))
}

/// Run `work` with a pool and a fresh table of the raw shape, then drop both.
pub(crate) async fn with_table<B, F, Fut>(ctx: &Ctx<B>, title: &str, work: F) -> Result<Outcome>
where
    B: Db,
    F: FnOnce(Pool<B>, String, Bar) -> Fut,
    Fut: Future<Output = Result<Vec<Figure>>>,
{
    let client = ctx.client("raw", MANY as u32 + 1).await?;
    let pool = client.pool().clone();
    let table = B::quote(&format!("{}messages", client.table_prefix()));
    let bar = ctx.bar(title);
    let result = async {
        recreate::<B>(&pool, &table).await?;
        warm_up(&pool, MANY).await?;
        work(pool.clone(), table, bar.clone()).await
    }
    .await;
    bar.finish();
    ctx.release(client).await?;
    Ok(Outcome::Ran(result?))
}

/// Drop and create the raw table, so that each phase starts empty.
pub(crate) async fn recreate<B: Db>(pool: &Pool<B>, table: &str) -> Result<()> {
    recreate_as::<B>(pool, table, B::RAW.create).await
}

/// Drop `table` and create it again with `create` (`{t}` its name).
pub(crate) async fn recreate_as<B: Db>(pool: &Pool<B>, table: &str, create: &str) -> Result<()> {
    let mut conn = pool.acquire().await?;
    let drop = format!("DROP TABLE IF EXISTS {table}");
    B::execute(&mut conn, drop.into(), &[]).await?;
    B::execute(&mut conn, create.replace("{t}", table).into(), &[]).await
}

/// Open `n` connections of `pool` (as many as it may hold: SQLite's writer pool holds one)
/// before timing anything (pools open connections lazily).
pub async fn warm_up<B: Db>(pool: &Pool<B>, n: usize) -> Result<()> {
    let n = n.min(pool.options().get_max_connections() as usize);
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        held.push(
            pool.acquire()
                .await
                .context("cannot open bench connections")?,
        );
    }
    Ok(())
}

/// `n` messages split over `tasks` connections: INSERT each (and DELETE it again when
/// `delete`), each statement its own write. Returns the wall time.
async fn parallel<B: Db>(
    pool: &Pool<B>,
    table: &str,
    tasks: usize,
    n: u64,
    bar: &Bar,
    delete: bool,
) -> Result<Duration> {
    let insert: Arc<str> = B::RAW.insert.replace("{t}", table).into();
    let remove: Arc<str> = B::RAW.delete.replace("{t}", table).into();
    // Where the pool has a connection for every task (MySQL), each task keeps one for its whole
    // loop, so that nothing but the statements is timed. Where the tasks share fewer (SQLite's
    // one writer), each write takes the connection and gives it back, as sqlmq's producers and
    // consumers do: a task keeping the writer for its whole loop would leave the others waiting
    // past the pool's acquire timeout.
    let started = Instant::now();
    let mut set = JoinSet::new();
    for count in split(n, tasks) {
        let (pool, bar) = (pool.clone(), bar.clone());
        let (insert, remove) = (insert.clone(), remove.clone());
        set.spawn(async move {
            let mut held = task_connection(&pool, tasks).await?;
            let payload = body(0);
            for _ in 0..count {
                let id = new_id();
                let binds = [&id[..], &payload[..]];
                write_on::<B>(&pool, &mut held, insert.clone(), &binds).await?;
                if delete {
                    write_on::<B>(&pool, &mut held, remove.clone(), &binds[..1]).await?;
                }
                bar.inc(1);
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    Ok(started.elapsed())
}

/// The connection one of `tasks` writing tasks keeps for its whole loop, where the pool has a
/// connection for every task (MySQL); `None` where they share fewer (SQLite's one writer), and
/// each write takes the connection and gives it back (see [`parallel`]).
pub(crate) async fn task_connection<B: Db>(
    pool: &Pool<B>,
    tasks: usize,
) -> Result<Option<PoolConnection<B>>> {
    if (pool.options().get_max_connections() as usize) < tasks {
        return Ok(None);
    }
    Ok(Some(pool.acquire().await?))
}

/// [`write`] on the `held` connection, or, when none is held, on one taken from `pool` for this
/// write only.
pub(crate) async fn write_on<B: Db>(
    pool: &Pool<B>,
    held: &mut Option<PoolConnection<B>>,
    sql: Arc<str>,
    binds: &[&[u8]],
) -> Result<()> {
    match held {
        Some(conn) => write::<B>(conn, sql, binds).await,
        None => write::<B>(&mut *pool.acquire().await?, sql, binds).await,
    }
}

/// One statement as one durable write, committed as sqlmq commits its own writes on backend `B`:
/// alone (autocommit), or in a transaction of its own (on SQLite `BEGIN IMMEDIATE`, which takes
/// the write lock at once, as sqlmq's transactions do there).
pub(crate) async fn write<B: Db>(
    conn: &mut B::Connection,
    sql: Arc<str>,
    binds: &[&[u8]],
) -> Result<()> {
    if B::AUTOCOMMIT {
        B::execute(conn, sql, binds).await
    } else {
        transaction::<B>(conn, sql, binds).await
    }
}

/// `sql` in a transaction of its own, started with the backend's [`Db::BEGIN`].
pub(crate) async fn transaction<B: Db>(
    conn: &mut B::Connection,
    sql: Arc<str>,
    binds: &[&[u8]],
) -> Result<()> {
    let mut tx = sqlx::Connection::begin_with(conn, <B as Db>::BEGIN).await?;
    B::execute(&mut tx, sql, binds).await?;
    tx.commit().await?;
    Ok(())
}

/// `n` split into `parts` nearly equal counts.
pub fn split(n: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| n / parts + u64::from(i < n % parts))
        .collect()
}

/// A time-ordered 16-byte id, as sqlmq generates them.
pub(crate) fn new_id() -> [u8; 16] {
    *sqlmq::MessageId::new().as_uuid().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_evenly() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split(5, 0), vec![5]);
    }
}
