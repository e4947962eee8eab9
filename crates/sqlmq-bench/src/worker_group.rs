//! `worker.group`: `worker.e2e` on a cluster group instead of a queue. The same worker — the
//! same slots, claim size, claim loops and no-op typed handler, the same pool — drains the same
//! number of jobs pre-published (not timed) to a topic of [`TOPIC_PARTITIONS`] partitions
//! through a new cluster group, until it stops on its own with every ack flushed. Its rate is
//! reported against `worker.e2e` of the same run: what consuming a cluster group costs against
//! consuming a queue, with nothing else different.
//!
//! `topic.pipeline.consume` is not that comparison: its worker has 16 slots (a pipeline's
//! handlers each hold a connection for their job transaction), so it claims and acks a few
//! records at a time where `worker.e2e` claims up to a hundred.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use sqlmq::{
    CancellationToken, GroupConfig, Job, JobContext, Message, MessageId, Outcome, Record, StartAt,
    TopicConfig, Worker,
};

use super::args::TOPIC_PARTITIONS;
use super::backend::Db;
use super::context::Ctx;
use super::outcome::Outcome as Ran;
use super::queue::{POOL, with_client};
use super::report::Figure;
use super::topic::{fill_with, record_key};
use super::track::Tracker;
use super::worker::{E2E_BATCH, E2E_CONCURRENCY, Noop};

/// `worker.group`.
pub async fn group<B: Db>(ctx: &Ctx<B>) -> Result<Ran> {
    let n = ctx.plan.worker_messages;
    let bar = ctx.bar("worker.group");
    let b = bar.clone();
    let run = with_client(ctx, "wgr", POOL, |client| async move {
        let config = TopicConfig::default().partitions(TOPIC_PARTITIONS);
        let topic = client.create_topic("wgr", config).await?;
        let published = fill_with(&topic, n, &b, |i| {
            Ok(Record::json(&Noop(i))?
                .header(Message::JOB_HEADER, Noop::NAME)
                .key(record_key(i)))
        })
        .await?;
        let ids: Vec<MessageId> = published.iter().map(|p| p.id).collect();
        topic
            .create_group("g", GroupConfig::default(), StartAt::Earliest)
            .await?;
        b.phase("worker on a cluster group, no-op typed handler", n);
        let tracker = Arc::new(Tracker::new(n));
        let (t, bb) = (Arc::clone(&tracker), b.clone());
        let handler = move |_job: Noop, ctx: JobContext<B>| {
            t.record([ctx.id()]);
            bb.set(t.delivered());
            async { Ok::<_, Infallible>(Outcome::Done) }
        };
        let started = Instant::now();
        let report = Worker::builder(&client)
            .topic_group("wgr", "g", handler)
            .concurrency(E2E_CONCURRENCY)
            .max_batch(E2E_BATCH)
            .stop_when_drained()
            .run(CancellationToken::new())
            .await?;
        Ok((started.elapsed(), tracker.check(&ids), report))
    })
    .await;
    bar.finish();
    let (elapsed, check, report) = run?;
    Ok(Ran::Ran(vec![
        Figure::rate(
            "worker.group",
            format!(
                "sqlmq worker on a cluster group, no-op typed handler, {E2E_CONCURRENCY} slots"
            ),
            n,
            elapsed,
        )
        .against("worker.e2e")
        .checked(check)
        .note(format!(
            "worker.e2e's worker on a cluster group of a {TOPIC_PARTITIONS}-partition topic \
             ({} acked); ratio: against the same worker on a queue",
            report.acked
        )),
    ]))
}
