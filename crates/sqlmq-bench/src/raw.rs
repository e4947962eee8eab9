//! Raw baselines: what the same server does with plain SQL on a table shaped like sqlmq's
//! message table (`BINARY(16)` id primary key, `INT` queue id, `SMALLINT` priority,
//! `MEDIUMBLOB` body, `DATETIME(6)` creation time), in the same run, with the same body size.
//!
//! They run on the pool of a `sqlmq::Client`, so that they get the very connection settings
//! sqlmq's own statements get (notably `TCP_NODELAY`, which sqlx 0.9.0 does not set and the
//! library sets on the pools it builds); a plain sqlx pool would make the baselines unfairly
//! slow. Each task holds one connection for its whole loop: nothing but the statements is
//! measured.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sqlx::{AssertSqlSafe, MySqlPool};
use tokio::task::JoinSet;

use super::args::{MANY, MULTIROW_ROWS};
use super::context::Ctx;
use super::measure::body;
use super::progress::Bar;
use super::registry::Outcome;
use super::report::Figure;

/// Figure keys, referenced by the scenarios compared with them.
pub const INSERT_ONE: &str = "raw.insert.1";
/// See [`INSERT_ONE`].
pub const INSERT_MANY: &str = "raw.insert.16";
/// See [`INSERT_ONE`].
pub const MULTIROW: &str = "raw.multirow";
/// See [`INSERT_ONE`].
pub const LIFECYCLE: &str = "raw.lifecycle.16";

const CREATE_TABLE: &str = "CREATE TABLE {t} (id BINARY(16) NOT NULL, queue_id INT NOT NULL, \
    priority SMALLINT NOT NULL, body MEDIUMBLOB NOT NULL, created_at DATETIME(6) NOT NULL, \
    PRIMARY KEY (id)) ENGINE=InnoDB";
const INSERT: &str = "INSERT INTO {t} (id, queue_id, priority, body, created_at) VALUES (?, 1, 0, ?, UTC_TIMESTAMP(6))";
const DELETE: &str = "DELETE FROM {t} WHERE id = ?";
const ROW: &str = "(?, 1, 0, ?, UTC_TIMESTAMP(6))";

/// `raw.insert`: single-row autocommit INSERTs on 1 and on [`MANY`] connections.
pub async fn insert(ctx: &Ctx) -> Result<Outcome> {
    with_table(ctx, "raw.insert", |pool, table, bar| async move {
        let plan = &ctx.plan;
        bar.phase("INSERT, 1 connection", plan.raw_insert_one);
        let one = parallel(&pool, &table, 1, plan.raw_insert_one, &bar, false).await?;
        recreate(&pool, &table).await?;
        bar.phase(&format!("INSERT, {MANY} connections"), plan.raw_insert_many);
        let many = parallel(&pool, &table, MANY, plan.raw_insert_many, &bar, false).await?;
        Ok(vec![
            Figure::rows(INSERT_ONE, "raw INSERT, 1 conn", plan.raw_insert_one, one),
            Figure::rows(
                INSERT_MANY,
                format!("raw INSERT, {MANY} conns"),
                plan.raw_insert_many,
                many,
            ),
        ])
    })
    .await
}

/// `raw.lifecycle`: a message's minimal durable life, autocommit INSERT then autocommit DELETE
/// by primary key, on [`MANY`] connections.
pub async fn lifecycle(ctx: &Ctx) -> Result<Outcome> {
    with_table(ctx, "raw.lifecycle", |pool, table, bar| async move {
        let n = ctx.plan.raw_lifecycle;
        bar.phase(&format!("INSERT+DELETE, {MANY} connections"), n);
        let elapsed = parallel(&pool, &table, MANY, n, &bar, true).await?;
        Ok(vec![Figure::rate(
            LIFECYCLE,
            format!("raw INSERT+DELETE, {MANY} conns"),
            n,
            elapsed,
        )])
    })
    .await
}

