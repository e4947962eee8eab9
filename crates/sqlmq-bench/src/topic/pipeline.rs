//! `topic.pipeline`: an exactly-once pipeline's throughput. A pre-published topic of 8
//! partitions is consumed twice by the worker runtime through two cluster groups: once with a
//! no-op handler (acks batched by the worker: what consuming alone costs), once as a pipeline
//! whose handler publishes each record's result to a second topic in its job transaction, which
//! also acks the record (one transaction per record: the output and the ack commit together),
//! and a third time by a batch handler that publishes a whole claim's results and acks them in
//! one transaction. Both pipelines' rates are reported against the plain consume rate of the
//! same run.
//!
//! Checked: every input delivered once to each group (no loss, no duplicate), and each output
//! topic holds exactly as many records as there were inputs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use sqlmq::source::SourceName;
use sqlmq::topic::StartAt;
use sqlmq::worker::{BatchContext, CancellationToken, WorkerBuilder};
use sqlmq::{
    Delivery, GroupConfig, JobContext, MessageId, Outcome, Record, Topic, TopicConfig, Worker,
};

use super::{fill, with_topic};
use crate::args::TOPIC_PARTITIONS;
use crate::backend::Db;
use crate::context::Ctx;
use crate::outcome::Outcome as Ran;
use crate::progress::Bar;
use crate::report::Figure;
use crate::track::{Check, Tracker};

/// Handlers running at once: each pipeline handler holds a connection for its transaction,
/// within the topic scenarios' pool.
const CONCURRENCY: usize = 16;

/// What the worker's handler does with each record.
enum Handling<B: Db> {
    /// Nothing (acks batched by the worker).
    Plain,
    /// Publish it to the topic in a job transaction of its own, which acks it.
    PerRecord(Topic<B>),
    /// Publish a whole claim to the topic in one transaction, which acks the claim.
    Batch(Topic<B>),
}

/// `topic.pipeline`.
pub async fn pipeline<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    // Half the group drain's count: one transaction per record is the slower path.
    let n = (ctx.plan.topic_group / 2).max(1);
    let bar = ctx.bar("topic.pipeline");
    let b = bar.clone();
    let (plain, piped, batched) = with_topic(ctx, "pip", TOPIC_PARTITIONS, |topic| async move {
        let published = fill(&topic, n, &b).await?;
        let ids: Vec<MessageId> = published.iter().map(|p| p.id).collect();
        let output = |name: &'static str| {
            let client = topic.client().clone();
            async move {
                let config = TopicConfig::default().partitions(TOPIC_PARTITIONS);
                client.create_topic(name, config).await
            }
        };
        let (out, batch_out) = (output("pip.out").await?, output("pip.batch").await?);
        b.phase("worker, no-op handler", n);
        let plain = run(&topic, "plain", Handling::Plain, &ids, &b).await?;
        b.phase("worker, publish + ack in one transaction", n);
        let piped = run(&topic, "pipe", Handling::PerRecord(out.clone()), &ids, &b).await?;
        b.phase(
            "batch worker, a claim's publish + acks in one transaction",
            n,
        );
        let batched = run(
            &topic,
            "batch",
            Handling::Batch(batch_out.clone()),
            &ids,
            &b,
        )
        .await?;
        for out in [out, batch_out] {
            out.sequence().await?;
            let written: i64 = out
                .partitions()
                .await?
                .iter()
                .map(|p| p.end - p.start)
                .sum();
            ensure!(
                written == n as i64,
                "the pipeline into {} wrote {written} results for {n} inputs",
                out.name()
            );
        }
        Ok((plain, piped, batched))
    })
    .await?;
    bar.finish();
    let label =
        |what: &str| format!("sqlmq worker on a cluster group, {what}, {CONCURRENCY} slots");
    Ok(Ran::Ran(vec![
        Figure::rate("topic.pipeline.consume", label("no-op handler"), n, plain.0)
            .against(crate::raw::LIFECYCLE)
            .checked(plain.1),
        Figure::rate(
            "topic.pipeline.publish",
            label("publishing each result to a topic and acking in one job transaction"),
            n,
            piped.0,
        )
        .against("topic.pipeline.consume")
        .checked(piped.1)
        .note(format!(
            "{TOPIC_PARTITIONS} partitions in and out; one transaction per record (the output \
             record and the ack commit together); timed until the worker stopped on its own"
        )),
        Figure::rate(
            "topic.pipeline.batch",
            format!(
                "sqlmq batch worker on a cluster group, publishing a claim's results and acking \
                 them in one transaction, {CONCURRENCY} slots"
            ),
            n,
            batched.0,
        )
        .against("topic.pipeline.consume")
        .checked(batched.1)
        .note(format!(
            "{TOPIC_PARTITIONS} partitions in and out; one transaction per claim (up to the free \
             slots of a claim loop); timed until the worker stopped on its own"
        )),
    ]))
}

/// Consume every record of `topic` through a new cluster group `group` with the worker,
/// handling each as `handling` says; returns the time taken and what the handlers saw.
async fn run<B: Db>(
    topic: &Topic<B>,
    group: &str,
    handling: Handling<B>,
    ids: &[MessageId],
    bar: &Bar,
) -> Result<(Duration, Check)> {
    topic
        .create_group(group, GroupConfig::default(), StartAt::Earliest)
        .await?;
    let tracker = Arc::new(Tracker::new(ids.len() as u64));
    let (t, b) = (Arc::clone(&tracker), bar.clone());
    let builder = Worker::builder(topic.client());
    let result = |d: &Delivery| Record::new(d.body.clone()).key(d.id.to_string());
    let builder: WorkerBuilder<B> = match handling {
        Handling::Batch(out) => builder.source_batch(
            SourceName::group(topic.name(), group),
            move |batch: Vec<Delivery>, ctx: BatchContext<B>| {
                let (t, b, out) = (Arc::clone(&t), b.clone(), out.clone());
                async move {
                    let mut tx = ctx.begin().await?;
                    out.publish_batch_in(&mut tx, batch.iter().map(result).collect())
                        .await?;
                    tx.commit().await?;
                    t.record(batch.iter().map(|d| d.id));
                    b.set(t.delivered());
                    Ok::<_, sqlmq::Error>(Outcome::Done)
                }
            },
        ),
        handling => {
            let out = match handling {
                Handling::PerRecord(out) => Some(out),
                _ => None,
            };
            builder.topic_group_raw(
                topic.name(),
                group,
                move |d: Delivery, ctx: JobContext<B>| {
                    let (t, b, out) = (Arc::clone(&t), b.clone(), out.clone());
                    async move {
                        if let Some(out) = out {
                            let mut tx = ctx.begin().await?;
                            tx.publish(&out, result(&d)).await?;
                            tx.commit().await?;
                        }
                        t.record([d.id]);
                        b.set(t.delivered());
                        Ok::<_, sqlmq::Error>(Outcome::Done)
                    }
                },
            )
        }
    };
    let started = Instant::now();
    builder
        .concurrency(CONCURRENCY)
        .stop_when_drained()
        .run(CancellationToken::new())
        .await?;
    Ok((started.elapsed(), tracker.check(ids)))
}
