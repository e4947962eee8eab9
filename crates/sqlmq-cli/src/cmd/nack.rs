//! `sqlmq nack`: give a claimed message back for a retry, or dead-letter it on its last attempt.

use std::time::Duration;

use anyhow::Result;
use sqlmq::queue::{NackOutcome, Receipt};

use super::{open_queue, parse_duration, parse_receipt};
use crate::output::short_duration;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq nack`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Receipt (ID:TOKEN)
    #[arg(value_parser = parse_receipt)]
    receipt: Receipt,
    /// Retry after this delay instead of the queue's backoff
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    retry_in: Option<Duration>,
    /// Error text kept in the message's history
    #[arg(long, value_name = "TEXT", default_value = "nacked with sqlmq nack")]
    error: String,
}

/// Run `sqlmq nack`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    match queue.nack(args.receipt, args.retry_in, &args.error).await? {
        NackOutcome::Retry { after } => println!(
            "{} will be retried in {}",
            args.receipt.id,
            short_duration(after)
        ),
        NackOutcome::DeadLettered => println!(
            "{} had no attempts left and is now a dead letter",
            args.receipt.id
        ),
        // NackOutcome is non_exhaustive: print outcomes this build does not know yet.
        other => println!("{}: {other:?}", args.receipt.id),
    }
    Ok(())
}
