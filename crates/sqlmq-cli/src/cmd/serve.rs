//! `sqlmq serve`: the HTTP API, the dashboard and `/metrics` (crate `sqlmq-serve`). This file
//! only turns flags and environment into a `ServeConfig`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use sqlmq::Backend;

use crate::cmd::{UsageError, parse_duration};
use crate::settings::{Patience, Settings};

/// Arguments of `sqlmq serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on; without a token only loopback addresses are accepted
    #[arg(long, env = "SQLMQ_LISTEN", default_value = sqlmq_serve::DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Full-access bearer token
    #[arg(
        long,
        env = "SQLMQ_API_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    token: Option<String>,
    /// File holding the full-access token (first line)
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Read-only bearer token: GET requests, and the dashboard without its actions
    #[arg(
        long,
        env = "SQLMQ_API_READ_TOKEN",
        hide_env_values = true,
        conflicts_with = "read_token_file"
    )]
    read_token: Option<String>,
    /// File holding the read-only token (first line)
    #[arg(long, value_name = "FILE")]
    read_token_file: Option<PathBuf>,
    /// How often the database gauges (/metrics, dashboard charts) are read
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    metrics_refresh: Duration,
    /// Longest long poll granted (at most 20s)
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    max_wait: Duration,
    /// Largest accepted request body in bytes
    #[arg(long, default_value_t = sqlmq_serve::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
}

fn read_token(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read token file {}", path.display()))?;
    Ok(text.lines().next().unwrap_or_default().trim().to_owned())
}

/// Run `sqlmq serve` until SIGTERM or Ctrl-C.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(read_token(path)?),
        (None, None) => None,
    };
    let read = match (&args.read_token, &args.read_token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(read_token(path)?),
        (None, None) => None,
    };
    let mut config = sqlmq_serve::ServeConfig::default()
        .listen(args.listen)
        .metrics_refresh(args.metrics_refresh)
        .max_wait(args.max_wait)
        .max_body_bytes(args.max_body_bytes);
    if let Some(t) = token {
        config = config.token(t);
    }
    if let Some(t) = read {
        config = config.read_token(t);
    }
    // Refuse an unsafe address before touching the database.
    if !config.auth_enabled() && !args.listen.ip().is_loopback() {
        return Err(UsageError(
            sqlmq_serve::ServeError::NonLoopbackWithoutToken(args.listen).to_string(),
        )
        .into());
    }
    let config = config.prometheus(sqlmq_serve::install_prometheus_recorder());
    // A long-running process: it waits for an unavailable database at start (and its
    // requests answer 503 with Retry-After while it is unavailable later).
    let client = settings
        .connect_with::<B>(settings.builder(), Patience::Unbounded)
        .await?;
    let server = sqlmq_serve::Server::bind(client, config).await?;
    eprintln!(
        "sqlmq serve: listening on http://{} (dashboard at /, API under /v1, /metrics, /openapi.json)",
        server.local_addr()
    );
    server.run(sqlmq_serve::shutdown_on_signals()).await?;
    eprintln!("sqlmq serve: stopped");
    Ok(())
}
