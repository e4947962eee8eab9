//! `sqlmq topic list`: every topic with its size and groups.

use std::time::Duration;

use anyhow::Result;

use crate::output::{print_json, print_table};
use crate::settings::Settings;
use sqlmq::Backend;

/// Window of the publish rate shown.
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Arguments of `sqlmq topic list`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the stats array as JSON (name, partitions, records, bytes, total, recent,
    /// rate_per_s over the last minute, groups)
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq topic list`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let mut stats = client.topic_stats(RATE_WINDOW).await?;
    stats.sort_by(|a, b| a.name.cmp(&b.name));
    if args.json {
        return print_json(&stats);
    }
    if stats.is_empty() {
        eprintln!("no topics (create one: sqlmq topic create NAME)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.partitions.to_string(),
                s.records.to_string(),
                s.bytes.to_string(),
                format!("{:.1}", s.rate_per_s),
                s.groups.to_string(),
            ]
        })
        .collect();
    print_table(
        &["NAME", "PARTITIONS", "RECORDS", "BYTES", "RATE/S", "GROUPS"],
        &rows,
    );
    Ok(())
}
