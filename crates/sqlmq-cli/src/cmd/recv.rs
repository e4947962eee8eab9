//! `sqlmq recv`: claim messages and print them, optionally acking them once printed.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;
use sqlmq::Delivery;
use sqlmq::queue::Receipt;

use super::{open_queue, parse_duration};
use crate::output::{JsonBody, json_time, print_json};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq recv`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Claim up to N messages (1 to 1000)
    #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 1)]
    n: usize,
    /// How long the claims last before the messages are handed out again
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
    lease: Duration,
    /// Ack the messages after printing them
    #[arg(long)]
    ack: bool,
    /// Print the messages as a JSON array
    #[arg(long)]
    json: bool,
}

/// One delivery in `--json` output.
#[derive(Serialize)]
struct JsonDelivery<'a> {
    id: String,
    receipt: String,
    token: u64,
    attempt: u32,
    priority: i16,
    ordering_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency_key: Option<&'a str>,
    idempotency_key: Option<&'a str>,
    headers: &'a BTreeMap<String, String>,
    enqueued_at: String,
    lease_expires_at: String,
    #[serde(flatten)]
    body: JsonBody,
}

impl<'a> From<&'a Delivery> for JsonDelivery<'a> {
    fn from(d: &'a Delivery) -> Self {
        JsonDelivery {
            id: d.id.to_string(),
            receipt: d.receipt().to_string(),
            token: d.token,
            attempt: d.attempt,
            priority: d.priority,
            ordering_key: d.ordering_key.as_deref(),
            concurrency_key: d.concurrency_key.as_deref(),
            idempotency_key: d.idempotency_key.as_deref(),
            headers: &d.headers,
            enqueued_at: json_time(d.enqueued_at),
            lease_expires_at: json_time(d.lease_expires_at),
            body: JsonBody::new(&d.body),
        }
    }
}

/// Run `sqlmq recv`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    let batch = queue.receive(args.n, args.lease).await?;
    if args.json {
        let rows: Vec<JsonDelivery> = batch.iter().map(JsonDelivery::from).collect();
        print_json(&rows)?;
    } else if batch.is_empty() {
        eprintln!("no message ready in {}", args.queue);
    } else {
        for d in &batch {
            println!(
                "{}  attempt {}  {}",
                d.receipt(),
                d.attempt,
                String::from_utf8_lossy(&d.body)
            );
        }
    }
    if args.ack && !batch.is_empty() {
        // Acked only after printing: a crash in between redelivers (at least once).
        let receipts: Vec<Receipt> = batch.iter().map(Delivery::receipt).collect();
        let report = queue.ack_batch(&receipts).await?;
        if !report.lost.is_empty() {
            bail!(
                "{} of {} messages could not be acked, their lease was lost: {}",
                report.lost.len(),
                receipts.len(),
                list(&report.lost)
            );
        }
    }
    Ok(())
}

/// Receipts separated by spaces.
pub fn list(receipts: &[Receipt]) -> String {
    let texts: Vec<String> = receipts.iter().map(Receipt::to_string).collect();
    texts.join(" ")
}
