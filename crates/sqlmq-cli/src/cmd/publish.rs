//! `sqlmq publish`: one record from the argument or stdin, or with `--batch` one record per
//! stdin line, all published atomically.

use anyhow::Result;
use serde::Serialize;
use sqlmq::topic::Published;
use sqlmq::{MessageId, Record};

use super::send::{batch_error, bodies};
use super::{parse_header, parse_message_id};
use crate::output::print_json;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq publish`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    topic: String,
    /// Record body; when absent, all of stdin is one record
    #[arg(conflicts_with = "batch")]
    body: Option<String>,
    /// Key: records with the same key go to the same partition, in order
    #[arg(long, value_name = "K")]
    key: Option<String>,
    /// Publish to this partition instead of the key's (or a random one)
    #[arg(long, value_name = "P")]
    partition: Option<u32>,
    /// Header KEY=VALUE (repeatable)
    #[arg(long = "header", value_name = "KEY=VALUE", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// Record id (a UUID): publishing an id already published is a no-op reported as a
    /// duplicate
    #[arg(long, value_name = "UUID", value_parser = parse_message_id, conflicts_with = "batch")]
    id: Option<MessageId>,
    /// Publish every non-empty line of stdin as one record, all in one transaction
    #[arg(long)]
    batch: bool,
    /// Print [{"id", "partition", "duplicate"}] as JSON
    #[arg(long)]
    json: bool,
}

impl Args {
    /// A record with this body and the options of the command line.
    fn record(&self, body: Vec<u8>) -> Record {
        let mut r = Record::new(body);
        if let Some(k) = &self.key {
            r = r.key(k);
        }
        if let Some(p) = self.partition {
            r = r.partition(p);
        }
        if let Some(id) = self.id {
            r = r.with_id(id);
        }
        for (k, v) in &self.headers {
            r = r.header(k, v);
        }
        r
    }
}

/// Run `sqlmq publish`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let bodies = bodies(args.body.as_deref(), args.batch).await?;
    if bodies.is_empty() {
        eprintln!("stdin held no lines: nothing published");
        return Ok(());
    }
    let client = settings.connect::<B>().await?;
    let topic = client.topic(&args.topic).await?;
    let limit = client.max_payload_bytes();
    let count = bodies.len();
    let records: Vec<Record> = bodies.iter().map(|b| args.record(b.clone())).collect();
    let published = topic.publish_batch(records).await.map_err(|e| {
        let rejected =
            format!("the batch of {count} records was rejected and nothing was published");
        batch_error(e, args.batch.then_some(&bodies[..]), limit, &rejected)
    })?;
    // Offsets are given right after commit by a sequencer of this process, which is about to
    // exit: give them now, so that readers and `topic list` see the records at once. Should
    // this fail, the records are published all the same; the next reader sequences them.
    if let Err(e) = topic.sequence().await {
        eprintln!("warning: published, but offsets not assigned yet: {e}");
    }
    print_published(&published, args.json)
}

/// One id per line (`(duplicate)` when it was already published), or JSON.
fn print_published(published: &[Published], json: bool) -> Result<()> {
    if json {
        #[derive(Serialize)]
        struct Row {
            id: String,
            partition: u32,
            duplicate: bool,
        }
        let rows: Vec<Row> = published
            .iter()
            .map(|p| Row {
                id: p.id.to_string(),
                partition: p.partition,
                duplicate: p.duplicate,
            })
            .collect();
        return print_json(&rows);
    }
    for p in published {
        if p.duplicate {
            println!("{} (duplicate)", p.id);
        } else {
            println!("{}", p.id);
        }
    }
    Ok(())
}
