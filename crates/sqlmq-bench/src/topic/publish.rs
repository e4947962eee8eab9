//! `topic.publish`: records published to a topic of 1 partition, then to one of 8 (records are
//! keyed, so their keys spread them), by 1 and by 16 producers, singly (`publish`, each its own
//! transaction) and in atomic batches of 100 (`publish_batch`).
//!
//! The clock runs from the first publish until every record has its offset: a publish returns
//! once its record is durable, and the background sequencer of each partition the client wrote
//! to gives offsets right after the commit (see `docs/design/topics.md`), so the rate is that of
//! records a consumer group can read. Single records by 1 and by 16 producers are compared with
//! raw autocommit INSERTs on 1 and on 16 connections; batches by 1 producer with the raw
//! single-row rate on 1 connection, and by 16 producers with that on 16 connections. Once the
//! clock has stopped, the log is read back (see `log.rs`).
//!
//! Last, the ceiling of one partition's sequencer: records committed inside the bench's own
//! transactions (`publish_batch_in`, which wakes no sequencer) wait for their offsets; one
//! `Topic::sequence` call is then timed while it gives them offsets in steps of up to 1 000.
//! SQLite has no sequencer (a record gets its offset in its publishing transaction): there this
//! figure is reported as not available, and the "sequencing steps" of the other figures are the
//! publishing transactions' stamps.

use std::time::{Duration, Instant};

use anyhow::Result;
use sqlmq::Topic;
use sqlmq::topic::Published;
use tokio::task::JoinSet;

use super::log::{self, Logged};
use super::{FILL_BATCH, record, with_topic};
use crate::args::{MANY, PUBLISH_BATCH, TOPIC_PARTITIONS};
use crate::backend::{Db, not_available};
use crate::context::Ctx;
use crate::outcome::Outcome;
use crate::progress::Bar;
use crate::raw::{self, split};
use crate::report::{Figure, Unavailable};

/// Rows one sequencing step moves at most (the library's `SEQUENCE_BATCH`).
const SEQUENCE_STEP: usize = 1000;

/// One timed run: what was published, and when.
struct Run {
    /// Every record's id and partition.
    published: Vec<Published>,
    /// From the first publish until every record had its offset.
    elapsed: Duration,
    /// From the return of the last publish until every record had its offset.
    tail: Duration,
    /// False when waiting for the offsets was given up (the missing ones count as losses).
    complete: bool,
}

/// Key of the sequencer's figure.
const SEQUENCER: &str = "topic.publish.1p.sequencer";

/// `topic.publish`.
pub async fn publish<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let bar = ctx.bar("topic.publish");
    let plan = &ctx.plan;
    let mut figures = Vec::new();
    for partitions in [1, TOPIC_PARTITIONS] {
        for (batch, producers, n, baseline) in [
            (1, 1, plan.topic_single_one, raw::INSERT_ONE),
            (1, MANY, plan.topic_single_many, raw::INSERT_MANY),
            (PUBLISH_BATCH, 1, plan.topic_batch_one, raw::INSERT_ONE),
            (PUBLISH_BATCH, MANY, plan.topic_batch_many, raw::INSERT_MANY),
        ] {
            let what = describe(batch, partitions, producers);
            let b = bar.clone();
            let (run, logged) = with_topic(ctx, "pub", partitions, |topic| async move {
                b.phase(&what, n);
                let run = timed(&topic, producers, batch, n, &b).await?;
                let logged = log::check(&topic, &run.published).await?;
                Ok((run, logged))
            })
            .await?;
            let figure = figure::<B>(batch, partitions, producers, &run, logged);
            figures.push(figure.against(baseline));
        }
    }
    let label = format!("sqlmq sequencer alone, 1 partition, steps of {SEQUENCE_STEP}");
    let outcome = match B::NO_SEQUENCER {
        None => {
            figures.push(sequencer(ctx, &bar, label).await?);
            Outcome::Ran(figures)
        }
        Some(why) => Outcome::Partly(
            figures,
            vec![Unavailable {
                key: SEQUENCER.to_owned(),
                label,
                reason: not_available::<B>(why),
            }],
        ),
    };
    bar.finish();
    Ok(outcome)
}

/// The sequencer alone: records committed to one partition with no sequencer woken, then one
/// timed `Topic::sequence` pass.
async fn sequencer<B: Db>(ctx: &Ctx<B>, bar: &Bar, label: String) -> Result<Figure> {
    let n = ctx.plan.topic_batch_one;
    let b = bar.clone();
    let (published, moved, elapsed, logged) = with_topic(ctx, "seq", 1, |topic| async move {
        let published = pending(&topic, n, &b).await?;
        b.phase("sequencer alone, 1 partition", n);
        let started = Instant::now();
        let moved = topic.sequence().await?;
        let elapsed = started.elapsed();
        b.inc(moved as u64);
        let logged = log::check(&topic, &published).await?;
        Ok((published.len(), moved, elapsed, logged))
    })
    .await?;
    Ok(Figure::rate(SEQUENCER, label, moved as u64, elapsed)
        .against(raw::INSERT_MANY)
        .checked(logged.check)
        .note(
            format!(
                "offsets given by one sequencing pass over {published} committed records \
                 waiting in 1 partition ({moved} of them sequenced by this pass, in {} steps): \
                 the ceiling of one partition's sequencer",
                logged.steps
            ) + &logged.problems(),
        ))
}

