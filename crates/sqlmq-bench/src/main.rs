//! `sqlmq-bench`: the benchmark as a binary of its own (see the library's docs). It takes the
//! same arguments as `sqlmq bench`: the global options of `sqlmq` (`--database-url`, `--config`,
//! `-v`, …) and the benchmark's own.

use std::process::ExitCode;

use clap::Parser;
use sqlmq_bench::BenchArgs;
use sqlmq_cli_common::settings::{BackendKind, GlobalArgs, Settings};

/// Measure sqlmq against the raw capacity of the same server, and against peers.
#[derive(Parser, Debug)]
#[command(name = "sqlmq-bench", version)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(flatten)]
    bench: BenchArgs,
}

/// Parse, then run on a multi-threaded runtime and map the outcome to an exit code.
fn main() -> ExitCode {
    let cli = Cli::parse();
    sqlmq_cli_common::run_main(cli.global.verbose, run(cli))
}

/// Resolve the global options (flags, environment, config file) and run the benchmark on the
/// backend the database URL names.
async fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings::resolve(&cli.global)?;
    match settings.backend()? {
        BackendKind::MySql => sqlmq_bench::run::<sqlmq::MySql>(&settings, cli.bench).await,
        BackendKind::Sqlite => sqlmq_bench::run::<sqlmq::Sqlite>(&settings, cli.bench).await,
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
