//! `sqlmq`: the operator's command line for sqlmq queues and topics.
//!
//! This binary only parses arguments, calls the `sqlmq` library and prints results; it holds no
//! SQL. Human-readable output by default, `--json` where a script would parse it. Errors go to
//! stderr as `error: <message>` with their causes; the exit code is 1 for runtime errors and 2
//! for usage errors (clap's own, and refusals such as a purge without `--yes`): see
//! `sqlmq_cli_common::run_main`.
//!
//! ## Layout
//!
//! | module | what |
//! |---|---|
//! | `settings` | global options, TOML config file, connecting (from `sqlmq-cli-common`) |
//! | `output` | tables, durations, message bodies for humans and for JSON |
//! | `poll` | adaptive, jittered polling delay (from `sqlmq-cli-common`) |
//! | `cmd/*` | one subcommand per file (`cmd/consume/`, `cmd/demo/` and `cmd/topic/` are directories) |
//!
//! `sqlmq bench` runs the `sqlmq-bench` crate when built with the `bench` feature
//! (`cmd/bench.rs`).

mod cmd;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
// Shared with the `sqlmq-bench` binary; imported at the root so that every command reaches them
// as `crate::settings` and `crate::poll`.
use sqlmq_cli_common::{poll, settings};

use sqlmq::Backend;

use crate::settings::{BackendKind, GlobalArgs, Settings};

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
    /// Print the GRANT statements of the runtime user (no DDL) or the migration user.
    Grants(cmd::grants::Args),
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
    /// Cancel one message: remove it if it waits, stop its handler if it runs.
    Cancel(cmd::cancel::Args),
    /// List a queue's messages in one state (ready, scheduled, blocked, in_flight) or of a
    /// key, without taking them.
    Peek(cmd::peek::Args),
    /// Show one message of a queue in whatever state it is.
    Show(cmd::show::Args),
    /// Delete every message of a queue (dead letters excepted).
    Purge(cmd::purge::Args),
    /// Run a shell command for every message of a queue: a worker for any language.
    Consume(cmd::consume::Args),
    /// Create, list, describe, pause, resume or delete recurring schedules (cron or interval).
    #[command(subcommand)]
    Schedule(cmd::schedule::ScheduleCommand),
    /// Create batches (with callbacks sent once when they finish) and workflows; add to, seal
    /// or show them.
    #[command(subcommand)]
    Batch(cmd::batch::BatchCommand),
    /// Emit events for durable runs waiting on them, or list the events runs wait for.
    #[command(subcommand)]
    Event(cmd::event::EventCommand),
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
    /// Measure sqlmq against the raw capacity of the same server, and against peers (built in
    /// with the `bench` feature; else `cargo run --release -p sqlmq-bench`).
    Bench(cmd::bench::Args),
}

/// Parse, then run on a multi-threaded runtime and map the outcome to an exit code.
fn main() -> ExitCode {
    let cli = Cli::parse();
    sqlmq_cli_common::run_main(cli.global.verbose, run(cli))
}

/// Pick the backend the database URL names, then run the subcommand on it.
async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::resolve(&cli.global)?;
    match settings.backend()? {
        BackendKind::MySql => dispatch::<sqlmq::MySql>(&settings, cli.command).await,
        BackendKind::Sqlite => dispatch::<sqlmq::Sqlite>(&settings, cli.command).await,
    }
}

/// Run the subcommand on backend `B`.
async fn dispatch<B: Backend>(settings: &Settings, command: Command) -> anyhow::Result<()> {
    use Command::*;
    match command {
        Migrate(args) => cmd::migrate::run::<B>(settings, args).await,
        Grants(args) => cmd::grants::run::<B>(settings, args).await,
        Queue(command) => cmd::queue::run::<B>(settings, command).await,
        Queues(args) => cmd::queues::run::<B>(settings, args).await,
        Send(args) => cmd::send::run::<B>(settings, args).await,
        Recv(args) => cmd::recv::run::<B>(settings, args).await,
        Ack(args) => cmd::ack::run::<B>(settings, args).await,
        Nack(args) => cmd::nack::run::<B>(settings, args).await,
        Extend(args) => cmd::extend::run::<B>(settings, args).await,
        Dlq(command) => cmd::dlq::run::<B>(settings, command).await,
        Pause(args) => cmd::pause::run::<B>(settings, args).await,
        Resume(args) => cmd::resume::run::<B>(settings, args).await,
        Cancel(args) => cmd::cancel::run::<B>(settings, args).await,
        Peek(args) => cmd::peek::run::<B>(settings, args).await,
        Show(args) => cmd::show::run::<B>(settings, args).await,
        Purge(args) => cmd::purge::run::<B>(settings, args).await,
        Consume(args) => cmd::consume::run::<B>(settings, args).await,
        Topic(command) => cmd::topic::run::<B>(settings, command).await,
        Schedule(command) => cmd::schedule::run::<B>(settings, command).await,
        Event(command) => cmd::event::run::<B>(settings, command).await,
        Batch(command) => cmd::batch::run::<B>(settings, command).await,
        Publish(args) => cmd::publish::run::<B>(settings, args).await,
        Subscribe(args) => cmd::subscribe::run::<B>(settings, args).await,
        Groups(args) => cmd::groups::run::<B>(settings, args).await,
        Lag(args) => cmd::lag::run::<B>(settings, args).await,
        Reset(args) => cmd::reset::run::<B>(settings, args).await,
        Replay(args) => cmd::replay::run::<B>(settings, args).await,
        Retries(args) => cmd::retries::run::<B>(settings, args).await,
        Query(args) => cmd::query::run::<B>(settings, args).await,
        Trace(args) => cmd::trace::run::<B>(settings, args).await,
        Demo(args) => cmd::demo::run::<B>(settings, args).await,
        Serve(args) => cmd::serve::run::<B>(settings, args).await,
        Bench(args) => cmd::bench::run::<B>(settings, args).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
