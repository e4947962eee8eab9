//! One subcommand per file. Each exposes `Args` (or a subcommand enum) and `run`.

pub mod ack;
pub mod batch;
pub mod bench;
pub mod cancel;
pub mod consume;
pub mod demo;
pub mod dlq;
pub mod event;
pub mod extend;
pub mod grants;
pub mod groups;
pub mod lag;
pub mod migrate;
pub mod nack;
pub mod pause;
pub mod peek;
pub mod publish;
pub mod purge;
pub mod query;
pub mod queue;
pub mod queues;
pub mod recv;
pub mod replay;
pub mod reset;
pub mod resume;
pub mod retries;
pub mod schedule;
pub mod send;
pub mod serve;
pub mod show;
pub mod subscribe;
pub mod topic;
pub mod trace;

use std::time::{Duration, SystemTime};

use anyhow::Result;

pub use sqlmq_cli_common::UsageError;

use crate::settings::Settings;
use sqlmq::Backend;

/// Refuse a destructive command unless `--yes` was given.
pub fn confirm(yes: bool, what: &str) -> Result<()> {
    if yes {
        Ok(())
    } else {
        Err(UsageError(format!("{what}: pass --yes to confirm")).into())
    }
}

/// Connect and look the queue up (fails with the library's "unknown queue" error).
pub async fn open_queue<B: Backend>(settings: &Settings, name: &str) -> Result<sqlmq::Queue<B>> {
    let client = settings.connect::<B>().await?;
    Ok(client.queue(name).await?)
}

/// Connect and look the topic up (fails with the library's "unknown topic" error).
pub async fn open_topic<B: Backend>(settings: &Settings, name: &str) -> Result<sqlmq::Topic<B>> {
    let client = settings.connect::<B>().await?;
    Ok(client.topic(name).await?)
}

/// Connect and look the consumer group up (unknown topic or group: the library's errors).
pub async fn open_group<B: Backend>(
    settings: &Settings,
    topic: &str,
    group: &str,
) -> Result<sqlmq::Group<B>> {
    Ok(open_topic::<B>(settings, topic).await?.group(group).await?)
}

/// clap value parser for a position: `earliest`, `latest`, an offset or an RFC 3339 time.
pub fn parse_start_at(text: &str) -> Result<sqlmq::topic::StartAt, String> {
    text.parse::<sqlmq::topic::StartAt>().map_err(|e| match e {
        sqlmq::Error::InvalidArgument(m) => m,
        e => e.to_string(),
    })
}

/// clap value parser for a point in time: RFC 3339 (`2026-11-22T10:00:00Z`), or a duration
/// meaning that long ago (`10m`, `1h 30m`).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    time_or_duration(text, "ago", |d| SystemTime::now().checked_sub(d))
}

/// clap value parser for a time ahead: RFC 3339 (`2026-11-22T10:00:00Z`), or a duration from
/// now (`10m`, `1h 30m`).
pub fn parse_deadline(text: &str) -> Result<SystemTime, String> {
    time_or_duration(text, "from now", |d| SystemTime::now().checked_add(d))
}

/// `text` as an RFC 3339 time, or as a duration `away` (its words: "ago", "from now") from now.
fn time_or_duration(
    text: &str,
    words: &str,
    away: impl Fn(Duration) -> Option<SystemTime>,
) -> Result<SystemTime, String> {
    if let Some(t) = sqlmq_serve::body::parse_rfc3339(text) {
        return Ok(t);
    }
    match humantime::parse_duration(text) {
        Ok(d) => away(d).ok_or_else(|| format!("{text} {words} is out of range")),
        Err(_) => Err(format!(
            "expected an RFC 3339 time (2026-11-22T10:00:00Z) or a duration {words} (10m), got \
             {text:?}"
        )),
    }
}

/// clap value parser for durations such as `30s`, `1m 30s`, `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e} (expected a duration such as 250ms, 30s or 1h 30m)"))
}

/// clap value parser for a backoff: `exp:BASE:MAX` or a ladder `10s,30s,1m`.
pub fn parse_backoff(text: &str) -> Result<sqlmq::queue::Backoff, String> {
    text.parse::<sqlmq::queue::Backoff>()
        .map_err(|e| e.to_string())
}

/// clap value parser for `KEY=VALUE` headers.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

/// clap value parser for receipts (`ID:TOKEN`, as `recv` prints them).
pub fn parse_receipt(text: &str) -> Result<sqlmq::queue::Receipt, String> {
    text.parse::<sqlmq::queue::Receipt>()
        .map_err(|e| e.to_string())
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
        assert_eq!(parse_start_at("7"), Ok(sqlmq::topic::StartAt::Offset(7)));
        assert!(
            parse_start_at("soon")
                .unwrap_err()
                .contains("expected earliest")
        );
        assert!(parse_start_at("-1").is_err());
        let ago = parse_time("10m").unwrap();
        let elapsed = SystemTime::now().duration_since(ago).unwrap();
        assert!(elapsed >= Duration::from_secs(600) && elapsed < Duration::from_secs(660));
        assert!(parse_time("2026-11-22T10:00:00Z").is_ok());
        assert!(parse_time("yesterday").is_err());
        let ahead = parse_deadline("10m").unwrap();
        let left = ahead.duration_since(SystemTime::now()).unwrap();
        assert!(left > Duration::from_secs(590) && left <= Duration::from_secs(600));
        assert!(parse_deadline("2026-11-22T10:00:00Z").is_ok());
        assert_eq!(
            parse_deadline("2026-11-22T11:00:00+01:00"),
            parse_deadline("2026-11-22T10:00:00Z")
        );
        assert!(parse_deadline("tomorrow").is_err());
    }

    proptest::proptest! {
        /// Hostile command-line values: every value parser gives a value or a message, never
        /// a panic; an accepted header is exactly its KEY=VALUE text split at the first `=`.
        #[test]
        fn value_parsers_never_panic(
            text in proptest::prop_oneof![
                ".{0,60}",
                "[0-9]{1,25}(ns|ms|s|m|h|d|y|years)( [0-9]{1,25}(s|m))?",
                "(exp:)?[0-9]{1,20}(s|h|years)[:,][0-9]{1,20}(s|h|years)",
                "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
                "-?[0-9]{1,25}",
            ]
        ) {
            let _ = parse_duration(&text);
            let _ = parse_backoff(&text);
            let _ = parse_start_at(&text);
            let _ = parse_time(&text);
            let _ = parse_receipt(&text);
            let _ = parse_message_id(&text);
            if let Ok((k, v)) = parse_header(&text) {
                proptest::prop_assert!(!k.is_empty() && !k.contains('='));
                proptest::prop_assert_eq!(format!("{k}={v}"), text);
            }
        }
    }
}
