//! The benchmark's arguments (of `sqlmq-bench` and `sqlmq bench`), and the plan they imply: how many messages each scenario moves and
//! how long the idle scenarios wait.

use std::path::PathBuf;
use std::time::Duration;

/// Body size of every message, in every scenario and baseline (sqlmq, raw SQL and peers alike).
pub const BODY_BYTES: usize = 100;
/// Connections or producers of the "many" produce scenarios and baselines.
pub const MANY: usize = 16;
/// Consumers of the drain scenarios (sqlmq and peers).
pub const CONSUMERS: usize = 8;
/// Producers running beside the consumers in the mixed scenario.
pub const MIXED_PRODUCERS: usize = 4;
/// Messages one consumer claims per `receive` (and per fetch of a peer).
pub const RECEIVE_BATCH: usize = 100;
/// Rows per statement (and per transaction) of the raw multi-row INSERT baseline.
pub const MULTIROW_ROWS: usize = 1000;
/// Rows per transaction of the second multi-row baseline: the small `send_batch`'s size.
pub const SMALL_MULTIROW_ROWS: usize = BATCH_SIZES[0];
/// Batch sizes of the batch enqueue scenario.
pub const BATCH_SIZES: [usize; 2] = [100, 10_000];
/// Lease taken by every consumer: long enough never to expire during a run, so that a message
/// delivered twice is a real duplicate and not a legitimate redelivery.
pub const LEASE: Duration = Duration::from_secs(600);
/// Messages claimed per `receive` in the claim latency scenario.
pub const CLAIM_N: usize = 10;
/// Send rate of the busy end-to-end latency scenario: moderate, far below capacity.
pub const BUSY_RATE_PER_S: u64 = 200;
/// Independent queue/consumer pairs sampled at once in the idle latency scenario.
pub const IDLE_PAIRS: usize = 8;
/// Partitions of the spread topic scenarios (`topic.publish` on 8 partitions, `topic.group`).
pub const TOPIC_PARTITIONS: u32 = 8;
/// Records per `publish_batch` in the topic publish scenario.
pub const PUBLISH_BATCH: usize = 100;
/// Consumers give up when no message arrived for this long after the producers finished: the
/// messages still missing then are counted as lost.
pub const STALL: Duration = Duration::from_secs(10);

/// Arguments of `sqlmq-bench` (and of `sqlmq bench`).
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Scenarios to run: ids (queue.drain), groups (raw, queue, topic, peers) or peer names
    /// (postgres, rabbitmq, redis); default all. `--list` shows them. Baselines a scenario is
    /// compared with always run too. `soak` (never part of "all") runs alone: mixed traffic for
    /// `--minutes`, start compared with end.
    #[arg(value_name = "SCENARIO")]
    pub scenarios: Vec<String>,

    /// Reduced message counts: finishes in under 2 minutes on a 2-core machine
    #[arg(long)]
    pub quick: bool,

    /// Print one JSON document with every figure instead of the table
    #[arg(long)]
    pub json: bool,

    /// Also write the JSON document to FILE
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// List the scenarios and exit
    #[arg(long)]
    pub list: bool,

    /// PostgreSQL peer (skipped when unreachable)
    #[arg(
        long,
        env = "SQLMQ_BENCH_POSTGRES_URL",
        value_name = "URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test",
        hide_env_values = true
    )]
    pub postgres_url: String,

    /// Redis peer (skipped when unreachable)
    #[arg(
        long,
        env = "SQLMQ_BENCH_REDIS_URL",
        value_name = "URL",
        default_value = "redis://127.0.0.1:6379",
        hide_env_values = true
    )]
    pub redis_url: String,

    /// RabbitMQ peer (skipped when unreachable)
    #[arg(
        long,
        env = "SQLMQ_BENCH_AMQP_URL",
        value_name = "URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f",
        hide_env_values = true
    )]
    pub amqp_url: String,

    /// `soak` only: how long to run, in minutes (fractions allowed)
    #[arg(long, value_name = "N", default_value_t = 30.0, value_parser = parse_minutes)]
    pub minutes: f64,

    /// `soak` only: messages per second the producers offer
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub rate: u32,

    /// Multiply message counts and idle durations by F (tests run the bench tiny with 0.01)
    #[arg(long, hide = true, value_name = "F", default_value_t = 1.0, value_parser = parse_scale)]
    pub scale: f64,
}

