//! `queue.produce`: single sends, each its own transaction, by 1 and by 16 producers, beside
//! raw autocommit INSERTs on 1 and 16 connections. `queue.batch`: atomic `send_batch` of 100 and
//! of 10 000 messages, beside raw multi-row INSERTs of 1 000 rows per transaction.

use std::time::{Duration, Instant};

use anyhow::Result;
use sqlmq::{Message, Queue};
use tokio::task::JoinSet;

use super::{POOL, with_queue};
use crate::args::{BATCH_SIZES, MANY};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::body;
use crate::outcome::Outcome;
use crate::progress::Bar;
use crate::raw::{self, split};
use crate::report::Figure;

/// `queue.produce`.
pub async fn produce<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let bar = ctx.bar("queue.produce");
    let mut figures = Vec::new();
    for (producers, n, baseline) in [
        (1, ctx.plan.send_one, raw::INSERT_ONE),
        (MANY, ctx.plan.send_many, raw::INSERT_MANY),
    ] {
        let b = bar.clone();
        let elapsed = with_queue(ctx, "send", POOL, |q| async move {
            b.phase(&format!("send, {producers} producer(s)"), n);
            sends(&q, producers, n, &b).await
        })
        .await?;
        let label = if producers == 1 {
            "sqlmq send, 1 producer".to_owned()
        } else {
            format!("sqlmq send, {producers} producers")
        };
        let key = format!("queue.send.{producers}");
        figures.push(Figure::rate(&key, label, n, elapsed).against(baseline));
    }
    bar.finish();
    Ok(Outcome::Ran(figures))
}

/// `n` single sends split over `producers` tasks; returns the wall time.
pub(super) async fn sends<B: Db>(
    queue: &Queue<B>,
    producers: usize,
    n: u64,
    bar: &Bar,
) -> Result<Duration> {
    let started = Instant::now();
    let mut set = JoinSet::new();
    for count in split(n, producers) {
        let (q, bar) = (queue.clone(), bar.clone());
        set.spawn(async move {
            for _ in 0..count {
                q.send(Message::new(body(0))).await?;
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

/// `queue.batch`.
pub async fn batch<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let bar = ctx.bar("queue.batch");
    let mut figures = Vec::new();
    for (size, n) in [
        (BATCH_SIZES[0], ctx.plan.batch_small),
        (BATCH_SIZES[1], ctx.plan.batch_large),
    ] {
        let batches = n.div_ceil(size as u64);
        let messages = batches * size as u64;
        let b = bar.clone();
        let elapsed = with_queue(ctx, "batch", 4, |q| async move {
            b.phase(&format!("send_batch of {size}"), messages);
            let started = Instant::now();
            for _ in 0..batches {
                let batch: Vec<Message> = (0..size).map(|_| Message::new(body(0))).collect();
                q.send_batch(batch).await?;
                b.inc(size as u64);
            }
            Ok(started.elapsed())
        })
        .await?;
        let label = format!("sqlmq send_batch of {size}");
        let key = format!("queue.batch.{size}");
        figures.push(Figure::rate(&key, label, messages, elapsed).against(raw::MULTIROW));
    }
    bar.finish();
    Ok(Outcome::Ran(figures))
}
