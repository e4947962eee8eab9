//! `topic.pipeline`: an exactly-once pipeline's throughput. A pre-published topic of 8
//! partitions is consumed twice by the worker runtime through two cluster groups: once with a
//! no-op handler (acks batched by the worker: what consuming alone costs), once as a pipeline
//! whose handler publishes each record's result to a second topic in its job transaction, which
//! also acks the record (one transaction per record: the output and the ack commit together).
//! The pipeline's rate is reported against the plain consume rate of the same run.
//!
//! Checked: every input delivered once to each group (no loss, no duplicate), and the output
//! topic holds exactly as many records as there were inputs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use sqlmq::{
    CancellationToken, Delivery, GroupConfig, JobContext, MessageId, Outcome, Record, StartAt,
    Topic, TopicConfig, Worker,
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

/// `topic.pipeline`.
pub async fn pipeline<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    // Half the group drain's count: one transaction per record is the slower path.
    let n = (ctx.plan.topic_group / 2).max(1);
    let bar = ctx.bar("topic.pipeline");
    let b = bar.clone();
    let (plain, piped) = with_topic(ctx, "pip", TOPIC_PARTITIONS, |topic| async move {
        let published = fill(&topic, n, &b).await?;
        let ids: Vec<MessageId> = published.iter().map(|p| p.id).collect();
        let out = topic
            .client()
            .create_topic(
                "pip.out",
                TopicConfig::default().partitions(TOPIC_PARTITIONS),
            )
            .await?;
        b.phase("worker, no-op handler", n);
        let plain = run(&topic, "plain", None, &ids, &b).await?;
        b.phase("worker, publish + ack in one transaction", n);
        let piped = run(&topic, "pipe", Some(out.clone()), &ids, &b).await?;
        out.sequence().await?;
        let written: i64 = out
            .partitions()
            .await?
            .iter()
            .map(|p| p.end - p.start)
            .sum();
        ensure!(
            written == n as i64,
            "the pipeline wrote {written} results for {n} inputs"
        );
        Ok((plain, piped))
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
    ]))
}

/// Consume every record of `topic` through a new cluster group `group` with the worker,
/// publishing each to `out` in the job transaction when given; returns the time taken and what
/// the handlers saw.
async fn run<B: Db>(
    topic: &Topic<B>,
    group: &str,
    out: Option<Topic<B>>,
    ids: &[MessageId],
    bar: &Bar,
) -> Result<(Duration, Check)> {
    topic
        .create_group(group, GroupConfig::default(), StartAt::Earliest)
        .await?;
    let tracker = Arc::new(Tracker::new(ids.len() as u64));
    let (t, b) = (Arc::clone(&tracker), bar.clone());
    let handler = move |d: Delivery, ctx: JobContext<B>| {
        let (t, b, out) = (Arc::clone(&t), b.clone(), out.clone());
        async move {
            if let Some(out) = out {
                let mut tx = ctx.begin().await?;
                tx.publish(&out, Record::new(d.body).key(d.id.to_string()))
                    .await?;
                tx.commit().await?;
            }
            t.record([d.id]);
            b.set(t.delivered());
            Ok::<_, sqlmq::Error>(Outcome::Done)
        }
    };
    let started = Instant::now();
    Worker::builder(topic.client())
        .topic_group_raw(topic.name(), group, handler)
        .concurrency(CONCURRENCY)
        .stop_when_drained()
        .run(CancellationToken::new())
        .await?;
    Ok((started.elapsed(), tracker.check(ids)))
}
