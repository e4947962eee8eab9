//! `sqlmq reset`: move a consumer group's position in every partition.

use anyhow::Result;
use serde::Serialize;
use sqlmq::topic::StartAt;

use super::{open_group, parse_start_at};
use crate::output::{print_json, print_table};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq reset`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    topic: String,
    /// Consumer group
    #[arg(long, value_name = "G")]
    group: String,
    /// New position: earliest, latest, an offset (in every partition) or an RFC 3339 time.
    /// Records from there are handed out again, consumed or not; records in flight or waiting
    /// to retry are not affected. A broadcast group's checkpoints are dropped
    #[arg(long, value_name = "WHEN", value_parser = parse_start_at, allow_negative_numbers = true)]
    to: StartAt,
    /// Print [{"partition", "position"}] as JSON
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq reset`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let group = open_group::<B>(settings, &args.topic, &args.group).await?;
    let moved = group.reset(args.to).await?;
    if args.json {
        #[derive(Serialize)]
        struct Row {
            partition: u32,
            position: i64,
        }
        let rows: Vec<Row> = moved
            .iter()
            .map(|&(partition, position)| Row {
                partition,
                position,
            })
            .collect();
        return print_json(&rows);
    }
    println!(
        "reset group {}/{}: new position per partition",
        args.topic, args.group
    );
    print_table(
        &["PARTITION", "POSITION"],
        &moved
            .iter()
            .map(|(p, o)| vec![p.to_string(), o.to_string()])
            .collect::<Vec<_>>(),
    );
    Ok(())
}
