//! sqlmq queue scenarios: each runs on a queue in tables of its own (see
//! [`Ctx::client`](super::context::Ctx::client)) and reports beside the raw baseline it is
//! compared with.
//!
//! | file | scenario |
//! |---|---|
//! | `produce.rs` | `queue.produce` (single sends) and `queue.batch` (atomic batches) |
//! | `drain.rs` | `queue.drain` (pre-filled queue, 8 consumers, peak memory) and `queue.mixed` |
//! | `latency.rs` | `queue.latency`: end-to-end latency, busy and after idle |
//! | `claim.rs` | `queue.claim`: claim latency at a small and a large backlog |
//! | `idle.rs` | `queue.idle`: queries/s of an idle polling consumer |
//! | `budget.rs` | `queue.budget`: statements per send, claim, ack and empty claim |
//! | `limits.rs` | `queue.limits`: `queue.drain`'s lease drain on a queue with limits that never bind |
//! | `keys.rs` | `queue.keys`: `queue.drain`'s lease drain of messages with concurrency keys |
//! | `fair.rs` | `queue.fair`: a fair queue's drain, send and claim at many keys |
//! | `consumer.rs` | the polling consumer loop they share |

pub mod budget;
pub mod claim;
mod consumer;
pub mod drain;
pub mod fair;
pub mod flows;
pub mod idle;
pub mod keys;
pub mod latency;
pub mod limits;
pub mod produce;

use anyhow::Result;
use std::time::Duration;

use sqlmq::queue::RateLimit;
use sqlmq::{Client, Message, MessageId, Queue, QueueConfig};

use super::args::{CONSUMERS, MANY};
use super::backend::Db;
use super::context::Ctx;
use super::measure::body;
use super::progress::Bar;
use super::raw::warm_up;

/// Pool size of the queue scenarios' clients: a connection for every producer and consumer of
/// the largest scenario, and a few for housekeeping.
pub const POOL: u32 = (MANY + CONSUMERS) as u32 + 4;
/// Batch size used to pre-fill queues (not measured).
const FILL_BATCH: u64 = 10_000;
/// `max_in_flight` of the limits that never bind: far above the most messages any scenario
/// holds at once (8 consumers × 100 in `queue.limits`, the worker's slots in `worker.limits`).
pub const UNBINDING_IN_FLIGHT: u32 = 10_000;

/// A queue configuration with both limits set and neither ever reached: at most
/// [`UNBINDING_IN_FLIGHT`] in flight, and the largest rate a [`RateLimit`] takes (1 000 000 per
/// second). Each claim goes through the limited queue's gate; none is ever cut short by it.
pub fn unbinding_limits() -> QueueConfig {
    QueueConfig::default()
        .max_in_flight(Some(UNBINDING_IN_FLIGHT))
        .rate_limit(Some(RateLimit::new(
            RateLimit::MAX_COUNT,
            Duration::from_secs(1),
        )))
}

/// The limits of [`unbinding_limits`], for notes.
pub const UNBINDING_NOTE: &str = "max_in_flight 10000, rate_limit 1000000/1s: never reached, but \
     every claim goes through the limited queue's gate (one transaction: one statement locks its \
     limits row and counts its leases and its last second's deliveries, then the claim and a \
     delivery row written; old delivery rows deleted once a second)";

/// Run `work` with a fresh client (tables of its own) with `connections` pooled connections,
/// opened before `work` starts; then drop the client's tables.
pub async fn with_client<B, F, Fut, T>(
    ctx: &Ctx<B>,
    tag: &str,
    connections: u32,
    work: F,
) -> Result<T>
where
    B: Db,
    F: FnOnce(Client<B>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let client = ctx.client(tag, connections).await?;
    let result = async {
        warm_up(client.pool(), connections as usize).await?;
        work(client.clone()).await
    }
    .await;
    ctx.release(client).await?;
    result
}

/// Like [`with_client`], with a queue named `tag` in it.
pub async fn with_queue<B, F, Fut, T>(
    ctx: &Ctx<B>,
    tag: &str,
    connections: u32,
    work: F,
) -> Result<T>
where
    B: Db,
    F: FnOnce(Queue<B>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_queue_config(ctx, tag, connections, QueueConfig::default(), work).await
}

/// Like [`with_queue`], the queue created with `config`.
pub async fn with_queue_config<B, F, Fut, T>(
    ctx: &Ctx<B>,
    tag: &str,
    connections: u32,
    config: QueueConfig,
    work: F,
) -> Result<T>
where
    B: Db,
    F: FnOnce(Queue<B>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_client(ctx, tag, connections, |client| async move {
        let queue = client.create_queue(tag, config).await?;
        work(queue).await
    })
    .await
}

