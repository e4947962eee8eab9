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

use anyhow::Result;
use sqlmq::topic::StartAt;
use sqlmq::{GroupConfig, Job, Message, MessageId, Record, TopicConfig};

use super::args::TOPIC_PARTITIONS;
use super::backend::Db;
use super::context::Ctx;
use super::outcome::Outcome as Ran;
use super::queue::{POOL, with_client};
use super::report::Figure;
use super::topic::{fill_with, record_key};
use super::worker::{E2E_CONCURRENCY, Noop, e2e_worker};

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
        let phase = "worker on a cluster group, no-op typed handler";
        e2e_worker(&client, "wgr/g", &ids, &b, phase).await
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
