//! `sqlmq dlq list|redrive|purge`: a queue's dead letters, or with `--group G` those of a
//! topic's consumer group (of a broadcast group: its members', `--member` for one).

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use clap::{ArgGroup, Subcommand};
use serde::Serialize;
use sqlmq::inspect::AttemptError;
use sqlmq::queue::DeadLetter;
use sqlmq::source::Source;
use sqlmq::topic::GroupMode;
use sqlmq::{Backend, Group, MessageId};

use super::{UsageError, confirm, open_group, open_queue, parse_message_id};
use crate::output::{JsonBody, json_time, preview, print_json, print_table, timestamp};
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
        /// Queue name (with --group: topic name)
        #[arg(value_name = "QUEUE|TOPIC")]
        queue: String,
        /// The dead letters of this consumer group of topic QUEUE|TOPIC
        #[arg(long, value_name = "G")]
        group: Option<String>,
        /// A broadcast group's: only this member's [default: every member's]
        #[arg(long, value_name = "NAME", requires = "group")]
        member: Option<String>,
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
        /// Queue name (with --group: topic name)
        #[arg(value_name = "QUEUE|TOPIC")]
        queue: String,
        /// Redrive into this consumer group of topic QUEUE|TOPIC
        #[arg(long, value_name = "G")]
        group: Option<String>,
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
        /// Queue name (with --group: topic name)
        #[arg(value_name = "QUEUE|TOPIC")]
        queue: String,
        /// Delete the dead letters of this consumer group of topic QUEUE|TOPIC
        #[arg(long, value_name = "G")]
        group: Option<String>,
        /// A broadcast group's: only this member's [default: every member's]
        #[arg(long, value_name = "NAME", requires = "group")]
        member: Option<String>,
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
    /// Topic records only.
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<u32>,
    /// Topic records only.
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<i64>,
    ordering_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency_key: Option<&'a str>,
    headers: &'a BTreeMap<String, String>,
    /// Broadcast groups only: whose dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<&'a str>,
    #[serde(flatten)]
    body: JsonBody,
}

impl<'a> From<&'a DeadLetter> for JsonDeadLetter<'a> {
    fn from(d: &'a DeadLetter) -> Self {
        JsonDeadLetter {
            id: d.id.to_string(),
            attempts: d.attempts,
            died_at: json_time(d.died_at),
            enqueued_at: json_time(d.enqueued_at),
            errors: &d.errors,
            partition: d.partition,
            offset: d.offset,
            ordering_key: d.ordering_key.as_deref(),
            concurrency_key: d.concurrency_key.as_deref(),
            headers: &d.headers,
            member: d.member.as_deref(),
            body: JsonBody::new(&d.body),
        }
    }
}

/// Whose dead letters: a queue's, a cluster group's, or a broadcast group's members'.
enum Target<B: Backend> {
    Source(Source<B>),
    Members(Group<B>, Option<String>),
}

impl<B: Backend> Target<B> {
    fn name(&self) -> String {
        match self {
            Target::Source(s) => s.name(),
            Target::Members(g, None) => format!("{}/{}", g.topic().name(), g.name()),
            Target::Members(g, Some(m)) => {
                format!("{}/{} (member {m})", g.topic().name(), g.name())
            }
        }
    }

    async fn dead_letters(&self, limit: usize) -> sqlmq::Result<Vec<DeadLetter>> {
        match self {
            Target::Source(s) => s.dead_letters(limit).await,
            Target::Members(g, m) => g.member_dead_letters(m.as_deref(), limit).await,
        }
    }
}

/// Whose dead letters: a queue's, or (with `--group`) a consumer group's.
async fn open<B: Backend>(
    settings: &Settings,
    name: &str,
    group: Option<&str>,
    member: Option<String>,
) -> Result<Target<B>> {
    let Some(group) = group else {
        return Ok(Target::Source(Source::Queue(
            open_queue::<B>(settings, name).await?,
        )));
    };
    let group = open_group::<B>(settings, name, group).await?;
    Ok(match group.config().mode {
        GroupMode::Broadcast => Target::Members(group, member),
        GroupMode::Cluster if member.is_some() => {
            return Err(UsageError(format!(
                "--member names a broadcast member, and {name}/{} is a cluster group",
                group.name()
            ))
            .into());
        }
        GroupMode::Cluster => Target::Source(Source::Group(group)),
    })
}