/// A spawned task that is aborted when dropped (when a scenario ends early: an error, Ctrl-C).
pub struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Send `n` messages in atomic batches (unmeasured set-up); returns their ids.
pub async fn fill<B: Db>(queue: &Queue<B>, n: u64, bar: &Bar) -> Result<Vec<MessageId>> {
    fill_with(queue, n, bar, plain).await
}

/// A message of a pre-filled backlog: the 100-byte body, nothing else.
pub fn plain(_: u64) -> Message {
    Message::new(body(0))
}

/// A pre-fill of plain messages, timed, into a queue `tag` created with `config` and dropped
/// undrained: the send rate a scenario's own pre-fill is compared with.
pub async fn timed_plain_fill<B: Db>(
    ctx: &Ctx<B>,
    bar: &Bar,
    tag: &str,
    config: QueueConfig,
) -> Result<Duration> {
    let n = ctx.plan.drain;
    let b = bar.clone();
    with_queue_config(ctx, tag, POOL, config, |queue| async move {
        let started = std::time::Instant::now();
        fill(&queue, n, &b).await?;
        Ok(started.elapsed())
    })
    .await
}

/// What a drain's backlog is made of.
#[derive(Clone, Copy)]
pub enum Backlog {
    /// The `i`-th message made by the function, sent with `send_batch`.
    Made(fn(u64) -> Message),
    /// Plain messages that each depend on one message, acked before the pre-fill (so each is
    /// delivered at once, but is tracked: its ack is recorded in the flow tables).
    Dependants,
    /// Members of batches of this many (`Client::create_batch`, sealed), with an `on_complete`
    /// callback to another queue.
    Batches(u64),
}

/// Pre-fill `queue` with `n` messages of `backlog` (unmeasured set-up); returns their ids.
pub async fn fill_backlog<B: Db>(
    queue: &Queue<B>,
    n: u64,
    bar: &Bar,
    backlog: Backlog,
) -> Result<Vec<MessageId>> {
    match backlog {
        Backlog::Made(make) => fill_with(queue, n, bar, make).await,
        Backlog::Dependants => {
            // The dependency: a workflow's one step, received and acked with a result.
            let root = Message::new(body(0));
            let root_id = root.id();
            let client = queue.client();
            client
                .create_batch(sqlmq::flow::Batch::new().step("root", queue.name(), root, &[]))
                .await?;
            let d = queue.receive(1, Duration::from_secs(60)).await?;
            anyhow::ensure!(d.len() == 1, "the dependency was not delivered");
            queue.ack_with_result(d[0].receipt(), "root").await?;
            bar.phase(
                "pre-fill (send_batch, each depending on one acked message)",
                n,
            );
            let mut ids = Vec::with_capacity(n as usize);
            let mut sent = 0;
            while sent < n {
                let k = (n - sent).min(FILL_BATCH);
                let batch: Vec<Message> = (sent..sent + k)
                    .map(|_| Message::new(body(0)).depends_on([root_id]))
                    .collect();
                ids.extend(batch.iter().map(Message::id));
                queue.send_batch(batch).await?;
                sent += k;
                bar.inc(k);
            }
            Ok(ids)
        }
        Backlog::Batches(size) => {
            let client = queue.client();
            let done = format!("{}-done", queue.name());
            client.create_queue(&done, QueueConfig::default()).await?;
            bar.phase(&format!("pre-fill (create_batch of {size})"), n);
            let mut ids = Vec::with_capacity(n as usize);
            let mut sent = 0;
            while sent < n {
                let k = (n - sent).min(size);
                let mut batch = sqlmq::flow::Batch::new().on_complete(&done, Message::new("done"));
                for _ in 0..k {
                    batch = batch.add(queue.name(), Message::new(body(0)));
                }
                ids.extend(client.create_batch(batch).await?.members);
                sent += k;
                bar.inc(k);
            }
            Ok(ids)
        }
    }
}

/// Like [`fill`], the `i`-th message made by `make(i)`.
pub async fn fill_with<B: Db>(
    queue: &Queue<B>,
    n: u64,
    bar: &Bar,
    make: fn(u64) -> Message,
) -> Result<Vec<MessageId>> {
    bar.phase("pre-fill (send_batch)", n);
    let mut ids = Vec::with_capacity(n as usize);
    let mut sent = 0;
    while sent < n {
        let k = (n - sent).min(FILL_BATCH);
        let batch: Vec<Message> = (sent..sent + k).map(make).collect();
        ids.extend(batch.iter().map(Message::id));
        queue.send_batch(batch).await?;
        sent += k;
        bar.inc(k);
    }
    Ok(ids)
}
