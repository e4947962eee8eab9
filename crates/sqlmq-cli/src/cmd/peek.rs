//! `sqlmq peek`: a queue's messages in one state (or those of a key), read without a lease.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use sqlmq::Backend;
use sqlmq::inspect::{AttemptError, MessageState, QueuedMessage};

use super::{UsageError, open_queue};
use crate::output::{JsonBody, json_time, preview, print_json, print_table, timestamp};
use crate::settings::Settings;

/// Characters of the body shown in the table.
const BODY_PREVIEW_CHARS: usize = 40;

/// clap value parser for a state `peek` lists.
fn parse_state(text: &str) -> Result<MessageState, String> {
    match text.parse::<MessageState>() {
        Ok(MessageState::Dead) => Err("dead letters are listed by `sqlmq dlq list`".into()),
        Ok(state) => Ok(state),
        Err(e) => Err(e.to_string()),
    }
}

/// Arguments of `sqlmq peek`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Which messages: ready, scheduled, blocked (behind their ordering key) or in_flight
    #[arg(long, default_value = "ready", value_parser = parse_state, conflicts_with = "key")]
    state: MessageState,
    /// Most messages to show (1 to 10000)
    #[arg(short = 'n', long = "limit", default_value_t = 20)]
    limit: usize,
    /// Start after this position (the cursor a previous page printed)
    #[arg(long, value_name = "CURSOR", conflicts_with = "key")]
    after: Option<String>,
    /// Instead of a state: the messages of this ordering key (head first, then its line) and
    /// the one this idempotency key names, in any state but dead
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Print them as JSON (bodies whole, with headers and errors)
    #[arg(long)]
    json: bool,
}

/// One message in `--json` output (`peek` and `show`).
#[derive(Serialize)]
pub struct JsonQueued<'a> {
    id: String,
    state: &'static str,
    priority: i16,
    attempts: u32,
    enqueued_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    claimed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    died_at: Option<String>,
    ordering_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_timeout_ms: Option<u64>,
    headers: &'a BTreeMap<String, String>,
    errors: &'a [AttemptError],
    #[serde(flatten)]
    body: JsonBody,
}

impl<'a> From<&'a QueuedMessage> for JsonQueued<'a> {
    fn from(m: &'a QueuedMessage) -> Self {
        JsonQueued {
            id: m.id.to_string(),
            state: m.state.as_str(),
            priority: m.priority,
            attempts: m.attempts,
            enqueued_at: json_time(m.enqueued_at),
            run_at: m.run_at.map(json_time),
            lease_until: m.lease_until.map(json_time),
            claimed_at: m.claimed_at.map(json_time),
            owner: m.owner.as_deref(),
            died_at: m.died_at.map(json_time),
            ordering_key: m.ordering_key.as_deref(),
            concurrency_key: m.concurrency_key.as_deref(),
            deadline: m.deadline.map(json_time),
            run_timeout_ms: m.run_timeout.map(|t| t.as_millis() as u64),
            headers: &m.headers,
            errors: &m.errors,
            body: JsonBody::new(&m.body),
        }
    }
}

/// When the message's state ends: a delay still to come, or the lease's end.
fn until(m: &QueuedMessage) -> String {
    let due = m.run_at.filter(|t| *t > std::time::SystemTime::now());
    due.or(m.lease_until)
        .map(timestamp)
        .unwrap_or_else(|| "-".to_owned())
}

/// Run `sqlmq peek`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    // A cursor or limit the user typed that the library refuses: a usage error (exit 2).
    let usage = |e: sqlmq::Error| match e {
        sqlmq::Error::InvalidArgument(m) => anyhow::Error::from(UsageError(m)),
        e => e.into(),
    };
    let (messages, next) = match &args.key {
        Some(key) => (
            queue
                .messages_by_key(key, args.limit)
                .await
                .map_err(usage)?,
            None,
        ),
        None => {
            let page = queue
                .browse(args.state, args.after.as_deref(), args.limit)
                .await
                .map_err(usage)?;
            (page.messages, page.next)
        }
    };
    if args.json {
        let rows: Vec<JsonQueued> = messages.iter().map(JsonQueued::from).collect();
        print_json(&rows)?;
    } else if messages.is_empty() {
        match &args.key {
            Some(key) => eprintln!("no message of {} carries key {key:?}", args.queue),
            None => eprintln!("no {} messages in {}", args.state, args.queue),
        }
    } else {
        let rows: Vec<Vec<String>> = messages
            .iter()
            .map(|m| {
                vec![
                    m.id.to_string(),
                    m.state.to_string(),
                    m.priority.to_string(),
                    m.attempts.to_string(),
                    until(m),
                    m.ordering_key.clone().unwrap_or_else(|| "-".to_owned()),
                    preview(&m.body, BODY_PREVIEW_CHARS),
                ]
            })
            .collect();
        print_table(
            &[
                "ID", "STATE", "PRIORITY", "ATTEMPTS", "UNTIL", "KEY", "BODY",
            ],
            &rows,
        );
    }
    if let Some(next) = next {
        eprintln!(
            "more: sqlmq peek {} --state {} --after {next}",
            args.queue, args.state
        );
    }
    Ok(())
}
