//! `sqlmq consume`: a worker for any language. Runs a shell command per message, the body on
//! its stdin; exit 0 acks, anything else nacks with the end of its stderr. `sqlmq subscribe
//! --exec` runs the same worker ([`run_exec`]) on a topic's consumer group.
//!
//! It runs on the library's worker runtime (`sqlmq::Worker`), which supplies the claim loop
//! (batch claims sized to the free slots: nothing is claimed that is not started at once),
//! automatic lease extension while commands run, batched acks, the process registry and
//! heartbeats (so that peers release this process's claims at once if it is killed), and the
//! graceful shutdown protocol.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | arguments, building the worker (for a queue or a group), the summary |
//! | `command.rs` | the handler: one `sh -c CMD` per message |
//! | `shutdown.rs` | SIGTERM/SIGINT to the worker's stop and kill tokens |
//!
//! Shutdown: the first SIGTERM/SIGINT stops claiming; running commands finish within `--grace`
//! (their leases still extended); at its end, or at a second signal, the commands still running
//! are killed with their process groups and their messages released for an immediate retry.
//! Acks are flushed and the process deregisters before it exits 0. A `kill -9` skips all this:
//! a peer worker notices the missed heartbeats and releases the claims, or they come back when
//! their leases end (at-least-once, the at-least-once guarantee of the guide (docs/guide/src/guarantees.md)).

mod command;
mod shutdown;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sqlmq::source::SourceName;
use sqlmq::worker::WorkerReport;
use sqlmq::{Backend, Worker};

use self::command::CommandHandler;
use super::{UsageError, parse_duration};
use crate::output::short_duration;
use crate::settings::{Patience, Settings};

/// Default pool of an `--exec` worker (`--max-connections`), whatever its concurrency.
pub const EXEC_WORKER_CONNECTIONS: u32 = 3;

/// Shortest lease `consume` accepts: it is extended every third of it, and a shorter period
/// would mostly measure scheduling noise.
const MIN_LEASE: Duration = Duration::from_millis(300);

/// Arguments of `sqlmq consume`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue names: one process serves them all (SQLMQ_QUEUE tells the command which)
    #[arg(value_name = "QUEUE", required = true, num_args = 1..)]
    queues: Vec<String>,
    /// Shell command run once per message (`sh -c CMD`): the body on stdin; SQLMQ_QUEUE,
    /// SQLMQ_MESSAGE_ID, SQLMQ_RECEIPT, SQLMQ_ATTEMPT, SQLMQ_ORDERING_KEY and
    /// `SQLMQ_HEADER_<KEY>` in the environment. Exit 0 acks; anything else nacks with the end of
    /// its stderr
    #[arg(long, value_name = "CMD")]
    exec: String,
    #[command(flatten)]
    options: ExecOptions,
    /// Exit after this many messages were handed to the command (and settled); waits for
    /// them as long as it takes
    #[arg(long, value_name = "N")]
    max_messages: Option<u64>,
    /// Exit when the queues are empty: nothing ready, no command running, no ack waiting to
    /// commit, and nothing those acks released (a key's next message, a dependant, a batch
    /// callback). Delayed messages and other processes' in-flight ones do not keep it
    #[arg(long)]
    exit_when_empty: bool,
}

/// How a `--exec` worker runs; shared by `consume` and `subscribe --exec`.
#[derive(clap::Args, Debug)]
pub struct ExecOptions {
    /// Commands running at once
    #[arg(long, value_name = "N", default_value_t = 4)]
    concurrency: usize,
    /// Lease of each message; extended every third of it while its command runs
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// Most messages per claim [default: the concurrency]; a claim never asks for more than
    /// the free slots
    #[arg(long, value_name = "N")]
    batch: Option<usize>,
    /// Longest a command may run; then it is killed and its message retried
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = parse_duration)]
    timeout: Duration,
    /// On SIGTERM/SIGINT, how long running commands may finish before they are killed (and
    /// their messages released for an immediate retry); also how long the command of a
    /// cancelled message has after its SIGTERM before SIGKILL
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
    grace: Duration,
    /// Serve this process's metrics (claims, acks, retries, dead letters, handler times per
    /// queue) for Prometheus at http://ADDR/metrics; no token: bind where only the scraper
    /// reaches
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
}

impl ExecOptions {
    /// Refuse out-of-range options (usage errors), before anything is written.
    pub fn validate(&self) -> Result<()> {
        let batch = self.batch.unwrap_or(self.concurrency);
        if self.concurrency == 0 || self.concurrency > 1000 {
            return Err(UsageError("--concurrency must be 1 to 1000".into()).into());
        }
        if batch == 0 || batch > sqlmq::Queue::MAX_RECEIVE {
            return Err(UsageError(format!(
                "--batch must be 1 to {}",
                sqlmq::Queue::MAX_RECEIVE
            ))
            .into());
        }
        if self.lease < MIN_LEASE || self.lease > sqlmq::Queue::MAX_LEASE {
            return Err(UsageError(format!(
                "--lease must be between {} and 24h",
                short_duration(MIN_LEASE)
            ))
            .into());
        }
        Ok(())
    }
}

