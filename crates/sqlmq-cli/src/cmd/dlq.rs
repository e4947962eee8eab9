//! `sqlmq dlq list|redrive|purge`: a queue's dead letters.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::{ArgGroup, Subcommand};
use serde::Serialize;
use sqlmq::{AttemptError, DeadLetter, MessageId};

use super::{confirm, open_queue, parse_message_id};
use crate::output::{JsonBody, preview, print_json, print_table, timestamp};
use crate::settings::Settings;

/// Characters of the body shown by `dlq list`.
const BODY_PREVIEW_CHARS: usize = 40;
/// Characters of the last error shown by `dlq list`.
const ERROR_PREVIEW_CHARS: usize = 60;

/// `sqlmq dlq ...`
#[derive(Subcommand, Debug)]
pub enum DlqCommand {
    /// List the oldest dead letters with their last error
    List {
        /// Queue name
        queue: String,
        /// Most dead letters to show
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print them as JSON, with their whole error history
        #[arg(long)]
        json: bool,
    },
    /// Put dead letters back into the queue, attempts reset
    #[command(group(ArgGroup::new("which").required(true).args(["ids", "all"])))]
    Redrive {
        /// Queue name
        queue: String,
        /// Ids of the dead letters to redrive
        #[arg(
            value_name = "ID",
            value_parser = parse_message_id,
            conflicts_with = "all"
        )]
        ids: Vec<MessageId>,
        /// Redrive every dead letter of the queue
        #[arg(long)]
        all: bool,
    },
    /// Delete every dead letter of the queue
    Purge {
        /// Queue name
        queue: String,
        /// Confirm the deletion
        #[arg(long)]
        yes: bool,
    },
}

/// One dead letter in `--json` output.
#[derive(Serialize)]
struct JsonDeadLetter<'a> {
    id: String,
    attempts: u32,
    died_at: String,
    enqueued_at: String,
    errors: &'a [AttemptError],
    ordering_key: Option<&'a str>,
    headers: &'a BTreeMap<String, String>,
    #[serde(flatten)]
    body: JsonBody,
}

impl<'a> From<&'a DeadLetter> for JsonDeadLetter<'a> {
    fn from(d: &'a DeadLetter) -> Self {
        JsonDeadLetter {
            id: d.id.to_string(),
            attempts: d.attempts,
            died_at: timestamp(d.died_at),
            enqueued_at: timestamp(d.enqueued_at),
            errors: &d.errors,
            ordering_key: d.ordering_key.as_deref(),
            headers: &d.headers,
            body: JsonBody::new(&d.body),
        }
    }
}

/// Run `sqlmq dlq ...`.
pub async fn run(settings: &Settings, command: DlqCommand) -> Result<()> {
    match command {
        DlqCommand::List { queue, limit, json } => {
            let letters = open_queue(settings, &queue)
                .await?
                .dead_letters(limit)
                .await?;
            if json {
                let rows: Vec<JsonDeadLetter> = letters.iter().map(JsonDeadLetter::from).collect();
                return print_json(&rows);
            }
            if letters.is_empty() {
                eprintln!("no dead letters in {queue}");
                return Ok(());
            }
            print_table(
                &["ID", "ATTEMPTS", "DIED-AT", "LAST-ERROR", "BODY"],
                &letters.iter().map(row).collect::<Vec<_>>(),
            );
        }
        DlqCommand::Redrive { queue, ids, all } => {
            let q = open_queue(settings, &queue).await?;
            if all {
                let n = q.redrive_all().await?;
                println!("redrove {n} dead letter(s) into {queue}");
            } else {
                let done = q.redrive(&ids).await?;
                println!("redrove {} dead letter(s) into {queue}", done.len());
                let missing: Vec<String> = ids
                    .iter()
                    .filter(|id| !done.contains(id))
                    .map(MessageId::to_string)
                    .collect();
                if !missing.is_empty() {
                    bail!(
                        "not dead letters of {queue}, left alone: {}",
                        missing.join(" ")
                    );
                }
            }
        }
        DlqCommand::Purge { queue, yes } => {
            confirm(
                yes,
                &format!("purging deletes every dead letter of {queue}"),
            )?;
            let n = open_queue(settings, &queue)
                .await?
                .purge_dead_letters()
                .await?;
            println!("deleted {n} dead letter(s) of {queue}");
        }
    }
    Ok(())
}

/// One dead letter as a table row.
fn row(d: &DeadLetter) -> Vec<String> {
    let last_error = d.errors.last().map_or_else(
        || "-".to_owned(),
        |e| preview(e.error.as_bytes(), ERROR_PREVIEW_CHARS),
    );
    vec![
        d.id.to_string(),
        d.attempts.to_string(),
        timestamp(d.died_at),
        last_error,
        preview(&d.body, BODY_PREVIEW_CHARS),
    ]
}