/// Commit `n` records to the topic in batches inside the bench's own transactions: they wait
/// for their offsets, as no sequencer is woken for them (unmeasured set-up).
async fn pending<B: Db>(topic: &Topic<B>, n: u64, bar: &Bar) -> Result<Vec<Published>> {
    bar.phase("sequencer alone: publish_batch_in", n);
    let mut published = Vec::with_capacity(n as usize);
    let mut next = 0;
    while next < n {
        let k = (n - next).min(FILL_BATCH);
        let mut tx = topic.client().begin().await?;
        let records = (next..next + k).map(record).collect();
        published.extend(topic.publish_batch_in(&mut tx, records).await?);
        tx.commit().await?;
        next += k;
        bar.inc(k);
    }
    Ok(published)
}

/// About `n` records (whole batches of `batch`) published by `producers` tasks, then the wait
/// for their offsets.
async fn timed<B: Db>(
    topic: &Topic<B>,
    producers: usize,
    batch: usize,
    n: u64,
    bar: &Bar,
) -> Result<Run> {
    let size = batch as u64;
    let started = Instant::now();
    let mut set = JoinSet::new();
    let mut first = 0;
    for batches in split(n.div_ceil(size), producers) {
        let (topic, bar, start) = (topic.clone(), bar.clone(), first);
        first += batches * size;
        set.spawn(async move {
            let mut out = Vec::with_capacity((batches * size) as usize);
            for i in 0..batches {
                let from = start + i * size;
                if batch == 1 {
                    out.push(topic.publish(record(from)).await?);
                } else {
                    let records = (from..from + size).map(record).collect();
                    out.extend(topic.publish_batch(records).await?);
                }
                bar.inc(size);
            }
            anyhow::Ok(out)
        });
    }
    let mut published = Vec::with_capacity(first as usize);
    while let Some(done) = set.join_next().await {
        published.extend(done??);
    }
    let returned = started.elapsed();
    let complete = log::wait_sequenced(topic, &published, returned).await?;
    let elapsed = started.elapsed();
    Ok(Run {
        published,
        elapsed,
        tail: elapsed.saturating_sub(returned),
        complete,
    })
}

/// What a run does, for its label and its progress bar.
fn describe(batch: usize, partitions: u32, producers: usize) -> String {
    let call = if batch == 1 {
        "publish".to_owned()
    } else {
        format!("publish_batch of {batch}")
    };
    let partitions = if partitions == 1 {
        "1 partition".to_owned()
    } else {
        format!("{partitions} partitions")
    };
    let producers = if producers == 1 {
        "1 producer".to_owned()
    } else {
        format!("{producers} producers")
    };
    format!("{call}, {partitions}, {producers}")
}

/// The figure of one run: `topic.publish.<partitions>p.single.<producers>` or
/// `topic.publish.<partitions>p.batch100.<producers>`.
fn figure<B: Db>(
    batch: usize,
    partitions: u32,
    producers: usize,
    run: &Run,
    logged: Logged,
) -> Figure {
    let kind = if batch == 1 {
        "single".to_owned()
    } else {
        format!("batch{batch}")
    };
    let key = format!("topic.publish.{partitions}p.{kind}.{producers}");
    let label = format!("sqlmq {}", describe(batch, partitions, producers));
    let records = run.published.len() as u64;
    let mut note = if run.complete {
        format!(
            "every record had its offset {:.0} ms after the last publish returned",
            run.tail.as_secs_f64() * 1000.0
        )
    } else {
        format!(
            "gave up waiting for offsets {:.1} s after the last publish returned",
            run.tail.as_secs_f64()
        )
    };
    let per_step = records as f64 / logged.steps.max(1) as f64;
    note.push_str(&match B::NO_SEQUENCER {
        None => format!(
            "; {} sequencing steps, {per_step:.1} records per step",
            logged.steps
        ),
        Some(_) => format!(
            "; offsets given in the publishing transactions: {} stamps, {per_step:.1} records \
             per stamp",
            logged.steps
        ),
    });
    note.push_str(&logged.problems());
    if batch > 1 {
        note.push_str("; compared with the raw single-row INSERT rate");
    }
    Figure::rate(&key, label, records, run.elapsed)
        .checked(logged.check)
        .note(note)
}
