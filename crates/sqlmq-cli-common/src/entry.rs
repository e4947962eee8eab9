//! How a sqlmq binary starts and ends: logging to stderr, a multi-threaded runtime, and the exit
//! code. Errors go to stderr as `error: <message>` with their causes; the exit code is 1 for
//! runtime errors and 2 for usage errors (clap's own, and [`UsageError`]s such as a purge
//! without `--yes` or an unknown bench scenario).

use std::future::Future;
use std::io::IsTerminal;
use std::process::ExitCode;

use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::otel::Export;

/// A request the command refuses as given (exit code 2, like clap's usage errors).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Run a binary's `main` future: log to stderr at the level `-v` asks for, run `main` on a
/// multi-threaded runtime, print its error (the chain of causes, each once) and map the outcome
/// to an exit code.
///
/// ```no_run
/// # async fn run() -> anyhow::Result<()> { Ok(()) }
/// fn main() -> std::process::ExitCode {
///     sqlmq_cli_common::run_main(0, run())
/// }
/// ```
pub fn run_main(verbose: u8, main: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
    let export = init_tracing(verbose);
    let code = run(main);
    if let Some(export) = export {
        export.shutdown();
    }
    code
}

/// Run `main` on a multi-threaded runtime; its exit code.
fn run(main: impl Future<Output = anyhow::Result<()>>) -> ExitCode {
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
    match runtime.block_on(main) {
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

/// Log to stderr. The default level is `warn` so that the library's warnings (non-durable
/// server settings, lost leases) are always seen; `-v` adds `info`, `-vv` `debug`, and
/// `RUST_LOG` overrides both. With a collector configured (`otel.rs`), sqlmq's spans are
/// exported too, whatever the log level: the exporter, returned, must be shut down at exit.
fn init_tracing(verbose: u8) -> Option<Export> {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let (export, spans) = match Export::from_env() {
        Ok(Some((export, tracer))) => {
            let spans = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(Targets::new().with_target("sqlmq", Level::INFO));
            (Some(export), Some(spans))
        }
        Ok(None) => (None, None),
        Err(e) => {
            eprintln!("warning: {e}; spans are not exported");
            (None, None)
        }
    };
    tracing_subscriber::registry().with(log).with(spans).init();
    export
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

    #[test]
    fn report_skips_causes_already_printed() {
        let err = anyhow::anyhow!("inner").context("outer");
        assert_eq!(report(&err), "error: outer\n  caused by: inner");
        let err = anyhow::anyhow!("inner").context("outer: inner");
        assert_eq!(report(&err), "error: outer: inner");
    }
}
