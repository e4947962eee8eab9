//! `sqlmq extend`: extend the lease of a claimed message.

use std::time::Duration;

use anyhow::Result;
use sqlmq::queue::Receipt;

use super::{open_queue, parse_duration, parse_receipt};
use crate::output::short_duration;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq extend`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Receipt (ID:TOKEN)
    #[arg(value_parser = parse_receipt)]
    receipt: Receipt,
    /// New lease, counted from now
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    lease: Duration,
}

/// Run `sqlmq extend`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    queue.extend(args.receipt, args.lease).await?;
    println!(
        "lease of {} extended to {} from now",
        args.receipt.id,
        short_duration(args.lease)
    );
    Ok(())
}
