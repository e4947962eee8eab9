//! `sqlmq queues`: every queue with its counts by state.

use anyhow::Result;

use crate::output::{print_json, print_table, short_duration};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq queues`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the stats array as JSON
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq queues`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let stats = client.queue_stats().await?;
    if args.json {
        return print_json(&stats);
    }
    if stats.is_empty() {
        eprintln!("no queues (create one: sqlmq queue create NAME)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                if s.paused { "yes" } else { "no" }.to_owned(),
                s.ready.to_string(),
                s.scheduled.to_string(),
                s.blocked.to_string(),
                s.in_flight.to_string(),
                s.dead.to_string(),
                s.oldest_ready_age()
                    .map_or_else(|| "-".to_owned(), short_duration),
            ]
        })
        .collect();
    print_table(
        &[
            "NAME",
            "PAUSED",
            "READY",
            "SCHEDULED",
            "BLOCKED",
            "IN-FLIGHT",
            "DEAD",
            "OLDEST-READY",
        ],
        &rows,
    );
    Ok(())
}
