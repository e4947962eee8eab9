//! PostgreSQL, the queue a user would build on it: a jobs table shaped like sqlmq's messages,
//! producers INSERT (autocommit), consumers claim with the same `SKIP LOCKED` pattern in one
//! READ COMMITTED transaction per batch — `SELECT … ORDER BY priority, id LIMIT n FOR UPDATE
//! SKIP LOCKED`, then `DELETE … WHERE id = ANY(…)`, COMMIT — so that a consumer dying before
//! COMMIT leaves its messages in place (at-least-once, like sqlmq's lease then ack). It is
//! drained pre-filled, and run in `queue.mixed`'s shape (4 producers inserting one message at a
//! time while 8 consumers poll). Beside it, PostgreSQL's own raw baselines: autocommit INSERT
//! and INSERT-then-DELETE on 16 connections.
//!
//! sqlx 0.9.0 sets no `TCP_NODELAY`; the pool applies the library's own workaround for MySQL
//! (`sqlmq::nodelay`) after every connect.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool, Row};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::{CONNECT_TIMEOUT, ranges, reach};
use crate::args::{CONSUMERS, MANY, MIXED_PRODUCERS, RECEIVE_BATCH};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::{body, body_value};
use crate::outcome::Outcome;
use crate::progress::Bar;
use crate::report::{Figure, PeerInfo};
use crate::track::{Check, Tracker};
use sqlmq::nodelay;
use sqlmq_cli_common::poll::PollDelay;

const CREATE: &str = "CREATE TABLE {t} (id UUID NOT NULL PRIMARY KEY, queue_id INT NOT NULL, \
    priority SMALLINT NOT NULL, body BYTEA NOT NULL, created_at TIMESTAMPTZ NOT NULL)";
/// The claim order index (the jobs table only; the raw table has just its primary key, like
/// MariaDB's raw table).
const CREATE_INDEX: &str = "CREATE INDEX ON {t} (queue_id, priority, id)";
const INSERT: &str =
    "INSERT INTO {t} (id, queue_id, priority, body, created_at) VALUES ($1, 1, 0, $2, now())";
const DELETE: &str = "DELETE FROM {t} WHERE id = $1";
const CLAIM: &str = "SELECT id, body FROM {t} WHERE queue_id = 1 ORDER BY priority, id \
    LIMIT $1 FOR UPDATE SKIP LOCKED";
const DELETE_CLAIMED: &str = "DELETE FROM {t} WHERE id = ANY($1)";

/// `peer.postgres`.
pub async fn run<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let url = &ctx.peers.postgres;
    if let Err(why) = reach("PostgreSQL", url, 5432).await {
        return Ok(Outcome::Skipped(why));
    }
    let pool = match connect(url).await {
        Ok(pool) => pool,
        Err(e) => {
            return Ok(Outcome::Skipped(format!(
                "PostgreSQL: cannot connect: {e:#}"
            )));
        }
    };
    ctx.touch_peer("postgres");
    let result = measure(ctx, &pool).await;
    pool.close().await;
    result
}