/// clap value parser for `--minutes`.
fn parse_minutes(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(m) if (0.1..=7.0 * 24.0 * 60.0).contains(&m) => Ok(m),
        _ => Err(format!(
            "expected minutes between 0.1 and a week, got {text:?}"
        )),
    }
}

/// clap value parser for `--scale`.
fn parse_scale(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 100.0 => Ok(f),
        _ => Err(format!("expected a number in (0, 100], got {text:?}")),
    }
}

/// How much work each scenario does in this run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Plan {
    /// `--quick`.
    pub quick: bool,
    /// `--scale`.
    pub scale: f64,
    /// Raw autocommit INSERTs on one connection.
    pub raw_insert_one: u64,
    /// Raw autocommit INSERTs on [`MANY`] connections.
    pub raw_insert_many: u64,
    /// Rows of the raw multi-row INSERT baseline.
    pub raw_multirow_rows: u64,
    /// Messages of the raw INSERT-then-DELETE lifecycle baseline.
    pub raw_lifecycle: u64,
    /// Single sends by one producer.
    pub send_one: u64,
    /// Single sends by [`MANY`] producers.
    pub send_many: u64,
    /// Messages sent in batches of `BATCH_SIZES[0]`.
    pub batch_small: u64,
    /// Messages sent in batches of `BATCH_SIZES[1]`.
    pub batch_large: u64,
    /// Messages pre-filled and drained by [`CONSUMERS`] consumers.
    pub drain: u64,
    /// Messages of the mixed scenario.
    pub mixed: u64,
    /// Messages of the busy latency scenario.
    pub busy_latency: u64,
    /// Idle time before the first idle latency sample.
    pub idle_first: Duration,
    /// Idle time before each later sample (the poll delay reaches its cap after about 2.5 s).
    pub idle_gap: Duration,
    /// Samples per queue/consumer pair in the idle latency scenario.
    pub idle_rounds: u64,
    /// Small backlog of the claim latency scenario.
    pub claim_small: u64,
    /// Large backlog of the claim latency scenario.
    pub claim_large: u64,
    /// Timed claims at each backlog (and of each layout of `raw.head`).
    pub claim_samples: u64,
    /// Rows in flight at the head of `raw.head`'s queue.
    pub head_in_flight: u64,
    /// Rows scheduled at the head of `raw.head`'s queue, behind those in flight.
    pub head_scheduled: u64,
    /// Time an idle consumer polls before its queries are counted (its poll delay grows).
    pub idle_ramp: Duration,
    /// Time over which an idle consumer's queries are counted.
    pub idle_window: Duration,
    /// Messages of each peer's produce and drain (the same as sqlmq's drain; a peer's own raw
    /// baselines use the counts of the MySQL ones).
    pub peer_messages: u64,
    /// Messages pre-filled and handled by the worker runtime.
    pub worker_messages: u64,
    /// Messages of the worker's busy latency scenario.
    pub worker_busy: u64,
    /// How long the worker idles before its first after-idle sample (a minute in a full run).
    pub worker_idle_first: Duration,
    /// After-idle latency samples of the worker (one at a time).
    pub worker_idle_samples: u64,
    /// Records published singly by one producer (per partition count).
    pub topic_single_one: u64,
    /// Records published singly by [`MANY`] producers (per partition count).
    pub topic_single_many: u64,
    /// Records published in batches of [`PUBLISH_BATCH`] by one producer (per partition count);
    /// also the records the sequencer alone is timed on.
    pub topic_batch_one: u64,
    /// Records published in batches of [`PUBLISH_BATCH`] by [`MANY`] producers (per partition
    /// count).
    pub topic_batch_many: u64,
    /// Records pre-published and drained by a group of [`CONSUMERS`] members.
    pub topic_group: u64,
    /// Poll ceilings of the trade-off table.
    pub tradeoff_ceilings: Vec<Duration>,
    /// Idle latency samples per ceiling of the trade-off table.
    pub tradeoff_samples: u64,
    /// Window over which an idle worker's statements are counted, per ceiling.
    pub tradeoff_window: Duration,
    /// Numbers of HTTP long polls waiting at once in `serve.wait`, smallest first.
    pub wait_levels: Vec<u64>,
    /// Window over which the server's statements are counted at each level of `serve.wait`.
    pub wait_window: Duration,
    /// Wakeup samples of `serve.wait` (and messages of its answered-once check).
    pub wait_samples: u64,
}

