//! `sqlmq cancel`: remove one message that is not in flight.

use anyhow::Result;
use sqlmq::MessageId;

use super::{open_queue, parse_message_id};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq cancel`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Message id
    #[arg(value_parser = parse_message_id)]
    id: MessageId,
}

/// Run `sqlmq cancel`. Fails while a consumer holds the message.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    open_queue::<B>(settings, &args.queue)
        .await?
        .cancel(args.id)
        .await?;
    println!("cancelled {}", args.id);
    Ok(())
}
