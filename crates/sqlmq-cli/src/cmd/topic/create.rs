//! `sqlmq topic create`: declare a topic or change the settings given.

use std::time::Duration;

use anyhow::Result;
use sqlmq::{Error, TopicConfig};

use crate::cmd::parse_duration;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq topic create`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name: 1 to 128 characters of A-Z a-z 0-9 . _ -
    name: String,
    /// Partitions, 1 to 1024 [default: 1]; they can grow, never shrink
    #[arg(long, value_name = "N")]
    partitions: Option<u32>,
    /// Delete records older than this (e.g. 7d) [default: keep them]
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    retention: Option<Duration>,
    /// Keep at most about this many bytes of bodies per partition [default: no limit]
    #[arg(long, value_name = "N")]
    retention_bytes: Option<u64>,
    /// Never delete records a consumer group has not consumed, whatever the retention
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    keep_unconsumed: Option<bool>,
    /// Cluster groups hand out one record per partition at a time: strict order per key
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    strict_order: Option<bool>,
}

/// Run `sqlmq topic create`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    // Start from the existing configuration so that options not given are kept.
    let existing = match client.topic(&args.name).await {
        Ok(topic) => Some(topic.config().clone()),
        Err(Error::UnknownTopic(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let created = existing.is_none();
    let mut config = existing.unwrap_or_default();
    if let Some(n) = args.partitions {
        config = config.partitions(n);
    }
    if let Some(age) = args.retention {
        config = config.retention(age);
    }
    if let Some(bytes) = args.retention_bytes {
        config = config.retention_bytes(bytes);
    }
    if let Some(keep) = args.keep_unconsumed {
        config = config.retention_keeps_unconsumed(keep);
    }
    if let Some(strict) = args.strict_order {
        config = config.strict_order(strict);
    }
    let topic = client.create_topic(&args.name, config).await?;
    let verb = if created { "created" } else { "updated" };
    println!(
        "{verb} topic {}: {}",
        topic.name(),
        describe(topic.config())
    );
    Ok(())
}

/// A topic's settings on one line.
pub fn describe(c: &TopicConfig) -> String {
    let retention = match (c.retention, c.retention_bytes) {
        (None, None) => "keep everything".to_owned(),
        (age, bytes) => {
            let mut parts = Vec::new();
            if let Some(age) = age {
                parts.push(format!("{}", humantime::format_duration(age)));
            }
            if let Some(bytes) = bytes {
                parts.push(format!("{bytes} bytes per partition"));
            }
            let mut text = format!("retention {}", parts.join(" or "));
            if c.retention_keeps_unconsumed {
                text.push_str(" (unconsumed records kept)");
            }
            text
        }
    };
    format!(
        "{} partition(s), {retention}, {}",
        c.partitions,
        if c.strict_order {
            "strict order"
        } else {
            "parallel within partitions"
        }
    )
}
