//! The sqlmq benchmark: every performance figure sqlmq claims, measured on the user's own server
//! beside the raw capacity of that server (measured in the same run) and beside the systems a
//! user would pick instead, when they run on the same machine.
//!
//! It runs as the `sqlmq-bench` binary of this crate (`cargo run --release -p sqlmq-bench --
//! --quick`), or as `sqlmq bench` when the `sqlmq` binary is built with its `bench` feature. It
//! lives apart from the `sqlmq` binary so that the operator's tool does not link the peers'
//! clients (AMQP, Redis, PostgreSQL).
//!
//! It runs on MySQL/MariaDB and on SQLite, whichever the database URL names: every scenario is
//! generic over the backend, and what differs (the scratch area, the raw statements, the facts
//! printed with the figures, the counters some scenarios read) is in `backend/`. On SQLite the
//! baselines are SQLite's own, measured in the same run; figures that mean nothing there (a
//! server's statement counters, the topic sequencer) are reported as not available, never as a
//! number.
//!
//! A run creates a scratch area — on MySQL a scratch database (or, without `CREATE DATABASE`, a
//! scratch table prefix), on SQLite a scratch file beside the configured one — runs the
//! selected scenarios one after another in this process, each with its own progress bar and on
//! tables of its own, and removes the scratch area at the end — also after an error, Ctrl-C,
//! SIGTERM or SIGHUP. It never touches tables it did not create.
//!
//! | file | what |
//! |---|---|
//! | `main.rs` | the `sqlmq-bench` binary: the global options of `sqlmq` and [`BenchArgs`] |
//! | `args.rs` | arguments, message counts (`--quick`, hidden `--scale`), shared constants |
//! | `registry.rs` | the scenario list, run order, selection by name, planned scenarios |
//! | `outcome.rs` | `Outcome`, what a scenario gave: shared by the scenarios and the registry, below both |
//! | `backend/` | what each database needs beyond sqlmq: scratch area, raw statements, facts, counters |
//! | `scratch.rs` | the scratch database, table prefix or file |
//! | `context.rs` | what scenarios share: plan, fresh clients, progress bars, peer URLs |
//! | `raw.rs` | raw SQL baselines on sqlmq-shaped tables |
//! | `raw_queue.rs` | `raw.queue`: raw queues (taking, leases, one-row layouts), the ceiling of sqlmq's |
//! | `raw_head.rs` | `raw.head`: a claim behind messages in flight and scheduled, per one-row layout |
//! | `schema.rs` | `schema.migrate`: upgrading a full database, against an empty one |
//! | `serve.rs` | `serve.send`, `serve.drain`: the HTTP API under load; the minimal HTTP client |
//! | `serve_wait.rs` | `serve.wait`: what waiting HTTP long polls cost, their wakeup latency, memory |
//! | `worker.rs` | the worker runtime: throughput, latency, idle cost and the poll trade-off |
//! | `worker_group.rs` | `worker.group`: `worker.e2e`'s worker on a cluster group |
//! | `durable.rs` | `worker.durable`: recorded steps against `worker.e2e`, sleep and event resume, claims beside sleeping runs |
//! | `running.rs` | `worker.running`: handlers reporting progress against none, cancel → token |
//! | `queue/` | sqlmq queue scenarios |
//! | `topic/` | sqlmq topic scenarios: publish until sequenced, consumer group drain |
//! | `peers/` | PostgreSQL, RabbitMQ, Redis Streams |
//! | `track.rs` | duplicate and loss bookkeeping |
//! | `measure.rs` | bodies with sequence numbers or timestamps, histograms, peak memory |
//! | `report.rs` | figures, ratios, the table and the JSON document |
//! | `machine.rs` | machine and database facts |
//! | `progress.rs` | progress bars |

#![warn(missing_docs)]

mod args;
mod backend;
mod context;
mod durable;
mod machine;
mod measure;
mod outcome;
mod peers;
mod progress;
mod queue;
mod raw;
mod raw_head;
mod raw_queue;
mod registry;
mod report;
mod running;
mod schema;
mod scratch;
mod serve;
mod serve_wait;
mod soak;
mod topic;
mod track;
mod worker;
mod worker_fleet;
mod worker_group;

use std::io::IsTerminal;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result, bail};

pub use self::args::BenchArgs;
use self::args::{BODY_BYTES, Plan};
use self::backend::Db;
use self::context::{Ctx, PeerUrls};
use self::machine::Machine;
use self::outcome::Outcome;
use self::registry::{PLANNED, Scenario};
use self::report::{Report, ScenarioReport, Status};
use sqlmq_cli_common::output::print_json;
use sqlmq_cli_common::settings::{Settings, redact};