/// `raw.multirow`: multi-row INSERTs of [`MULTIROW_ROWS`] rows, one transaction each, on one
/// connection (as one `send_batch` uses one connection).
pub async fn multirow(ctx: &Ctx) -> Result<Outcome> {
    with_table(ctx, "raw.multirow", |pool, table, bar| async move {
        let rows = ctx.plan.raw_multirow_rows;
        let statements = rows.div_ceil(MULTIROW_ROWS as u64);
        bar.phase(&format!("{MULTIROW_ROWS}-row INSERT per tx"), rows);
        let values = vec![ROW; MULTIROW_ROWS].join(",");
        let sql: Arc<str> = INSERT
            .replace("{t}", &table)
            .replace(&format!("VALUES {ROW}"), &format!("VALUES {values}"))
            .into();
        let payload = body(0);
        let mut conn = pool.acquire().await?;
        let started = Instant::now();
        for _ in 0..statements {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let mut q = sqlx::query(AssertSqlSafe(sql.clone()));
            for _ in 0..MULTIROW_ROWS {
                q = q.bind(new_id().to_vec()).bind(&payload[..]);
            }
            q.execute(&mut *tx).await?;
            tx.commit().await?;
            bar.inc(MULTIROW_ROWS as u64);
        }
        let elapsed = started.elapsed();
        Ok(vec![Figure::rows(
            MULTIROW,
            format!("raw multi-row INSERT, {MULTIROW_ROWS}/tx"),
            statements * MULTIROW_ROWS as u64,
            elapsed,
        )])
    })
    .await
}

/// Run `work` with a pool and a fresh table of the raw shape, then drop both.
async fn with_table<F, Fut>(ctx: &Ctx, title: &str, work: F) -> Result<Outcome>
where
    F: FnOnce(MySqlPool, String, Bar) -> Fut,
    Fut: Future<Output = Result<Vec<Figure>>>,
{
    let client = ctx.client("raw", MANY as u32 + 1).await?;
    let pool = client.pool().clone();
    let table = format!("`{}messages`", client.table_prefix());
    let bar = ctx.bar(title);
    let result = async {
        recreate(&pool, &table).await?;
        warm_up(&pool, MANY).await?;
        work(pool.clone(), table, bar.clone()).await
    }
    .await;
    bar.finish();
    ctx.release(client).await?;
    Ok(Outcome::Ran(result?))
}

/// Drop and create the raw table, so that each phase starts empty.
async fn recreate(pool: &MySqlPool, table: &str) -> Result<()> {
    sqlx::query(AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .execute(pool)
        .await?;
    sqlx::query(AssertSqlSafe(CREATE_TABLE.replace("{t}", table)))
        .execute(pool)
        .await?;
    Ok(())
}

/// Open `n` connections of `pool` before timing anything (pools open connections lazily).
pub async fn warm_up(pool: &MySqlPool, n: usize) -> Result<()> {
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
/// `delete`), autocommit. Returns the wall time.
async fn parallel(
    pool: &MySqlPool,
    table: &str,
    tasks: usize,
    n: u64,
    bar: &Bar,
    delete: bool,
) -> Result<Duration> {
    let insert: Arc<str> = INSERT.replace("{t}", table).into();
    let remove: Arc<str> = DELETE.replace("{t}", table).into();
    let started = Instant::now();
    let mut set = JoinSet::new();
    for count in split(n, tasks) {
        let (pool, bar) = (pool.clone(), bar.clone());
        let (insert, remove) = (insert.clone(), remove.clone());
        set.spawn(async move {
            let mut conn = pool.acquire().await?;
            let payload = body(0);
            for _ in 0..count {
                let id = new_id();
                sqlx::query(AssertSqlSafe(insert.clone()))
                    .bind(&id[..])
                    .bind(&payload[..])
                    .execute(&mut *conn)
                    .await?;
                if delete {
                    sqlx::query(AssertSqlSafe(remove.clone()))
                        .bind(&id[..])
                        .execute(&mut *conn)
                        .await?;
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

/// `n` split into `parts` nearly equal counts.
pub fn split(n: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| n / parts + u64::from(i < n % parts))
        .collect()
}

/// A time-ordered 16-byte id, as sqlmq generates them.
fn new_id() -> [u8; 16] {
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
