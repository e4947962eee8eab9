//! `sqlmq query`: read a topic's records by position, by key or by time.

use std::time::{Duration, SystemTime};

use anyhow::Result;
use clap::ArgGroup;

use super::topic::view::JsonRecord;
use super::{UsageError, open_topic, parse_time};
use crate::output::{preview, print_json, print_table, timestamp};
use crate::settings::Settings;
use sqlmq::Backend;

/// Characters of the body shown in the table.
const BODY_PREVIEW_CHARS: usize = 60;

/// Arguments of `sqlmq query`.
#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("by").required(true).args(["offset", "key", "since"])))]
pub struct Args {
    /// Topic name
    topic: String,
    /// Partition to read (with --offset)
    #[arg(long, value_name = "P", requires = "offset")]
    partition: Option<u32>,
    /// First offset to read in --partition
    #[arg(
        long,
        value_name = "O",
        requires = "partition",
        allow_negative_numbers = true
    )]
    offset: Option<i64>,
    /// Records with this key, by partition and offset
    #[arg(long, value_name = "K")]
    key: Option<String>,
    /// Records sequenced at or after this time: RFC 3339, or a duration ago (10m)
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    since: Option<SystemTime>,
    /// With --since: records sequenced before this time [default: now]
    #[arg(long, value_name = "TIME", value_parser = parse_time, requires = "since")]
    until: Option<SystemTime>,
    /// Most records to return (1 to 10000)
    #[arg(long, value_name = "N", default_value_t = 100)]
    limit: usize,
    /// Print the records as a JSON array
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq query`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    if args.limit == 0 || args.limit > sqlmq::Topic::MAX_QUERY {
        return Err(UsageError(format!("--limit must be 1 to {}", sqlmq::Topic::MAX_QUERY)).into());
    }
    if let Some(o) = args.offset
        && o < 0
    {
        return Err(UsageError(format!("--offset must not be negative, got {o}")).into());
    }
    let topic = open_topic::<B>(settings, &args.topic).await?;
    let records = match (args.partition, args.offset, &args.key, args.since) {
        (Some(p), Some(o), _, _) => {
            let partitions = topic.config().partitions;
            if p >= partitions {
                anyhow::bail!(
                    "topic {} has {partitions} partition(s): no partition {p}",
                    args.topic
                );
            }
            topic.query_offsets(p, o, args.limit).await?
        }
        (_, _, Some(key), _) => topic.query_key(key, args.limit).await?,
        (_, _, _, Some(since)) => {
            // Far enough ahead for any clock skew between this host and the database.
            let until = args
                .until
                .unwrap_or_else(|| SystemTime::now() + Duration::from_secs(86_400));
            topic.query_time(since, until, args.limit).await?
        }
        _ => unreachable!("clap requires one of --offset, --key, --since"),
    };
    if args.json {
        return print_json(&records.iter().map(JsonRecord::from).collect::<Vec<_>>());
    }
    if records.is_empty() {
        eprintln!("no records matched in {}", args.topic);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.partition.to_string(),
                r.offset.to_string(),
                r.id.to_string(),
                timestamp(r.sequenced_at),
                r.key.clone().unwrap_or_else(|| "-".to_owned()),
                preview(&r.body, BODY_PREVIEW_CHARS),
            ]
        })
        .collect();
    print_table(
        &["PARTITION", "OFFSET", "ID", "SEQUENCED-AT", "KEY", "BODY"],
        &rows,
    );
    Ok(())
}