/// Run the benchmark on backend `B`: connect with `settings` (the global options: database URL,
/// config file), run the scenarios `args` select, print the report and remove the scratch area.
/// Fails when an sqlmq or baseline scenario failed or sqlmq broke a delivery guarantee; an
/// unknown scenario is a [`UsageError`](sqlmq_cli_common::UsageError).
///
/// `B` is the backend the database URL names (`sqlmq` picks it from the URL's scheme for every
/// command, this one included):
///
/// ```no_run
/// # async fn f(settings: &sqlmq_cli_common::settings::Settings, args: sqlmq_bench::BenchArgs)
/// # -> anyhow::Result<()> {
/// sqlmq_bench::run::<sqlmq::Sqlite>(settings, args).await
/// # }
/// ```
pub async fn run<B: sqlmq::Backend>(settings: &Settings, args: BenchArgs) -> Result<()> {
    // The bench's own per-backend parts (`backend/`) exist for each of sqlmq's backends, as
    // implementations of the bench's `Db` on the same types; the URL scheme, by which the
    // library tells its backends apart, says which one `B` is.
    if B::SCHEME == <sqlmq::MySql as sqlmq::Backend>::SCHEME {
        run_on::<sqlmq::MySql>(settings, args).await
    } else if B::SCHEME == <sqlmq::Sqlite as sqlmq::Backend>::SCHEME {
        run_on::<sqlmq::Sqlite>(settings, args).await
    } else {
        bail!("the bench does not know sqlmq's {} backend yet", B::SCHEME)
    }
}

/// [`run`] on a backend the bench knows.
async fn run_on<B: Db>(settings: &Settings, args: BenchArgs) -> Result<()> {
    if args.list {
        list();
        return Ok(());
    }
    if args.scenarios.iter().any(|s| s == "soak") {
        return run_soak::<B>(settings, args).await;
    }
    let selected = registry::select(&args.scenarios)?;
    let plan = Plan::new(args.quick, args.scale);
    let run_id = format!("{:08x}", rand::random::<u32>());
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();

    let scratch = B::create_scratch(settings, &run_id).await?;
    let server = match B::facts(&scratch).await {
        Ok(server) => server,
        Err(e) => {
            if let Err(removed) = scratch.remove().await {
                eprintln!("bench: {removed:#}");
            }
            return Err(e);
        }
    };
    eprintln!(
        "bench: {} run of {} scenario(s) on {} in {}",
        if args.quick { "quick" } else { "full" },
        selected.len(),
        redact(&settings.database_url),
        scratch.describe()
    );
    let peers = PeerUrls {
        postgres: args.postgres_url.clone(),
        redis: args.redis_url.clone(),
        amqp: args.amqp_url.clone(),
    };
    let progress = !args.json && std::io::stderr().is_terminal();
    let ctx = Ctx::new(plan, scratch, run_id, progress, peers);
    let started = Instant::now();

    // Dropping `run_all` on a signal drops every scenario's tasks (they live in JoinSets or
    // abort-on-drop handles), which returns their connections; the clean-up below then runs
    // whichever way the run ended.
    let outcome = tokio::select! {
        reports = run_all(&ctx, &selected) => Ok(reports),
        signal = interrupted() => Err(signal),
    };
    let removed = ctx.scratch.remove().await;
    peers::cleanup(&ctx).await;
    if let Err(e) = &removed {
        eprintln!("bench: {e:#}");
    }
    let scenarios = match outcome {
        Ok(reports) => reports,
        Err(signal) => {
            let what = if removed.is_ok() {
                "removed"
            } else {
                "NOT removed"
            };
            bail!(
                "interrupted by {signal}; the {} was {what}",
                ctx.scratch.describe()
            );
        }
    };

    let mut report = Report {
        sqlmq_version: env!("CARGO_PKG_VERSION"),
        date,
        mode: if args.quick { "quick" } else { "full" },
        plan: ctx.plan.clone(),
        body_bytes: BODY_BYTES,
        machine: Machine::detect(),
        server,
        scratch: ctx.scratch.area.clone(),
        scenarios,
        planned: PLANNED.to_vec(),
        seconds: started.elapsed().as_secs_f64(),
    };
    report.resolve_ratios();
    if let Some(path) = &args.out {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        report.print_table();
    }
    verdict(&report)
}

