//! `sqlmq demo`: the README's first command, in two acts on the configured database.
//!
//! 1. A `demo` queue: two producers send messages in atomic batches while four consumers
//!    process them; one "flaky" message fails once and succeeds on its retry, one "poison"
//!    message fails every time and ends in the dead letters with its error history.
//! 2. A `demo_events` topic with a consumer group (`stream.rs`).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | set-up, orchestration, the queue's summary |
//! | `workers.rs` | the queue's producers, consumers, shared counters |
//! | `progress.rs` | the live progress line |
//! | `stream.rs` | the topic and its consumer group |

mod progress;
mod stream;
mod workers;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sqlmq::queue::Backoff;
use sqlmq::{Message, Queue, QueueConfig};
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::progress::{Progress, rate};
use self::workers::{Counters, Specials};
use crate::output::{short_duration, timestamp};
use crate::settings::Settings;
use sqlmq::Backend;

/// The queue the demo (re)creates.
pub const QUEUE: &str = "demo";
/// Concurrent producers.
const PRODUCERS: usize = 2;
/// Concurrent consumers.
const CONSUMERS: usize = 4;
/// Attempts before a message is dead-lettered: the poison message dies after this many.
const MAX_ATTEMPTS: u32 = 3;
/// Wait before each retry: short, so that the demo shows retries without waiting.
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// The demo gives up (and fails) if not everything is settled by then.
const DEADLINE: Duration = Duration::from_secs(25);

/// Arguments of `sqlmq demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Ordinary messages to send (besides the flaky and the poison one)
    #[arg(long, value_name = "N", default_value_t = 2000)]
    messages: usize,
    /// Records to publish to the demo topic (1 or more)
    #[arg(long, value_name = "N", default_value_t = 400, value_parser = clap::value_parser!(u32).range(1..))]
    records: u32,
}

/// Run `sqlmq demo`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    client.migrate().await?;
    let config = QueueConfig::default()
        .max_attempts(MAX_ATTEMPTS)
        .backoff(Backoff::Ladder(vec![RETRY_DELAY]));
    let queue = client.create_queue(QUEUE, config).await?;
    let leftovers = queue.purge().await? + queue.purge_dead_letters().await?;
    if leftovers > 0 {
        eprintln!("cleared {leftovers} message(s) left in queue {QUEUE} by an earlier run");
    }

    let poison = Message::new("order #poison: {\"items\": [").header("kind", "poison");
    let flaky = Message::new("order #flaky: {\"items\": [1]}").header("kind", "flaky");
    let specials = Specials {
        poison: poison.id(),
        flaky: flaky.id(),
    };
    let batches = producer_messages(args.messages, vec![poison, flaky]);
    let total = (args.messages + 2) as u64;

    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let progress = Progress::start(total, Arc::clone(&counters));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks: JoinSet<sqlmq::Result<()>> = JoinSet::new();
    for _ in 0..CONSUMERS {
        let (q, c, stop) = (queue.clone(), Arc::clone(&counters), stop_rx.clone());
        tasks.spawn(async move { workers::consume(q, specials, &c, stop).await });
    }
    for messages in batches {
        let (q, c) = (queue.clone(), Arc::clone(&counters));
        tasks.spawn(async move { workers::produce(q, messages, &c).await });
    }

    let finished = wait_until_settled(&mut tasks, &counters, total, started).await;
    let _ = stop_tx.send(true);
    while let Some(done) = tasks.join_next().await {
        done.context("a demo task panicked")??;
    }
    let elapsed = started.elapsed();
    progress.finish(&counters, elapsed);
    finished?;
    summary(&queue, &counters, specials, elapsed).await?;
    stream::run(&client, args.records as usize).await
}

/// The producers' messages: ordinary ones split evenly, the special ones first in the first
/// producer's list.
fn producer_messages(count: usize, specials: Vec<Message>) -> Vec<Vec<Message>> {
    let mut lists: Vec<Vec<Message>> = vec![Vec::new(); PRODUCERS];
    lists[0].extend(specials);
    for i in 0..count {
        let p = i % PRODUCERS;
        lists[p].push(Message::new(format!("order #{i}: {{\"items\": [{i}]}}")));
    }
    lists
}

/// Poll the counters until every message is acked or dead. A task that ends early ends the
/// wait: producers end normally, a consumer only with an error.
async fn wait_until_settled(
    tasks: &mut JoinSet<sqlmq::Result<()>>,
    counters: &Counters,
    total: u64,
    started: Instant,
) -> Result<()> {
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while counters.settled() < total {
        if started.elapsed() > DEADLINE {
            bail!(
                "the demo did not settle its {total} messages within {} ({} settled)",
                short_duration(DEADLINE),
                counters.settled()
            );
        }
        while let Some(done) = tasks.try_join_next() {
            done.context("a demo task panicked")??;
        }
        tick.tick().await;
    }
    Ok(())
}

/// Print what happened, and check that the queue holds nothing but the dead letter.
async fn summary<B: Backend>(
    queue: &Queue<B>,
    counters: &Counters,
    specials: Specials,
    elapsed: Duration,
) -> Result<()> {
    let processed = counters.processed.load(Ordering::Relaxed);
    println!(
        "demo finished in {}: {PRODUCERS} producers sent {} messages, {CONSUMERS} consumers \
         processed {processed} ({:.0} msg/s)",
        short_duration(elapsed),
        counters.sent.load(Ordering::Relaxed),
        rate(processed, elapsed)
    );
    println!(
        "retried: the flaky message {} failed its first attempt and was processed on attempt {}",
        specials.flaky,
        counters.flaky_attempt.load(Ordering::Relaxed)
    );
    let dead = queue.dead_letters(10).await?;
    let poison = dead
        .iter()
        .find(|d| d.id == specials.poison)
        .context("the poison message is not among the dead letters")?;
    println!(
        "dead-lettered: the poison message {} after {} attempts; its error history:",
        poison.id, poison.attempts
    );
    for e in &poison.errors {
        println!("  attempt {} at {}: {}", e.attempt, e.at, e.error);
    }
    let stats = queue.stats().await?;
    println!(
        "queue {QUEUE} now: {} ready, {} scheduled, {} in flight, {} dead (died at {})",
        stats.ready,
        stats.scheduled,
        stats.in_flight,
        stats.dead,
        timestamp(poison.died_at)
    );
    println!("next: sqlmq queues · sqlmq dlq list {QUEUE} · sqlmq dlq redrive {QUEUE} --all");
    if stats.pending() != 0 || stats.dead != 1 {
        bail!("the demo queue should hold exactly the one dead letter, found {stats:?}");
    }
    Ok(())
}