/// Run `sqlmq dlq ...`.
pub async fn run<B: Backend>(settings: &Settings, command: DlqCommand) -> Result<()> {
    match command {
        DlqCommand::List {
            queue,
            group,
            member,
            limit,
            json,
        } => {
            let target = open::<B>(settings, &queue, group.as_deref(), member).await?;
            let letters = target.dead_letters(limit).await?;
            if json {
                let rows: Vec<JsonDeadLetter> = letters.iter().map(JsonDeadLetter::from).collect();
                return print_json(&rows);
            }
            if letters.is_empty() {
                eprintln!("no dead letters in {}", target.name());
                return Ok(());
            }
            let rows: Vec<Vec<String>> = letters.iter().map(row).collect();
            if let Target::Source(Source::Queue(_)) = target {
                print_table(&["ID", "ATTEMPTS", "DIED-AT", "LAST-ERROR", "BODY"], &rows);
                return Ok(());
            }
            let members = matches!(target, Target::Members(..));
            let rows: Vec<Vec<String>> = letters
                .iter()
                .zip(rows)
                .map(|(d, mut r)| {
                    let at = match (d.partition, d.offset) {
                        (Some(p), Some(o)) => format!("{p}:{o}"),
                        _ => "-".to_owned(),
                    };
                    r.insert(1, at);
                    if members {
                        r.insert(1, d.member.clone().unwrap_or_default());
                    }
                    r
                })
                .collect();
            if members {
                print_table(
                    &[
                        "ID",
                        "MEMBER",
                        "AT",
                        "ATTEMPTS",
                        "DIED-AT",
                        "LAST-ERROR",
                        "BODY",
                    ],
                    &rows,
                );
            } else {
                print_table(
                    &["ID", "AT", "ATTEMPTS", "DIED-AT", "LAST-ERROR", "BODY"],
                    &rows,
                );
            }
        }
        DlqCommand::Redrive {
            queue,
            group,
            ids,
            all,
        } => {
            let target = match open::<B>(settings, &queue, group.as_deref(), None).await? {
                Target::Source(source) => source,
                Target::Members(g, _) => bail!(
                    "{queue}/{} is a broadcast group: its members passed their dead letters and \
                     keep no retries to redrive them into (list them with `sqlmq dlq list`, \
                     delete them with `sqlmq dlq purge`)",
                    g.name()
                ),
            };
            let into = target.name();
            if all {
                let n = target.redrive_all().await?;
                println!("redrove {n} dead letter(s) into {into}");
            } else {
                let done = target.redrive(&ids).await?;
                println!("redrove {} dead letter(s) into {into}", done.len());
                let missing: Vec<String> = ids
                    .iter()
                    .filter(|id| !done.contains(id))
                    .map(MessageId::to_string)
                    .collect();
                if !missing.is_empty() {
                    bail!(
                        "not dead letters of {into}, left alone: {}",
                        missing.join(" ")
                    );
                }
            }
        }
        DlqCommand::Purge {
            queue,
            group,
            member,
            yes,
        } => {
            let what = match (&group, &member) {
                (Some(g), Some(m)) => format!("{queue}/{g} (member {m})"),
                (Some(g), None) => format!("{queue}/{g}"),
                (None, _) => queue.clone(),
            };
            confirm(yes, &format!("purging deletes every dead letter of {what}"))?;
            let n = match open::<B>(settings, &queue, group.as_deref(), member).await? {
                Target::Source(source) => source.purge_dead_letters().await?,
                Target::Members(g, m) => g.purge_member_dead_letters(m.as_deref(), None).await?,
            };
            println!("deleted {n} dead letter(s) of {what}");
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
