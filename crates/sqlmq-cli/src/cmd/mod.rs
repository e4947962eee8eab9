//! One subcommand per file. Each exposes `Args` (or a subcommand enum) and `run`.

pub mod ack;
pub mod cancel;
pub mod consume;
pub mod demo;
pub mod dlq;
pub mod extend;
pub mod migrate;
pub mod nack;
pub mod pause;
pub mod purge;
pub mod queue;
pub mod queues;
pub mod recv;
pub mod resume;
pub mod send;

use std::time::Duration;

use anyhow::Result;

use crate::settings::Settings;

/// A request the command refuses as given (exit code 2, like clap's usage errors).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Refuse a destructive command unless `--yes` was given.
pub fn confirm(yes: bool, what: &str) -> Result<()> {
    if yes {
        Ok(())
    } else {
        Err(UsageError(format!("{what}: pass --yes to confirm")).into())
    }
}

/// Connect and look the queue up (fails with the library's "unknown queue" error).
pub async fn open_queue(settings: &Settings, name: &str) -> Result<sqlmq::Queue> {
    let client = settings.connect().await?;
    Ok(client.queue(name).await?)
}

/// clap value parser for durations such as `30s`, `1m 30s`, `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 250ms, 30s or 1h 30m)"))
}

/// clap value parser for a backoff: `exp:BASE:MAX` or a ladder `10s,30s,1m`.
pub fn parse_backoff(text: &str) -> Result<sqlmq::Backoff, String> {
    text.parse::<sqlmq::Backoff>().map_err(|e| e.to_string())
}

/// clap value parser for `KEY=VALUE` headers.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// clap value parser for receipts (`ID:TOKEN`, as `recv` prints them).
pub fn parse_receipt(text: &str) -> Result<sqlmq::Receipt, String> {
    text.parse::<sqlmq::Receipt>().map_err(|e| e.to_string())
}

/// clap value parser for message ids.
pub fn parse_message_id(text: &str) -> Result<sqlmq::MessageId, String> {
    text.parse::<sqlmq::MessageId>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_parsers() {
        assert_eq!(parse_duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("soon").is_err());
        assert_eq!(
            parse_header("a=b=c").unwrap(),
            ("a".to_owned(), "b=c".to_owned())
        );
        assert!(parse_header("=x").is_err());
        assert!(parse_header("x").is_err());
        assert!(parse_backoff("10s,1m").is_ok());
        assert!(parse_backoff("exp:1h:1s").is_err());
    }
}
