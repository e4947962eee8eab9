//! `sqlmq ack`: ack claimed messages by receipt, in one transaction.

use anyhow::{Result, bail};
use sqlmq::queue::Receipt;

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
    /// Keep TEXT as the message's result, for the messages that depend on it (one receipt)
    #[arg(long, value_name = "TEXT")]
    result: Option<String>,
}

/// Run `sqlmq ack`. Exits 1, naming them, when some leases were lost.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    if let Some(result) = args.result {
        let [receipt] = args.receipts[..] else {
            bail!("--result acks one receipt at a time");
        };
        queue.ack_with_result(receipt, result).await?;
        println!("acked 1 of 1");
        return Ok(());
    }
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
