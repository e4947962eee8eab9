//! `sqlmq replay`: deliver a range of records to a cluster group again.

use anyhow::Result;
use sqlmq::topic::StartAt;

use super::{open_group, parse_start_at};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq replay`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    topic: String,
    /// Consumer group (cluster mode)
    #[arg(long, value_name = "G")]
    group: String,
    /// First record to deliver again (inclusive): earliest, latest, an offset (in every
    /// partition) or an RFC 3339 time
    #[arg(long, value_name = "WHEN", value_parser = parse_start_at, allow_negative_numbers = true)]
    from: StartAt,
    /// End of the range (exclusive), in the same forms; records the group was not handed yet
    /// come in their turn anyway
    #[arg(long, value_name = "WHEN", value_parser = parse_start_at, default_value = "latest", allow_negative_numbers = true)]
    to: StartAt,
}

/// Run `sqlmq replay`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let group = open_group::<B>(settings, &args.topic, &args.group).await?;
    let n = group.replay(args.from, args.to).await?;
    println!(
        "queued {n} record(s) of {}/{} for delivery again",
        args.topic, args.group
    );
    Ok(())
}
