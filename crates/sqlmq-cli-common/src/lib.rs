//! What the sqlmq command-line binaries share: `sqlmq` (crate `sqlmq-cli`) and `sqlmq-bench`
//! (crate `sqlmq-bench`) accept the same global options, print the same tables and errors, and
//! poll the same way. One copy lives here so that the two cannot drift apart, and so that the
//! `sqlmq` binary does not have to link the benchmark (and its AMQP, Redis and PostgreSQL
//! clients) to get them.
//!
//! ## Layout
//!
//! | module | what |
//! |---|---|
//! | `settings` | global options, TOML config file, connecting |
//! | `output` | tables for humans, JSON for scripts |
//! | `poll` | adaptive, jittered polling delay of a consumer of an empty queue |
//! | `entry` | logging, the async runtime, exit codes and the `error: …` report |
//! | `otel` | OTLP export of sqlmq's spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set |

#![warn(missing_docs)]

mod entry;
mod otel;
pub mod output;
pub mod poll;
pub mod settings;

pub use entry::{UsageError, run_main};
