//! `sqlmq topic delete`: delete a topic with its records and consumer groups.

use anyhow::Result;

use crate::cmd::confirm;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq topic delete`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    name: String,
    /// Confirm the deletion
    #[arg(long)]
    yes: bool,
}

/// Run `sqlmq topic delete`. Stop the topic's producers and consumers first.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    confirm(
        args.yes,
        &format!(
            "deleting removes topic {} with every record and consumer group",
            args.name
        ),
    )?;
    settings
        .connect::<B>()
        .await?
        .delete_topic(&args.name)
        .await?;
    println!("deleted topic {}", args.name);
    Ok(())
}
