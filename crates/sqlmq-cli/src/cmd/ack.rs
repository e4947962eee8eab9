//! `sqlmq ack`: ack claimed messages by receipt, in one transaction.

use anyhow::{Result, bail};
use sqlmq::Receipt;

use super::{open_queue, parse_receipt, recv::list};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq ack`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Receipts (ID:TOKEN, as `recv` prints them)
    #[arg(required = true, value_name = "RECEIPT", value_parser = parse_receipt)]
    receipts: Vec<Receipt>,
}

/// Run `sqlmq ack`. Exits 1, naming them, when some leases were lost.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    let report = queue.ack_batch(&args.receipts).await?;
    println!("acked {} of {}", report.acked, args.receipts.len());
    if !report.lost.is_empty() {
        bail!(
            "lease lost for {} receipt(s), not acked (they expired or were claimed again): {}",
            report.lost.len(),
            list(&report.lost)
        );
    }
    Ok(())
}