impl Plan {
    /// The plan for `--quick` (or the full run), scaled by `scale`.
    pub fn new(quick: bool, scale: f64) -> Plan {
        let n = |full: u64, quick_n: u64, min: u64| {
            let base = if quick { quick_n } else { full };
            ((base as f64 * scale).round() as u64).max(min)
        };
        let t = |secs: f64, min_ms: u64| {
            Duration::from_secs_f64(secs * scale).max(Duration::from_millis(min_ms))
        };
        let drain = n(200_000, 30_000, 200);
        Plan {
            quick,
            scale,
            raw_insert_one: n(30_000, 5_000, 50),
            raw_insert_many: n(100_000, 20_000, 160),
            raw_multirow_rows: n(1_000_000, 200_000, MULTIROW_ROWS as u64),
            raw_lifecycle: n(100_000, 20_000, 160),
            send_one: n(20_000, 3_000, 50),
            send_many: n(100_000, 20_000, 160),
            batch_small: n(200_000, 50_000, BATCH_SIZES[0] as u64),
            batch_large: n(1_000_000, 200_000, BATCH_SIZES[1] as u64),
            drain,
            mixed: n(50_000, 8_000, 160),
            busy_latency: n(4_000, 600, 20),
            idle_first: t(10.0, 500),
            idle_gap: t(4.0, 300),
            idle_rounds: if quick { 2 } else { 8 },
            claim_small: n(10_000, 10_000, 100),
            claim_large: n(1_000_000, 100_000, 1_000),
            claim_samples: n(1_000, 200, 10),
            head_in_flight: n(10_000, 10_000, 10),
            head_scheduled: n(100_000, 100_000, 100),
            idle_ramp: t(3.0, 300),
            idle_window: t(if quick { 5.0 } else { 30.0 }, 500),
            peer_messages: drain,
            worker_messages: drain,
            worker_busy: n(4_000, 600, 20),
            worker_idle_first: t(if quick { 5.0 } else { 60.0 }, 300),
            worker_idle_samples: if quick { 6 } else { 24 },
            topic_single_one: n(10_000, 1_000, 50),
            topic_single_many: n(50_000, 5_000, 160),
            topic_batch_one: n(100_000, 10_000, PUBLISH_BATCH as u64),
            topic_batch_many: n(200_000, 20_000, (MANY * PUBLISH_BATCH) as u64),
            topic_group: drain,
            tradeoff_ceilings: if quick {
                vec![Duration::from_millis(100), Duration::from_millis(250)]
            } else {
                [50, 100, 250, 1000].map(Duration::from_millis).to_vec()
            },
            tradeoff_samples: if quick { 4 } else { 16 },
            // At least a second, even scaled down: several polls at the largest quick ceiling
            // (250 ms, jittered up to 300 ms), so that a tiny run counts some.
            tradeoff_window: t(if quick { 3.0 } else { 15.0 }, 1000),
            wait_levels: {
                let mut levels = vec![10, n(1_000, 1_000, 10), n(10_000, 10_000, 20)];
                levels.dedup();
                levels
            },
            wait_window: t(if quick { 3.0 } else { 10.0 }, 1000),
            wait_samples: n(50, 20, 5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_is_smaller_and_scale_has_floors() {
        let (full, quick) = (Plan::new(false, 1.0), Plan::new(true, 1.0));
        assert!(quick.drain < full.drain && quick.claim_large < full.claim_large);
        assert_eq!(full.claim_large, 1_000_000);
        assert_eq!(quick.claim_large, 100_000);
        let tiny = Plan::new(true, 0.0001);
        assert_eq!(tiny.batch_large, BATCH_SIZES[1] as u64);
        assert_eq!(tiny.raw_multirow_rows, MULTIROW_ROWS as u64);
        assert!(tiny.idle_first >= Duration::from_millis(500));
        assert!(parse_scale("0").is_err() && parse_scale("0.01").is_ok());
    }
}
