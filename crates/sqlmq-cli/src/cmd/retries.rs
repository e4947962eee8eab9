//! `sqlmq retries`: the records of a consumer group waiting on its retry ladder, and making them
//! due now.

use anyhow::Result;
use clap::ArgGroup;
use serde::Serialize;
use sqlmq::MessageId;
use sqlmq::topic::PendingRetry;

use super::{open_group, parse_message_id};
use crate::output::{json_time, print_json, print_table, timestamp};
use crate::settings::Settings;
use sqlmq::Backend;

/// Most retries `--now --all` makes due in one call (the library lists at most this many).
const ALL_LIMIT: usize = 10_000;

/// Arguments of `sqlmq retries`.
#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("which").args(["ids", "all"]).requires("now")))]
pub struct Args {
    /// Topic name
    topic: String,
    /// Consumer group
    #[arg(long, value_name = "G")]
    group: String,
    /// Make the given retries (or with --all every waiting one) due now instead of listing
    #[arg(long)]
    now: bool,
    /// Ids of the retries to make due now
    #[arg(value_name = "ID", value_parser = parse_message_id, conflicts_with = "all")]
    ids: Vec<MessageId>,
    /// With --now: every waiting retry
    #[arg(long)]
    all: bool,
    /// Most retries to list, soonest first
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Print the list as JSON
    #[arg(long)]
    json: bool,
}

/// One waiting retry in `--json` output.
#[derive(Serialize)]
struct JsonRetry {
    id: String,
    partition: u32,
    offset: i64,
    attempts: u32,
    run_at: String,
}

impl From<&PendingRetry> for JsonRetry {
    fn from(r: &PendingRetry) -> Self {
        JsonRetry {
            id: r.id.to_string(),
            partition: r.partition,
            offset: r.offset,
            attempts: r.attempts,
            run_at: json_time(r.run_at),
        }
    }
}

/// Run `sqlmq retries`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let group = open_group::<B>(settings, &args.topic, &args.group).await?;
    if args.now {
        let ids: Vec<MessageId> = if args.all {
            group
                .retries(ALL_LIMIT)
                .await?
                .iter()
                .map(|r| r.id)
                .collect()
        } else {
            args.ids.clone()
        };
        if ids.is_empty() && !args.all {
            return Err(super::UsageError("--now needs retry ids or --all".into()).into());
        }
        let n = group.retry_now(&ids).await?;
        println!(
            "{n} retr{} of {}/{} due now",
            if n == 1 { "y" } else { "ies" },
            args.topic,
            args.group
        );
        return Ok(());
    }
    let retries = group.retries(args.limit).await?;
    if args.json {
        return print_json(&retries.iter().map(JsonRetry::from).collect::<Vec<_>>());
    }
    if retries.is_empty() {
        eprintln!(
            "no records of {}/{} wait for a retry",
            args.topic, args.group
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = retries
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                format!("{}:{}", r.partition, r.offset),
                r.attempts.to_string(),
                timestamp(r.run_at),
            ]
        })
        .collect();
    print_table(&["ID", "POSITION", "ATTEMPTS", "DUE"], &rows);
    Ok(())
}
