//! `sqlmq cancel`: cancel one message in any state.

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

/// Run `sqlmq cancel`: a waiting message is removed; one in flight is cancelled where it runs
/// (its handler is told, its ack fails) and removed when the handler ends.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let cancelled = open_queue::<B>(settings, &args.queue)
        .await?
        .cancel(args.id)
        .await?;
    match cancelled {
        sqlmq::queue::Cancelled::Removed => println!("cancelled {}", args.id),
        sqlmq::queue::Cancelled::Running => println!(
            "cancelled {} while in flight: its handler is told, and it is removed when the handler ends",
            args.id
        ),
    }
    Ok(())
}
