//! `raw.head`: what a claim pays for the messages at the head of a queue that it cannot take —
//! in flight, or scheduled (a retry waiting out its backoff keeps its place in claim order) —
//! on the one-row lease layouts of `raw.queue`, statements only.
//!
//! For each layout: claims of [`CLAIM_N`] (a transaction: the locking read, the lease, the
//! commit; the ack after it, untimed) from a table of ready rows alone, then from a table with
//! [`Plan::head_in_flight`] rows in flight and [`Plan::head_scheduled`] scheduled ahead of the
//! same number of ready rows (10 000 and 100 000 in a full run); the second figure is compared
//! with the first. A claim that reads past the head pays for every row of it; one whose index
//! holds the state skips it.
//!
//! [`Plan::head_in_flight`]: crate::args::Plan::head_in_flight
//! [`Plan::head_scheduled`]: crate::args::Plan::head_scheduled

use std::time::Instant;

use anyhow::Result;
use sqlx::Pool;

use super::args::CLAIM_N;
use super::backend::Db;
use super::context::Ctx;
use super::measure::{Latencies, Summary};
use super::outcome::Outcome;
use super::progress::Bar;
use super::raw::with_table;
use super::raw_queue::{Shape, fill};
use super::report::{Figure, grouped};

/// Untimed claims before each measurement.
const WARM_UP: u64 = 20;

/// The layouts measured: the shape, its figures' key stem and its name.
const LAYOUTS: [(Shape, &str, &str); 5] = [
    (
        Shape::Inflight,
        "raw.head.keyed.inflight",
        "priority lease queue, leases indexed",
    ),
    (
        Shape::Stated,
        "raw.head.stated",
        "lease queue, state in the claim index",
    ),
    (
        Shape::Clustered,
        "raw.head.clustered",
        "lease queue, kept in every state's order",
    ),
    (
        Shape::Loose,
        "raw.head.clustered.loose",
        "lease queue, kept in every state's order, ids not unique",
    ),
    (
        Shape::Single,
        "raw.head.single",
        "lease queue, one index for every state",
    ),
];

/// `raw.head`.
pub async fn head<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let plan = &ctx.plan;
    with_table(ctx, "raw.head", |pool, table, bar| async move {
        let ready = (WARM_UP + plan.claim_samples) * CLAIM_N as u64;
        let (in_flight, scheduled) = (plan.head_in_flight, plan.head_scheduled);
        let mut figures = Vec::new();
        for (shape, key, name) in LAYOUTS {
            shape.recreate::<B>(&pool, &table).await?;
            bar.phase(&format!("{name}: fill {ready} ready rows"), ready);
            fill(&pool, &table, ready, &bar).await?;
            let empty = timed_claims(&pool, &table, shape, plan.claim_samples, &bar).await?;

            shape.recreate::<B>(&pool, &table).await?;
            let head = in_flight + scheduled;
            bar.phase(&format!("{name}: fill a head of {head} rows"), head);
            fill(&pool, &table, head, &bar).await?;
            hide(&pool, &table, shape, in_flight, 1).await?;
            hide(&pool, &table, shape, scheduled, 2).await?;
            bar.phase(&format!("{name}: fill {ready} ready rows behind it"), ready);
            fill(&pool, &table, ready, &bar).await?;
            let behind = timed_claims(&pool, &table, shape, plan.claim_samples, &bar).await?;

            let empty_key = format!("{key}.empty");
            figures.push(Figure::latency(
                &empty_key,
                format!("raw {name}: claim {CLAIM_N}, nothing at the head"),
                empty,
            ));
            figures.push(
                Figure::latency(
                    &format!("{key}.behind"),
                    format!(
                        "raw {name}: claim {CLAIM_N} behind {} in flight and {} scheduled",
                        grouped(in_flight),
                        grouped(scheduled)
                    ),
                    behind,
                )
                .against(&empty_key)
                .note("ratio of median claim times behind the head and with nothing at the head: near 1 means the claim skips what it cannot take"),
            );
        }
        Ok(figures)
    })
    .await
}

/// Put the first `n` ready rows (in claim order) in state `state` (1 in flight, 2 scheduled)
/// for an hour, in one statement.
async fn hide<B: Db>(pool: &Pool<B>, table: &str, shape: Shape, n: u64, state: u8) -> Result<()> {
    let Some(hide) = shape.hide::<B>() else {
        return Ok(());
    };
    let sql = hide
        .replace("{t}", table)
        .replace("{n}", &n.to_string())
        .replace("{state}", &state.to_string());
    let mut conn = pool.acquire().await?;
    super::raw::transaction::<B>(&mut conn, sql.into(), &[]).await
}

/// Time `samples` claims of [`CLAIM_N`] (after [`WARM_UP`] untimed ones), each a transaction
/// (the locking read, the lease, the commit), acking each claim untimed.
async fn timed_claims<B: Db>(
    pool: &Pool<B>,
    table: &str,
    shape: Shape,
    samples: u64,
    bar: &Bar,
) -> Result<Summary> {
    bar.phase(&format!("timed claims of {CLAIM_N}"), WARM_UP + samples);
    let raw = B::RAW;
    let claim: std::sync::Arc<str> = shape.claim::<B>().replace("{t}", table).into();
    let lease = shape.lease::<B>().expect("a lease layout");
    let latencies = Latencies::default();
    let mut conn = pool.acquire().await?;
    for i in 0..WARM_UP + samples {
        let started = Instant::now();
        let mut tx = sqlx::Connection::begin_with(&mut *conn, <B as Db>::BEGIN).await?;
        let ids = B::fetch_ids(&mut tx, claim.clone(), CLAIM_N as i64).await?;
        anyhow::ensure!(ids.len() == CLAIM_N, "a claim found {} rows", ids.len());
        let list = vec![raw.list_item; ids.len()].join(raw.list_separator);
        let binds: Vec<&[u8]> = ids.iter().map(|id| &id[..]).collect();
        let leased = lease.replace("{t}", table).replace("{list}", &list);
        B::execute(&mut tx, leased.into(), &binds).await?;
        tx.commit().await?;
        let took = started.elapsed();
        if i >= WARM_UP {
            latencies.record(took);
        }
        let ack = shape
            .delete_list::<B>()
            .replace("{t}", table)
            .replace("{list}", &list);
        super::raw::write::<B>(&mut conn, ack.into(), &binds).await?;
        bar.inc(1);
    }
    Ok(latencies.summary())
}
