//! `topic.group`: a topic of 8 partitions, pre-published (not timed) until every record has its
//! offset, drained by one cluster consumer group of 8 members — separate tasks, each claiming
//! 100 records at a time with `receive` and settling them with one `ack_batch` — beside the raw
//! INSERT-then-DELETE lifecycle rate, as `queue.drain`.
//!
//! Members poll like the queue consumers (10 ms doubling to 1 s after an empty claim). A
//! duplicate is a record delivered a second time: nothing is ever nacked and leases outlive the
//! run, so no delivery is a legitimate retry. A loss is a published record no member received
//! before they gave up (10 s without a delivery).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use sqlmq::queue::Receipt;
use sqlmq::topic::StartAt;
use sqlmq::{Delivery, Group, GroupConfig, MessageId};
use tokio::task::JoinSet;

use super::{fill, with_topic};
use crate::args::{CONSUMERS, LEASE, RECEIVE_BATCH, TOPIC_PARTITIONS};
use crate::backend::Db;
use crate::context::Ctx;
use crate::outcome::Outcome;
use crate::progress::Bar;
use crate::raw;
use crate::report::Figure;
use crate::track::Tracker;
use sqlmq_cli_common::poll::PollDelay;

/// `topic.group`.
pub async fn group<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.topic_group;
    let bar = ctx.bar("topic.group");
    let b = bar.clone();
    let (elapsed, check, lost_acks) =
        with_topic(ctx, "grp", TOPIC_PARTITIONS, |topic| async move {
            let published = fill(&topic, n, &b).await?;
            let group = topic
                .create_group("bench", GroupConfig::default(), StartAt::Earliest)
                .await?;
            let tracker = Arc::new(Tracker::new(published.len() as u64));
            tracker.sending_done();
            b.phase(&format!("drain, {CONSUMERS} members"), n);
            let started = Instant::now();
            let mut members = JoinSet::new();
            for _ in 0..CONSUMERS {
                let member = member(group.clone(), Arc::clone(&tracker), b.clone());
                members.spawn(member);
            }
            let mut lost = 0;
            while let Some(done) = members.join_next().await {
                lost += done??;
            }
            let elapsed = tracker.last_delivery().saturating_duration_since(started);
            let ids: Vec<MessageId> = published.iter().map(|p| p.id).collect();
            Ok((elapsed, tracker.check(&ids), lost))
        })
        .await?;
    bar.finish();
    let label = format!("sqlmq group drain, {CONSUMERS} members, {TOPIC_PARTITIONS} partitions");
    let mut figure = Figure::rate(&format!("topic.group.{CONSUMERS}"), label, n, elapsed)
        .against(raw::LIFECYCLE)
        .checked(check);
    if lost_acks > 0 {
        figure = figure.note(format!("{lost_acks} acks found their lease lost"));
    }
    Ok(Outcome::Ran(vec![figure]))
}

/// One member: claim, ack, record, until the tracker says stop. Returns the acks that found
/// their lease lost (always 0 unless something is broken).
async fn member<B: Db>(group: Group<B>, tracker: Arc<Tracker<MessageId>>, bar: Bar) -> Result<u64> {
    let mut poll = PollDelay::default();
    let mut lost = 0;
    while !tracker.should_stop() {
        let got = group.receive(RECEIVE_BATCH, LEASE).await?;
        if got.is_empty() {
            tokio::time::sleep(poll.next_delay()).await;
            continue;
        }
        poll.reset();
        let receipts: Vec<Receipt> = got.iter().map(Delivery::receipt).collect();
        lost += group.ack_batch(&receipts).await?.lost.len() as u64;
        // Recorded once acked, so that the drain's end time includes the last ack.
        tracker.record(got.iter().map(|d| d.id));
        bar.inc(got.len() as u64);
    }
    Ok(lost)
}
