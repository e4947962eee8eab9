//! `sqlmq pause`: stop handing out a queue's messages.

use anyhow::Result;

use super::open_queue;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq pause`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
}

/// Run `sqlmq pause`. Sends are still accepted; claims already made are unaffected.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    open_queue::<B>(settings, &args.queue)
        .await?
        .pause()
        .await?;
    println!(
        "paused {}: consumers receive nothing until `sqlmq resume {0}`",
        args.queue
    );
    Ok(())
}