async fn measure<B: Db>(ctx: &Ctx<B>, pool: &PgPool) -> Result<Outcome> {
    let info = info(pool).await?;
    let (raw, jobs) = (ctx.peer_name("raw"), ctx.peer_name("jobs"));
    for (t, index) in [(&raw, false), (&jobs, true)] {
        sqlx::query(AssertSqlSafe(CREATE.replace("{t}", t)))
            .execute(pool)
            .await?;
        if index {
            sqlx::query(AssertSqlSafe(CREATE_INDEX.replace("{t}", t)))
                .execute(pool)
                .await?;
        }
    }
    let mut held = Vec::new();
    for _ in 0..MANY + CONSUMERS {
        held.push(pool.acquire().await?);
    }
    drop(held);
    let n = ctx.plan.peer_messages;
    let (n_insert, n_lifecycle) = (ctx.plan.raw_insert_many, ctx.plan.raw_lifecycle);
    let bar = ctx.bar("peer.postgres");

    bar.phase(&format!("raw INSERT, {MANY} connections"), n_insert);
    let insert = parallel(pool, &raw, n_insert, &bar, false).await?;
    sqlx::query(AssertSqlSafe(format!("TRUNCATE {raw}")))
        .execute(pool)
        .await?;
    bar.phase(&format!("raw INSERT+DELETE, {MANY} conns"), n_lifecycle);
    let lifecycle = parallel(pool, &raw, n_lifecycle, &bar, true).await?;
    bar.phase(&format!("produce, {MANY} producers"), n);
    let produce = parallel(pool, &jobs, n, &bar, false).await?;
    bar.phase(&format!("drain, {CONSUMERS} consumers"), n);
    let tracker = Arc::new(Tracker::new(n));
    tracker.sending_done();
    let started = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..CONSUMERS {
        let (pool, jobs, tracker, bar) = (
            pool.clone(),
            jobs.clone(),
            Arc::clone(&tracker),
            bar.clone(),
        );
        set.spawn(async move { consume(&pool, &jobs, &tracker, &bar).await });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    let drain = tracker.last_delivery().saturating_duration_since(started);
    let check = tracker.check((0..n).collect::<Vec<_>>().iter());
    let n_mixed = ctx.plan.mixed;
    bar.phase(
        &format!("mixed: {MIXED_PRODUCERS} producers + {CONSUMERS} consumers"),
        n_mixed,
    );
    let (mixed, mixed_check) = mixed(pool, &jobs, n_mixed, &bar).await?;
    bar.finish();

    let raw_insert = "peer.postgres.raw.insert.16";
    let raw_lifecycle = "peer.postgres.raw.lifecycle.16";
    Ok(Outcome::Peer(
        info,
        vec![
            Figure::rows(
                raw_insert,
                format!("PostgreSQL raw INSERT, {MANY} conns"),
                n_insert,
                insert,
            ),
            Figure::rate(
                raw_lifecycle,
                format!("PostgreSQL raw INSERT+DELETE, {MANY}"),
                n_lifecycle,
                lifecycle,
            ),
            Figure::rate(
                "peer.postgres.produce.16",
                format!("PostgreSQL send, {MANY} producers"),
                n,
                produce,
            )
            .against(raw_insert),
            Figure::rate(
                "peer.postgres.drain.8",
                format!("PostgreSQL drain, {CONSUMERS} consumers"),
                n,
                drain,
            )
            .against(raw_lifecycle)
            .checked(check),
            Figure::rate(
                "peer.postgres.mixed.consume",
                format!(
                    "PostgreSQL mixed: acked by {CONSUMERS} consumers beside {MIXED_PRODUCERS} \
                     producers"
                ),
                n_mixed,
                mixed,
            )
            .against(raw_lifecycle)
            .checked(mixed_check),
        ],
    ))
}

/// `queue.mixed`'s shape on the jobs table: [`CONSUMERS`] consumers polling as sqlmq's do while
/// [`MIXED_PRODUCERS`] producers insert `n` messages one at a time (autocommit). Returns the
/// time until the last delivery, and the check of what was delivered.
async fn mixed(pool: &PgPool, jobs: &str, n: u64, bar: &Bar) -> Result<(Duration, Check)> {
    let tracker = Arc::new(Tracker::new(n));
    let started = Instant::now();
    let mut consumers = JoinSet::new();
    for _ in 0..CONSUMERS {
        let (pool, jobs, tracker, bar) = (
            pool.clone(),
            jobs.to_owned(),
            Arc::clone(&tracker),
            bar.clone(),
        );
        consumers.spawn(async move { consume(&pool, &jobs, &tracker, &bar).await });
    }
    let insert: Arc<str> = INSERT.replace("{t}", jobs).into();
    let mut producers = JoinSet::new();
    for range in ranges(n, MIXED_PRODUCERS) {
        let (pool, insert) = (pool.clone(), insert.clone());
        producers.spawn(async move {
            let mut conn = pool.acquire().await?;
            for seq in range {
                sqlx::query(AssertSqlSafe(insert.clone()))
                    .bind(*sqlmq::MessageId::new().as_uuid())
                    .bind(body(seq))
                    .execute(&mut *conn)
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = producers.join_next().await {
        done??;
    }
    tracker.sending_done();
    while let Some(done) = consumers.join_next().await {
        done??;
    }
    let elapsed = tracker.last_delivery().saturating_duration_since(started);
    Ok((elapsed, tracker.check((0..n).collect::<Vec<_>>().iter())))
}

/// A pool of `MANY + CONSUMERS` connections with `TCP_NODELAY`.
async fn connect(url: &str) -> Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?;
    let port = options.get_port();
    let pool = PgPoolOptions::new()
        .max_connections((MANY + CONSUMERS) as u32)
        .acquire_timeout(CONNECT_TIMEOUT)
        .after_connect(move |_conn, _meta| {
            Box::pin(async move {
                nodelay::apply(port);
                Ok(())
            })
        })
        .connect_with(options);
    Ok(tokio::time::timeout(CONNECT_TIMEOUT, pool)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {CONNECT_TIMEOUT:?}"))??)
}

/// Version and the settings that decide durability.
async fn info(pool: &PgPool) -> Result<PeerInfo> {
    let mut settings = BTreeMap::new();
    for name in [
        "server_version",
        "fsync",
        "synchronous_commit",
        "wal_sync_method",
        "full_page_writes",
    ] {
        let value: String = sqlx::query_scalar(AssertSqlSafe(format!("SHOW {name}")))
            .fetch_one(pool)
            .await?;
        settings.insert(name.to_owned(), value);
    }
    let get = |k: &str| settings.get(k).cloned().unwrap_or_default();
    let durable = get("fsync") == "on" && get("synchronous_commit") != "off";
    Ok(PeerInfo {
        version: settings.get("server_version").cloned(),
        durable,
        durability: format!(
            "fsync={}, synchronous_commit={}: {}",
            get("fsync"),
            get("synchronous_commit"),
            if durable {
                "a commit is on disk when it returns"
            } else {
                "commits can be lost in a crash"
            }
        ),
        settings,
    })
}

/// `n` messages (bodies numbered 0..n) over [`MANY`] connections: autocommit INSERT each, and
/// DELETE it again by primary key when `delete`.
async fn parallel(pool: &PgPool, table: &str, n: u64, bar: &Bar, delete: bool) -> Result<Duration> {
    let insert: Arc<str> = INSERT.replace("{t}", table).into();
    let remove: Arc<str> = DELETE.replace("{t}", table).into();
    let started = Instant::now();
    let mut set = JoinSet::new();
    for range in ranges(n, MANY) {
        let (pool, bar, insert, remove) =
            (pool.clone(), bar.clone(), insert.clone(), remove.clone());
        set.spawn(async move {
            let mut conn = pool.acquire().await?;
            for seq in range {
                let id = *sqlmq::MessageId::new().as_uuid();
                sqlx::query(AssertSqlSafe(insert.clone()))
                    .bind(id)
                    .bind(body(seq))
                    .execute(&mut *conn)
                    .await?;
                if delete {
                    sqlx::query(AssertSqlSafe(remove.clone()))
                        .bind(id)
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

/// One consumer: claim and delete batches in transactions until the tracker says stop.
async fn consume(pool: &PgPool, table: &str, tracker: &Tracker<u64>, bar: &Bar) -> Result<()> {
    let claim: Arc<str> = CLAIM.replace("{t}", table).into();
    let delete: Arc<str> = DELETE_CLAIMED.replace("{t}", table).into();
    let mut poll = PollDelay::default();
    while !tracker.should_stop() {
        let mut tx = pool.begin().await?;
        let rows = sqlx::query(AssertSqlSafe(claim.clone()))
            .bind(RECEIVE_BATCH as i64)
            .fetch_all(&mut *tx)
            .await?;
        if rows.is_empty() {
            tx.commit().await?;
            tokio::time::sleep(poll.next_delay()).await;
            continue;
        }
        poll.reset();
        let mut ids = Vec::with_capacity(rows.len());
        let mut seqs = Vec::with_capacity(rows.len());
        for row in &rows {
            ids.push(row.try_get::<Uuid, _>(0)?);
            seqs.push(body_value(row.try_get::<&[u8], _>(1)?).unwrap_or(u64::MAX));
        }
        sqlx::query(AssertSqlSafe(delete.clone()))
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracker.record(seqs);
        bar.inc(rows.len() as u64);
    }
    Ok(())
}

/// Drop this run's tables.
pub async fn cleanup<B: Db>(ctx: &Ctx<B>) -> Result<()> {
    let pool = connect(&ctx.peers.postgres).await?;
    let sql = format!(
        "DROP TABLE IF EXISTS {}, {}",
        ctx.peer_name("raw"),
        ctx.peer_name("jobs")
    );
    sqlx::query(AssertSqlSafe(sql)).execute(&pool).await?;
    pool.close().await;
    Ok(())
}
