//! `sqlmq groups`: every consumer group (of one topic, or of all) with its lag.

use anyhow::Result;

use super::topic::view::{JsonLag, age, group_lags};
use crate::output::{print_json, print_table};
use crate::settings::Settings;

/// Arguments of `sqlmq groups`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this topic's groups [default: every topic's]
    topic: Option<String>,
    /// Print the groups' lags as JSON, with their partitions and broadcast members
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq groups`.
pub async fn run(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect().await?;
    let lags = group_lags(&client, args.topic.as_deref(), None).await?;
    if args.json {
        return print_json(&lags.iter().map(JsonLag::from).collect::<Vec<_>>());
    }
    if lags.is_empty() {
        eprintln!("no consumer groups (create one: sqlmq subscribe TOPIC --group NAME)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = lags
        .iter()
        .map(|l| {
            vec![
                l.topic.clone(),
                l.group.clone(),
                l.mode.to_string(),
                l.unconsumed.to_string(),
                age(l.oldest_unconsumed_age),
                l.in_flight.to_string(),
                l.retrying.to_string(),
                l.dead.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "TOPIC",
            "GROUP",
            "MODE",
            "LAG",
            "OLDEST",
            "IN-FLIGHT",
            "RETRYING",
            "DEAD",
        ],
        &rows,
    );
    Ok(())
}
