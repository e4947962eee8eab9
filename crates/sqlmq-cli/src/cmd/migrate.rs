//! `sqlmq migrate`: create or upgrade the schema, or take it back to an earlier version.

use anyhow::Result;
use serde::Serialize;

use crate::output::print_json;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq migrate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Take the schema to this version instead of the newest: lower to roll back to an older
    /// sqlmq (refused, nothing dropped, while a table it would drop holds rows or workers run)
    #[arg(long, value_name = "VERSION")]
    to: Option<i64>,
    /// Print the report as JSON
    #[arg(long)]
    json: bool,
}

/// The JSON form of a migration report.
#[derive(Serialize)]
struct Report<'a> {
    from_version: i64,
    to_version: i64,
    applied: &'a [i64],
    reverted: &'a [i64],
}

/// Run `sqlmq migrate`. Safe to run from several processes at once (the library serialises it).
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let report = match args.to {
        Some(version) => client.migrate_to(version).await?,
        None => client.migrate().await?,
    };
    if args.json {
        return print_json(&Report {
            from_version: report.from_version,
            to_version: report.to_version,
            applied: &report.applied,
            reverted: &report.reverted,
        });
    }
    let list = |versions: &[i64]| {
        let list: Vec<String> = versions.iter().map(i64::to_string).collect();
        list.join(", ")
    };
    let done = if !report.reverted.is_empty() {
        format!("reverted: {}", list(&report.reverted))
    } else if report.applied.is_empty() && args.to.is_none() {
        "applied: none, already up to date".to_owned()
    } else if report.applied.is_empty() {
        "applied: none, already at that version".to_owned()
    } else {
        format!("applied: {}", list(&report.applied))
    };
    println!("schema at version {} ({done})", report.to_version);
    Ok(())
}
