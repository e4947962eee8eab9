//! `sqlmq groups`: every consumer group (of one topic, or of all) with its lag.

use anyhow::Result;

use super::topic::view::{group_lags, print_lags};
use crate::output::print_json;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq groups`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this topic's groups [default: every topic's]
    topic: Option<String>,
    /// Print the groups' lags as JSON, with their partitions and broadcast members
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq groups`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let lags = group_lags(
        &client,
        args.topic.as_deref(),
        None,
        sqlmq::Group::DEFAULT_MEMBER_SILENCE,
    )
    .await?;
    if args.json {
        return print_json(&lags);
    }
    if lags.is_empty() {
        eprintln!("no consumer groups (create one: sqlmq subscribe TOPIC --group NAME)");
        return Ok(());
    }
    print_lags(&lags, true);
    Ok(())
}
