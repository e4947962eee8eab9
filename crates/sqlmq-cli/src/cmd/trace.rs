//! `sqlmq trace`: one record's story in every consumer group of its topic.

use anyhow::{Result, bail};
use serde::Serialize;
use sqlmq::MessageId;
use sqlmq::inspect::{DeliveryEvent, GroupTrace, TraceState};
use sqlmq::topic::GroupMode;

use super::topic::view::{JsonRecord, record_line};
use super::{open_topic, parse_message_id};
use crate::output::{print_json, print_table};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq trace`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    topic: String,
    /// Record id (as `publish` printed it)
    #[arg(value_name = "ID", value_parser = parse_message_id)]
    id: MessageId,
    /// Print the trace as JSON
    #[arg(long)]
    json: bool,
}

/// One group of the trace in `--json` output: `state` and its fields (`at`, `member`, ...)
/// inline.
#[derive(Serialize)]
struct JsonGroupTrace<'a> {
    group: &'a str,
    mode: GroupMode,
    #[serde(flatten)]
    state: &'a TraceState,
    attempts: u32,
    events: &'a [DeliveryEvent],
    read_by: &'a [String],
    dead_for: &'a [String],
}

impl<'a> From<&'a GroupTrace> for JsonGroupTrace<'a> {
    fn from(g: &'a GroupTrace) -> Self {
        JsonGroupTrace {
            group: &g.group,
            mode: g.mode,
            state: &g.state,
            attempts: g.attempts,
            events: &g.events,
            read_by: &g.read_by,
            dead_for: &g.dead_for,
        }
    }
}

/// `trace --json`.
#[derive(Serialize)]
struct JsonTrace<'a> {
    id: String,
    partition: u32,
    /// Null while the record waits for its offset.
    offset: Option<i64>,
    record: Option<JsonRecord<'a>>,
    groups: Vec<JsonGroupTrace<'a>>,
}

/// Run `sqlmq trace`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let topic = open_topic::<B>(settings, &args.topic).await?;
    let Some(trace) = topic.trace(args.id).await? else {
        bail!(
            "topic {} has no record {} (never published there, or removed by retention)",
            args.topic,
            args.id
        );
    };
    if args.json {
        return print_json(&JsonTrace {
            id: trace.id.to_string(),
            partition: trace.partition,
            offset: trace.offset,
            record: trace.record.as_ref().map(JsonRecord::from),
            groups: trace.groups.iter().map(JsonGroupTrace::from).collect(),
        });
    }
    match &trace.record {
        Some(r) => println!(
            "{}",
            record_line(
                Some(r.partition),
                Some(r.offset),
                r.id,
                r.key.as_deref(),
                &r.body
            )
        ),
        None => println!(
            "{}  {}  (published, waiting for its offset)",
            trace.partition, trace.id
        ),
    }
    if trace.groups.is_empty() {
        println!("no consumer groups");
        return Ok(());
    }
    println!();
    print_table(
        &["GROUP", "MODE", "STATE", "ATTEMPTS", "DETAIL"],
        &trace
            .groups
            .iter()
            .map(|g| {
                let (state, mut detail) = describe(&g.state, &g.read_by);
                if !g.dead_for.is_empty() {
                    detail.push_str(&format!("; dead letter of {}", g.dead_for.join(", ")));
                }
                vec![
                    g.group.clone(),
                    g.mode.to_string(),
                    state.to_owned(),
                    g.attempts.to_string(),
                    detail,
                ]
            })
            .collect::<Vec<_>>(),
    );
    for g in trace.groups.iter().filter(|g| !g.events.is_empty()) {
        println!();
        println!("{} deliveries:", g.group);
        for e in &g.events {
            println!("  {}", event_line(e));
        }
    }
    Ok(())
}

/// A state's name and its details.
fn describe(state: &TraceState, read_by: &[String]) -> (&'static str, String) {
    match state {
        TraceState::NotDelivered => ("not-delivered", "-".to_owned()),
        TraceState::InFlight {
            member,
            since,
            lease_until,
        } => (
            "in-flight",
            format!(
                "member {} since {since}, lease until {lease_until}",
                member.as_deref().unwrap_or("?")
            ),
        ),
        TraceState::WaitingRetry { at } => ("waiting-retry", format!("due at {at}")),
        TraceState::Acked { at } => ("acked", format!("at {at}")),
        TraceState::Dead { at } => ("dead", format!("dead-lettered at {at}")),
        TraceState::Consumed => ("consumed", "-".to_owned()),
        TraceState::Broadcast if read_by.is_empty() => {
            ("broadcast", "read by no member yet".to_owned())
        }
        TraceState::Broadcast => ("broadcast", format!("read by {}", read_by.join(", "))),
        _ => ("unknown", "-".to_owned()),
    }
}

/// One delivery: attempt, member, times, outcome and error (on one line).
fn event_line(e: &DeliveryEvent) -> String {
    let mut text = format!(
        "attempt {}  member {}  delivered {}  {} {}",
        e.attempt,
        e.member.as_deref().unwrap_or("?"),
        e.delivered_at,
        e.outcome,
        e.at
    );
    if let Some(error) = &e.error {
        text.push_str(": ");
        text.push_str(&error.replace('\n', " | "));
    }
    text
}
