//! `sqlmq`: the operator's command line for sqlmq queues and topics.
//!
//! This binary only parses arguments, calls the `sqlmq` library and prints results; it holds no
//! SQL. Human-readable output by default, `--json` where a script would parse it. Errors go to
//! stderr as `error: <message>` with their causes; the exit code is 1 for runtime errors and 2
//! for usage errors (clap's own, and refusals such as a purge without `--yes`).
//!
//! ## Layout
//!
//! | module | what |
//! |---|---|
//! | `settings` | global options, TOML config file, connecting |
//! | `output` | tables, durations, message bodies for humans and for JSON |
//! | `poll` | adaptive, jittered polling delay shared by `consume` and `demo` |
//! | `cmd/*` | one subcommand per file (`consume/`, `demo/` and `topic/` are directories) |
//! | `bench/` | `sqlmq bench`: scenarios, baselines, peers, report |

mod bench;
mod cmd;
mod output;
mod poll;
mod settings;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::cmd::UsageError;
use crate::settings::{GlobalArgs, Settings};

/// Durable, transactional message queues and topics stored in MySQL/MariaDB.
#[derive(Parser, Debug)]
#[command(name = "sqlmq", version, propagate_version = true)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Every subcommand; each lives in `src/cmd/<name>.rs`.
#[derive(Subcommand, Debug)]
enum Command {
    /// Create or upgrade the database schema.
    Migrate(cmd::migrate::Args),
    /// Create or delete a queue.
    #[command(subcommand)]
    Queue(cmd::queue::QueueCommand),
    /// List queues with their message counts.
    Queues(cmd::queues::Args),
    /// Send a message (or, with --batch, one message per stdin line, atomically).
    Send(cmd::send::Args),
    /// Claim messages and print them (with --ack, ack them after printing).
    Recv(cmd::recv::Args),
    /// Ack claimed messages by receipt.
    Ack(cmd::ack::Args),
    /// Nack a claimed message: retry it later or dead-letter it.
    Nack(cmd::nack::Args),
    /// Extend the lease of a claimed message.
    Extend(cmd::extend::Args),
    /// Inspect, redrive or purge the dead letters of a queue (or with --group, of a group).
    #[command(subcommand)]
    Dlq(cmd::dlq::DlqCommand),
    /// Stop handing out a queue's messages until `resume`.
    Pause(cmd::pause::Args),
    /// Hand out a paused queue's messages again.
    Resume(cmd::resume::Args),
    /// Remove one waiting message.
    Cancel(cmd::cancel::Args),
    /// Delete every message of a queue (dead letters excepted).
    Purge(cmd::purge::Args),
    /// Run a shell command for every message of a queue: a worker for any language.
    Consume(cmd::consume::Args),
    /// Create, list or describe topics (partitioned streams with consumer groups).
    #[command(subcommand)]
    Topic(cmd::topic::TopicCommand),
    /// Publish a record (or, with --batch, one record per stdin line, atomically).
    Publish(cmd::publish::Args),
    /// Consume a topic in a group (created if missing): print records, or --exec a command.
    Subscribe(cmd::subscribe::Args),
    /// List consumer groups with their lag, retries and dead letters.
    Groups(cmd::groups::Args),
    /// Show consumer groups' lag per partition.
    Lag(cmd::lag::Args),
    /// Move a consumer group's position (earliest, latest, an offset or a time).
    Reset(cmd::reset::Args),
    /// Deliver a range of a topic's records to a consumer group again.
    Replay(cmd::replay::Args),
    /// List a consumer group's records waiting to retry, or make them due now (--now).
    Retries(cmd::retries::Args),
    /// Read a topic's records by partition and offset, by key, or by time.
    Query(cmd::query::Args),
    /// Show one record's state, attempts and errors in every group of its topic.
    Trace(cmd::trace::Args),
    /// Watch producers, consumers, a retry and a dead letter at work on a `demo` queue.
    Demo(cmd::demo::Args),
    /// Serve the HTTP API, the web dashboard and Prometheus metrics.
    Serve(cmd::serve::Args),
    /// Measure sqlmq against the raw capacity of the same server, and against peers.
    Bench(bench::BenchArgs),
}

/// Parse, run on a multi-threaded runtime, map the outcome to an exit code.
fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.global.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", report(&err));
            if err.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Dispatch to the subcommand.
async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::resolve(&cli.global)?;
    use Command::*;
    match cli.command {
        Migrate(args) => cmd::migrate::run(&settings, args).await,
        Queue(command) => cmd::queue::run(&settings, command).await,
        Queues(args) => cmd::queues::run(&settings, args).await,
        Send(args) => cmd::send::run(&settings, args).await,
        Recv(args) => cmd::recv::run(&settings, args).await,
        Ack(args) => cmd::ack::run(&settings, args).await,
        Nack(args) => cmd::nack::run(&settings, args).await,
        Extend(args) => cmd::extend::run(&settings, args).await,
        Dlq(command) => cmd::dlq::run(&settings, command).await,
        Pause(args) => cmd::pause::run(&settings, args).await,
        Resume(args) => cmd::resume::run(&settings, args).await,
        Cancel(args) => cmd::cancel::run(&settings, args).await,
        Purge(args) => cmd::purge::run(&settings, args).await,
        Consume(args) => cmd::consume::run(&settings, args).await,
        Topic(command) => cmd::topic::run(&settings, command).await,
        Publish(args) => cmd::publish::run(&settings, args).await,
        Subscribe(args) => cmd::subscribe::run(&settings, args).await,
        Groups(args) => cmd::groups::run(&settings, args).await,
        Lag(args) => cmd::lag::run(&settings, args).await,
        Reset(args) => cmd::reset::run(&settings, args).await,
        Replay(args) => cmd::replay::run(&settings, args).await,
        Retries(args) => cmd::retries::run(&settings, args).await,
        Query(args) => cmd::query::run(&settings, args).await,
        Trace(args) => cmd::trace::run(&settings, args).await,
        Demo(args) => cmd::demo::run(&settings, args).await,
        Serve(args) => cmd::serve::run(&settings, args).await,
        Bench(args) => bench::run(&settings, args).await,
    }
}

/// Log to stderr. The default level is `warn` so that the library's warnings (non-durable
/// server settings, lost leases) are always seen; `-v` adds `info`, `-vv` `debug`, and
/// `RUST_LOG` overrides both.
fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// `error: <message>` followed by one `caused by:` line per cause. A cause whose text the line
/// above already contains is skipped: the library's errors print their source inline.
fn report(err: &anyhow::Error) -> String {
    let mut text = format!("error: {err}");
    let mut previous = err.to_string();
    for cause in err.chain().skip(1) {
        let line = cause.to_string();
        if !previous.contains(&line) {
            text.push_str("\n  caused by: ");
            text.push_str(&line);
        }
        previous = line;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn report_skips_causes_already_printed() {
        let err = anyhow::anyhow!("inner").context("outer");
        assert_eq!(report(&err), "error: outer\n  caused by: inner");
        let err = anyhow::anyhow!("inner").context("outer: inner");
        assert_eq!(report(&err), "error: outer: inner");
    }
}
