//! `sqlmq bench`: the benchmark of the `sqlmq-bench` crate, built in with the `bench` feature.
//!
//! It is left out by default because it links the clients of the systems it compares sqlmq
//! with (AMQP, Redis, PostgreSQL), which the operator's tool has no use for. Without the feature
//! the subcommand still parses, whatever follows it, and says how to get the benchmark (exit 2),
//! so that a script or a habit that types `sqlmq bench …` learns where it went.

use anyhow::Result;
use sqlmq::Backend;

use crate::settings::Settings;

/// Where the benchmark is, for builds without it.
#[cfg(not(feature = "bench"))]
pub const NOT_BUILT_IN: &str = "this sqlmq was built without the benchmark: run it with \
     `cargo run --release -p sqlmq-bench -- <args>`, or build sqlmq with \
     `cargo build --release -p sqlmq-cli --features bench`";

/// The benchmark's arguments.
#[cfg(feature = "bench")]
pub use sqlmq_bench::BenchArgs as Args;

/// Run the benchmark on backend `B` (the database URL's).
#[cfg(feature = "bench")]
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    sqlmq_bench::run::<B>(settings, args).await
}

/// What `sqlmq bench` accepts in a build without the benchmark: anything, ignored.
#[cfg(not(feature = "bench"))]
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The benchmark's arguments (this build has no benchmark)
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    ignored: Vec<String>,
}

/// Refuse with [`NOT_BUILT_IN`].
#[cfg(not(feature = "bench"))]
// `B` keeps the call in `dispatch` the same with and without the feature.
#[allow(clippy::extra_unused_type_parameters)]
pub async fn run<B: Backend>(_settings: &Settings, _args: Args) -> Result<()> {
    Err(super::UsageError(NOT_BUILT_IN.to_owned()).into())
}
