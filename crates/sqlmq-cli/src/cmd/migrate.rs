//! `sqlmq migrate`: create or upgrade the schema.

use anyhow::Result;
use serde::Serialize;

use crate::output::print_json;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq migrate`.
#[derive(clap::Args, Debug)]
pub struct Args {
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
}

/// Run `sqlmq migrate`. Safe to run from several processes at once (the library serialises it).
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let report = client.migrate().await?;
    if args.json {
        return print_json(&Report {
            from_version: report.from_version,
            to_version: report.to_version,
            applied: &report.applied,
        });
    }
    let applied = if report.applied.is_empty() {
        "none, already up to date".to_owned()
    } else {
        let list: Vec<String> = report.applied.iter().map(i64::to_string).collect();
        list.join(", ")
    };
    println!(
        "schema at version {} (applied: {applied})",
        report.to_version
    );
    Ok(())
}
