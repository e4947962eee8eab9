//! `sqlmq lag`: consumer groups' lag per partition (and per broadcast member and partition,
//! with each member's last-seen time).

use anyhow::Result;

use super::parse_duration;
use super::topic::view::{age, group_lags};
use crate::output::{print_json, print_table, timestamp};
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq lag`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this topic's groups [default: every topic's]
    topic: Option<String>,
    /// Only this group
    #[arg(long, value_name = "G")]
    group: Option<String>,
    /// Print the lags as JSON (as `groups --json`)
    #[arg(long)]
    json: bool,
    /// Broadcast members without a checkpoint for this long are listed as silent and left
    /// out of their group's backlog (their checkpoints are kept for their return)
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = parse_duration)]
    member_silence: std::time::Duration,
}

/// Run `sqlmq lag`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let lags = group_lags(
        &client,
        args.topic.as_deref(),
        args.group.as_deref(),
        args.member_silence,
    )
    .await?;
    if args.json {
        return print_json(&lags);
    }
    if lags.is_empty() {
        eprintln!("no consumer groups (create one: sqlmq subscribe TOPIC --group NAME)");
        return Ok(());
    }
    let mut rows = Vec::new();
    for l in &lags {
        for p in &l.partitions {
            rows.push(vec![
                l.topic.clone(),
                l.group.clone(),
                p.partition.to_string(),
                p.end.to_string(),
                p.position.to_string(),
                p.backlog.to_string(),
                p.in_flight.to_string(),
                p.retrying.to_string(),
                p.dead.to_string(),
                age(p.oldest_unconsumed_age),
            ]);
        }
    }
    print_table(
        &[
            "TOPIC",
            "GROUP",
            "PARTITION",
            "END",
            "POSITION",
            "BACKLOG",
            "IN-FLIGHT",
            "RETRYING",
            "DEAD",
            "OLDEST",
        ],
        &rows,
    );
    let members: Vec<Vec<String>> = lags
        .iter()
        .flat_map(|l| {
            l.members.iter().flat_map(|m| {
                m.behind_by_partition.iter().map(|(p, behind)| {
                    vec![
                        l.topic.clone(),
                        l.group.clone(),
                        m.member.clone(),
                        p.to_string(),
                        behind.to_string(),
                        timestamp(m.checkpointed_at),
                        if m.silent { "silent" } else { "active" }.to_owned(),
                    ]
                })
            })
        })
        .collect();
    if !members.is_empty() {
        println!();
        print_table(
            &[
                "TOPIC",
                "GROUP",
                "MEMBER",
                "PARTITION",
                "BEHIND",
                "LAST-SEEN",
                "STATE",
            ],
            &members,
        );
    }
    Ok(())
}
