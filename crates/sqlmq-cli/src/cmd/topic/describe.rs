//! `sqlmq topic describe`: a topic's settings, partitions and consumer groups.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use sqlmq::TopicConfig;
use sqlmq::topic::{GroupLag, PartitionInfo};

use super::view::{group_lags, print_lags};
use crate::output::{print_json, print_table};
use crate::settings::Settings;
use sqlmq::Backend;

/// Window of the publish rate shown.
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Arguments of `sqlmq topic describe`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    name: String,
    /// Print the description as JSON
    #[arg(long)]
    json: bool,
}

/// `topic describe --json`.
#[derive(Serialize)]
struct JsonDescription<'a> {
    name: &'a str,
    config: &'a TopicConfig,
    records: u64,
    bytes: u64,
    rate_per_s: f64,
    partitions: Vec<PartitionInfo>,
    groups: &'a [GroupLag],
}

/// Run `sqlmq topic describe`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let topic = client.topic(&args.name).await?;
    let stats = topic.stats(RATE_WINDOW).await?;
    let lags = group_lags(
        &client,
        Some(topic.name()),
        None,
        sqlmq::Group::DEFAULT_MEMBER_SILENCE,
    )
    .await?;
    let config = topic.config();
    let partitions = topic.partitions().await?;
    if args.json {
        return print_json(&JsonDescription {
            name: topic.name(),
            config,
            records: stats.records,
            bytes: stats.bytes,
            rate_per_s: stats.rate_per_s,
            partitions,
            groups: &lags,
        });
    }
    println!(
        "topic {}: {}",
        topic.name(),
        super::create::describe(config)
    );
    println!(
        "{} record(s) retained ({} bytes), {} ever, {:.1}/s over the last minute",
        stats.records, stats.bytes, stats.total, stats.rate_per_s
    );
    println!();
    print_table(
        &["PARTITION", "START", "END", "BYTES"],
        &partitions
            .iter()
            .map(|p| {
                vec![
                    p.partition.to_string(),
                    p.start.to_string(),
                    p.end.to_string(),
                    p.bytes.to_string(),
                ]
            })
            .collect::<Vec<_>>(),
    );
    println!();
    if lags.is_empty() {
        println!(
            "no consumer groups (sqlmq subscribe {} --group NAME)",
            topic.name()
        );
        return Ok(());
    }
    print_lags(&lags, false);
    Ok(())
}
