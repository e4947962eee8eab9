//! `sqlmq resume`: hand out a paused queue's messages again.

use anyhow::Result;

use super::open_queue;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq resume`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
}

/// Run `sqlmq resume`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    open_queue::<B>(settings, &args.queue)
        .await?
        .resume()
        .await?;
    println!("resumed {}", args.queue);
    Ok(())
}