/// `soak`: the long mixed run (see `soak.rs`), alone, in a scratch area of its own.
async fn run_soak<B: Db>(settings: &Settings, args: BenchArgs) -> Result<()> {
    if args.scenarios.len() > 1 {
        return Err(sqlmq_cli_common::UsageError(
            "soak runs alone: `sqlmq bench soak --minutes N`".to_owned(),
        )
        .into());
    }
    let run_id = format!("{:08x}", rand::random::<u32>());
    let scratch = B::create_scratch(settings, &run_id).await?;
    eprintln!(
        "bench: soak of {} min at {} msg/s on {} in {}",
        args.minutes,
        args.rate,
        redact(&settings.database_url),
        scratch.describe()
    );
    let plan = Plan::new(args.quick, args.scale);
    let peers = PeerUrls {
        postgres: args.postgres_url.clone(),
        redis: args.redis_url.clone(),
        amqp: args.amqp_url.clone(),
    };
    let ctx = Ctx::new(plan, scratch, run_id, false, peers);
    let outcome = tokio::select! {
        report = soak::soak(&ctx, args.minutes, args.rate) => Ok(report),
        signal = interrupted() => Err(signal),
    };
    let removed = ctx.scratch.remove().await;
    let report = match outcome {
        Ok(report) => report?,
        Err(signal) => bail!("interrupted by {signal}"),
    };
    removed?;
    if args.json {
        print_json(&report)?;
    } else {
        report.print();
    }
    if report.lost > 0 {
        bail!("{} messages lost", report.lost);
    }
    Ok(())
}

/// Run the scenarios one after another; a failing scenario is reported and the run goes on.
async fn run_all<B: Db>(ctx: &Ctx<B>, selected: &[&'static Scenario]) -> Vec<ScenarioReport> {
    let mut reports = Vec::with_capacity(selected.len());
    for scenario in selected {
        let started = Instant::now();
        let outcome = registry::run(ctx, scenario.id).await;
        let mut report = ScenarioReport {
            id: scenario.id,
            title: scenario.title,
            status: Status::Ok,
            reason: None,
            seconds: started.elapsed().as_secs_f64(),
            peer: None,
            figures: Vec::new(),
            not_available: Vec::new(),
        };
        match outcome {
            Ok(Outcome::Ran(figures)) => report.figures = figures,
            Ok(Outcome::Partly(figures, unavailable)) => {
                report.figures = figures;
                report.not_available = unavailable;
            }
            Ok(Outcome::Peer(info, figures)) => {
                report.peer = Some(info);
                report.figures = figures;
            }
            Ok(Outcome::Skipped(why)) => {
                eprintln!("bench: skipped {}: {why}", scenario.id);
                report.status = Status::Skipped;
                report.reason = Some(why);
            }
            Ok(Outcome::NotAvailable(why)) => {
                report.status = Status::NotAvailable;
                report.reason = Some(why);
            }
            Err(e) => {
                eprintln!("bench: {} failed: {e:#}", scenario.id);
                report.status = Status::Failed;
                report.reason = Some(format!("{e:#}"));
            }
        }
        reports.push(report);
    }
    reports
}

/// Resolves with the name of the first termination signal received: Ctrl-C (SIGINT), SIGTERM,
/// or SIGHUP (the terminal went away).
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    async fn one(kind: SignalKind) {
        match signal(kind) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = one(SignalKind::terminate()) => "SIGTERM",
        _ = one(SignalKind::hangup()) => "SIGHUP",
    }
}

/// Fail the command when an sqlmq or baseline scenario failed, or when sqlmq delivered a
/// message twice or lost one. Peers that fail or are skipped do not fail the run.
fn verdict(report: &Report) -> Result<()> {
    let failed: Vec<&str> = report
        .scenarios
        .iter()
        .filter(|s| s.status == Status::Failed && !s.id.starts_with("peer."))
        .map(|s| s.id)
        .collect();
    if !failed.is_empty() {
        bail!("scenario(s) failed: {}", failed.join(", "));
    }
    let broken: Vec<String> = report
        .broken_guarantees()
        .iter()
        .map(|f| {
            format!(
                "{}: {} duplicates, {} losses",
                f.key,
                f.duplicates.unwrap_or(0),
                f.losses.unwrap_or(0)
            )
        })
        .collect();
    if !broken.is_empty() {
        bail!("sqlmq broke a delivery guarantee: {}", broken.join("; "));
    }
    Ok(())
}

/// `--list`.
fn list() {
    let rows: Vec<Vec<String>> = registry::SCENARIOS
        .iter()
        .map(|s| {
            let needs = if s.needs.is_empty() {
                String::new()
            } else {
                format!("(with {})", s.needs.join(", "))
            };
            vec![s.id.to_owned(), s.title.to_owned(), needs]
        })
        .chain(PLANNED.iter().map(|p| {
            vec![
                p.id.to_owned(),
                p.title.to_owned(),
                "(later issue: not built yet)".to_owned(),
            ]
        }))
        .collect();
    sqlmq_cli_common::output::print_table(&["scenario", "measures", ""], &rows);
    println!(
        "\ngroups: raw (or baselines), queue, worker, topic, peers (or peer); peers also by name: postgres, rabbitmq, redis"
    );
}