/// When a `--exec` worker stops on its own (else at SIGTERM/SIGINT).
#[derive(Clone, Copy, Debug, Default)]
pub struct StopWhen {
    /// After this many messages were handed out (and settled).
    pub max_messages: Option<u64>,
    /// When the sources are drained (`WorkerBuilder::stop_when_drained`).
    pub drained: bool,
}

/// Something a `--exec` worker consumes: a queue or a cluster group, or a broadcast group
/// as one of its members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecSource {
    /// A queue or a cluster group.
    Source(SourceName),
    /// A broadcast group, read as `member`.
    Member {
        topic: String,
        group: String,
        member: String,
    },
}

impl fmt::Display for ExecSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecSource::Source(name) => write!(f, "{name}"),
            ExecSource::Member {
                topic,
                group,
                member,
            } => write!(f, "{topic}/{group} (member {member})"),
        }
    }
}

/// How broadcast members of a `--exec` worker checkpoint (see
/// `WorkerBuilder::checkpoint_every`).
#[derive(Clone, Copy, Debug)]
pub struct Checkpoints {
    pub every: u64,
    pub interval: Duration,
}

/// Run `sqlmq consume`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let stop = StopWhen {
        max_messages: args.max_messages,
        drained: args.exit_when_empty,
    };
    let mut sources: Vec<ExecSource> = Vec::new();
    for queue in &args.queues {
        let source = ExecSource::Source(SourceName::queue(queue));
        if sources.contains(&source) {
            return Err(UsageError(format!("queue {queue} is named twice")).into());
        }
        sources.push(source);
    }
    run_exec::<B>(
        settings,
        "consume",
        &sources,
        &args.exec,
        &args.options,
        None,
        stop,
    )
    .await
}

/// Run `sh -c EXEC` for every message of `sources` (queues, cluster groups and broadcast
/// members; the groups must exist) on one worker runtime until a signal or `stop`, then print
/// a summary line (`sqlmq <command> <sources>: ...`) to stderr.
pub async fn run_exec<B: Backend>(
    settings: &Settings,
    command: &str,
    sources: &[ExecSource],
    exec: &str,
    options: &ExecOptions,
    checkpoints: Option<Checkpoints>,
    stop: StopWhen,
) -> Result<()> {
    options.validate()?;
    let batch = options.batch.unwrap_or(options.concurrency);
    // A command never touches the database itself: the claims, acks, lease extensions,
    // probes and heartbeats of any number of commands share a few connections, each held for
    // one short statement or transaction (more would only let a fleet of workers crowd the
    // server's max_connections).
    let client = settings
        .connect_with::<B>(
            settings.builder_with_pool(EXEC_WORKER_CONNECTIONS),
            Patience::Unbounded,
        )
        .await?;
    if let Some(addr) = options.metrics_listen {
        let (bound, _task) = sqlmq_serve::serve_process_metrics(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} for --metrics-listen"))?;
        eprintln!("sqlmq {command}: metrics at http://{bound}/metrics");
    }
    let signals = shutdown::listen()?;
    let handler = CommandHandler {
        exec: Arc::from(exec),
        verbose: settings.verbose > 0,
        grace: options.grace,
    };
    let mut worker = Worker::builder(&client);
    for source in sources {
        worker = match source {
            ExecSource::Source(name) => worker.source_raw(name.clone(), handler.clone()),
            ExecSource::Member {
                topic,
                group,
                member,
            } => worker.topic_broadcast_raw(topic, group, member, handler.clone()),
        };
    }
    if let Some(c) = checkpoints {
        worker = worker.checkpoint_every(c.every, c.interval);
    }
    let mut worker = worker
        .concurrency(options.concurrency)
        .max_batch(batch)
        .lease(options.lease)
        .timeout(options.timeout)
        // A message's deadline or run timeout: SIGTERM to the command's group, SIGKILL after
        // the grace period (`command.rs`), as for a cancel.
        .time_up_grace(options.grace)
        .shutdown_grace(options.grace)
        .kill_on(signals.kill.clone());
    if let Some(n) = stop.max_messages {
        worker = worker.max_messages(n);
    }
    if stop.drained {
        worker = worker.stop_when_drained();
    }
    let started = Instant::now();
    let names = sources
        .iter()
        .map(ExecSource::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let report = worker
        .run(signals.stop.clone())
        .await
        .with_context(|| format!("cannot consume {names}"))?;
    eprintln!(
        "{}",
        summary(
            &format!("sqlmq {command} {names}"),
            &report,
            started.elapsed()
        )
    );
    Ok(())
}

/// The final line printed to stderr.
fn summary(what: &str, r: &WorkerReport, took: Duration) -> String {
    let nacked = r.retried + r.snoozed + r.dead_lettered;
    let processed = r.acked + nacked + r.released + r.lease_lost + r.unsettled + r.cancelled;
    let mut text = format!(
        "{what}: {processed} processed in {}: {} acked, {nacked} nacked ({} \
         dead-lettered), {} lost leases",
        short_duration(took),
        r.acked,
        r.dead_lettered,
        r.lease_lost
    );
    if r.released > 0 {
        text.push_str(&format!(", {} released at shutdown", r.released));
    }
    if r.unsettled > 0 {
        text.push_str(&format!(", {} not settled (errors)", r.unsettled));
    }
    if r.cancelled > 0 {
        text.push_str(&format!(", {} cancelled while running", r.cancelled));
    }
    text
}
