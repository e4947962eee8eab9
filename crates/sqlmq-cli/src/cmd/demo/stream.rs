//! The demo's second act: a topic with a consumer group. One producer publishes keyed
//! records in atomic batches over four partitions; two members of the cluster group
//! `billing` share the partitions, ack record by record, and one record fails once and comes
//! back on the group's retry ladder. At the end the group's lag is zero and every partition's
//! offsets are dense.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sqlmq::queue::Backoff;
use sqlmq::topic::StartAt;
use sqlmq::{Backend, Client, Group, GroupConfig, MessageId, Record, Topic, TopicConfig};
use tokio::task::JoinSet;

use super::workers::LEASE;
use crate::output::short_duration;
use crate::poll::PollDelay;

/// The topic the demo (re)uses.
pub const TOPIC: &str = "demo_events";
/// Its consumer group.
pub const GROUP: &str = "billing";
/// Partitions of the topic.
const PARTITIONS: u32 = 4;
/// Members of the group.
const MEMBERS: usize = 2;
/// Records per publish batch.
const PUBLISH_BATCH: usize = 100;
/// Distinct keys (customers): records of one key share a partition, in publish order.
const KEYS: usize = 20;
/// Records per claim of a member.
const RECEIVE_BATCH: usize = 32;
/// The group's wait before the retry of a failed record.
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// The act gives up (and fails) if its records are not all acked by then.
const DEADLINE: Duration = Duration::from_secs(25);

/// What the members did.
#[derive(Default)]
struct Counters {
    acked: AtomicU64,
    /// The attempt on which the flaky record was acked (0: not yet).
    flaky_attempt: AtomicU32,
}

/// Publish `count` records to the demo topic and consume them in the group; print what
/// happened.
pub async fn run<B: Backend>(client: &Client<B>, count: usize) -> Result<()> {
    let topic = client
        .create_topic(TOPIC, TopicConfig::default().partitions(PARTITIONS))
        .await?;
    let config = GroupConfig::default()
        .max_attempts(3)
        .backoff(Backoff::Ladder(vec![RETRY_DELAY]));
    let group = topic.create_group(GROUP, config, StartAt::Latest).await?;
    // Start from the end: records an interrupted earlier run left are not this run's.
    group.reset(StartAt::Latest).await?;
    group.purge_dead_letters().await?;
    let before = ends(&topic).await?;

    let flaky = MessageId::new();
    let records: Vec<Record> = (0..count)
        .map(|i| {
            let record =
                Record::new(format!("{{\"invoice\": {i}}}")).key(format!("customer-{}", i % KEYS));
            if i == count / 2 {
                record.with_id(flaky)
            } else {
                record
            }
        })
        .collect();
    let started = Instant::now();
    for batch in records.chunks(PUBLISH_BATCH) {
        topic.publish_batch(batch.to_vec()).await?;
    }

    let counters = Arc::new(Counters::default());
    let mut members: JoinSet<Result<()>> = JoinSet::new();
    for _ in 0..MEMBERS {
        let (g, c) = (group.clone(), Arc::clone(&counters));
        members.spawn(async move { member(g, flaky, &c, count as u64).await });
    }
    while let Some(done) = members.join_next().await {
        done.context("a demo member panicked")??;
    }
    let elapsed = started.elapsed();
    summary(&topic, &group, &before, &counters, count, elapsed).await
}

/// The end offset of every partition.
async fn ends<B: Backend>(topic: &Topic<B>) -> Result<BTreeMap<u32, i64>> {
    Ok(topic
        .partitions()
        .await?
        .into_iter()
        .map(|p| (p.partition, p.end))
        .collect())
}

/// One member: claim, handle, ack, until the group has acked `total` records.
async fn member<B: Backend>(
    group: Group<B>,
    flaky: MessageId,
    counters: &Counters,
    total: u64,
) -> Result<()> {
    let started = Instant::now();
    let mut poll = PollDelay::default();
    while counters.acked.load(Ordering::Relaxed) < total {
        if started.elapsed() > DEADLINE {
            bail!(
                "group {GROUP} did not ack its {total} records within {}",
                short_duration(DEADLINE)
            );
        }
        let batch = group.receive(RECEIVE_BATCH, LEASE).await?;
        if batch.is_empty() {
            tokio::time::sleep(poll.next_delay().min(Duration::from_millis(50))).await;
            continue;
        }
        poll.reset();
        let mut acks = Vec::with_capacity(batch.len());
        for d in &batch {
            if d.id == flaky && d.attempt == 1 {
                group
                    .nack(d.receipt(), None, "invoice service unavailable (transient)")
                    .await?;
                continue;
            }
            if d.id == flaky {
                counters.flaky_attempt.store(d.attempt, Ordering::Relaxed);
            }
            acks.push(d.receipt());
        }
        let report = group.ack_batch(&acks).await?;
        counters
            .acked
            .fetch_add(report.acked as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Print what happened, and check that the group consumed everything.
async fn summary<B: Backend>(
    topic: &Topic<B>,
    group: &Group<B>,
    before: &BTreeMap<u32, i64>,
    counters: &Counters,
    count: usize,
    elapsed: Duration,
) -> Result<()> {
    let after = ends(topic).await?;
    let ranges: Vec<String> = after
        .iter()
        .map(|(p, end)| {
            let start = before.get(p).copied().unwrap_or(0);
            format!("p{p} {start}..{end}")
        })
        .collect();
    let added: i64 = after
        .iter()
        .map(|(p, end)| end - before.get(p).copied().unwrap_or(0))
        .sum();
    println!(
        "topic {TOPIC}: published {count} records keyed by {KEYS} customers over {PARTITIONS} \
         partitions, offsets {} ({added} new, none skipped)",
        ranges.join(", ")
    );
    let lag = group.lag().await?;
    println!(
        "group {GROUP}: {MEMBERS} members acked {} records in {}; one failed once and was \
         acked on attempt {} after the group's {} retry; lag now {} unconsumed, {} dead",
        counters.acked.load(Ordering::Relaxed),
        short_duration(elapsed),
        counters.flaky_attempt.load(Ordering::Relaxed),
        short_duration(RETRY_DELAY),
        lag.unconsumed,
        lag.dead
    );
    println!(
        "next: sqlmq topic describe {TOPIC} · sqlmq lag {TOPIC} · sqlmq query {TOPIC} --key customer-7"
    );
    if added != count as i64 || lag.unconsumed != 0 || lag.dead != 0 {
        bail!("the demo group should have consumed all {count} records, found {lag:?}");
    }
    Ok(())
}
