//! `sqlmq resume`: hand out a paused queue's messages again.

use anyhow::Result;

use super::open_queue;
use crate::settings::Settings;

/// Arguments of `sqlmq resume`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
}

/// Run `sqlmq resume`.
pub async fn run(settings: &Settings, args: Args) -> Result<()> {
    open_queue(settings, &args.queue).await?.resume().await?;
    println!("resumed {}", args.queue);
    Ok(())
}
