//! sqlmq topic scenarios: each runs on a topic in tables of its own (see
//! [`Ctx::client`](super::context::Ctx::client)) and reports beside the raw baseline it is
//! compared with.
//!
//! | file | scenario |
//! |---|---|
//! | `publish.rs` | `topic.publish`: single records and batches of 100, by 1 and 16 producers, on 1 and 8 partitions, until every record has its offset |
//! | `group.rs` | `topic.group`: a pre-published topic of 8 partitions drained by one cluster group of 8 members |
//! | `pipeline.rs` | `topic.pipeline`: a worker consuming a cluster group, then the same publishing each result to another topic and acking in one job transaction |
//! | `log.rs` | waiting until every published record has its offset, and reading the log back to check it |

pub mod group;
mod log;
pub mod pipeline;
pub mod publish;

use anyhow::Result;
use sqlmq::topic::Published;
use sqlmq::{Record, Topic, TopicConfig};

use super::args::{MANY, TOPIC_PARTITIONS};
use super::backend::Db;
use super::context::Ctx;
use super::measure::body;
use super::progress::Bar;
use super::queue::with_client;

/// Pool size of the topic scenarios' clients: a connection for every producer (or member), one
/// for each partition's background sequencer, and a few for housekeeping.
pub const POOL: u32 = (MANY as u32) + TOPIC_PARTITIONS + 4;
/// Records per `publish_batch` when pre-publishing (not measured).
const FILL_BATCH: u64 = 10_000;

/// Run `work` with a fresh client (tables of its own, [`POOL`] connections opened first) and a
/// topic named `tag` with `partitions` partitions in it; then drop the client's tables.
pub async fn with_topic<B, F, Fut, T>(
    ctx: &Ctx<B>,
    tag: &str,
    partitions: u32,
    work: F,
) -> Result<T>
where
    B: Db,
    F: FnOnce(Topic<B>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_client(ctx, tag, POOL, |client| async move {
        let config = TopicConfig::default().partitions(partitions);
        let topic = client.create_topic(tag, config).await?;
        work(topic).await
    })
    .await
}

/// Record number `n` of a scenario: a [`BODY_BYTES`](super::args::BODY_BYTES) body carrying
/// `n`, keyed by `n`, so that records spread over the partitions (FNV-1a of the key).
pub fn record(n: u64) -> Record {
    Record::new(body(n)).key(record_key(n))
}

/// The key of record number `n` (see [`record`]).
pub fn record_key(n: u64) -> String {
    format!("k{n}")
}

/// Publish `n` records in atomic batches (unmeasured set-up), then wait until every one has
/// its offset; returns what was published.
pub async fn fill<B: Db>(topic: &Topic<B>, n: u64, bar: &Bar) -> Result<Vec<Published>> {
    fill_with(topic, n, bar, |n| Ok(record(n))).await
}

/// [`fill`] with records of the caller's making: `make(n)` is record number `n`.
pub async fn fill_with<B: Db>(
    topic: &Topic<B>,
    n: u64,
    bar: &Bar,
    make: impl Fn(u64) -> Result<Record>,
) -> Result<Vec<Published>> {
    bar.phase("pre-publish (publish_batch)", n);
    let mut published = Vec::with_capacity(n as usize);
    let mut next = 0;
    while next < n {
        let k = (n - next).min(FILL_BATCH);
        let batch = (next..next + k)
            .map(&make)
            .collect::<Result<Vec<Record>>>()?;
        published.extend(topic.publish_batch(batch).await?);
        next += k;
        bar.inc(k);
    }
    log::wait_sequenced(topic, &published, std::time::Duration::ZERO).await?;
    Ok(published)
}
