//! `sqlmq purge`: delete every message of a queue except its dead letters.

use anyhow::Result;

use super::{confirm, open_queue};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq purge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Confirm the deletion
    #[arg(long)]
    yes: bool,
}

/// Run `sqlmq purge`. In-flight messages are deleted too: their consumers' acks will fail.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    confirm(
        args.yes,
        &format!(
            "purging deletes every message of {} (dead letters excepted)",
            args.queue
        ),
    )?;
    let n = open_queue::<B>(settings, &args.queue)
        .await?
        .purge()
        .await?;
    println!("deleted {n} message(s) of {}", args.queue);
    Ok(())
}
