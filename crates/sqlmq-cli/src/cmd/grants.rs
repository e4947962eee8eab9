//! `sqlmq grants`: print the GRANT statements of the runtime or the migration user, or what
//! notifications need besides.

use anyhow::Result;
use sqlmq::{Backend, GrantRole};

use crate::settings::Settings;

/// Arguments of `sqlmq grants`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The user to grant to
    #[arg(long)]
    user: String,
    /// The host part of the account ('%': from anywhere)
    #[arg(long, default_value = "%")]
    host: String,
    /// Print the migration user's grants (CREATE, ALTER, INDEX and data statements on the
    /// database) instead of the runtime user's (data statements on sqlmq's tables only)
    #[arg(long, conflicts_with = "notifications")]
    migration: bool,
    /// Print the server-wide grant notifications need besides the runtime grants (reading the
    /// binary log): optional, without it waiting consumers poll
    #[arg(long)]
    notifications: bool,
}

/// Run `sqlmq grants`: one statement per line, ready for `mysql`; nothing on SQLite (no users).
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let role = if args.migration {
        GrantRole::Migration
    } else if args.notifications {
        GrantRole::Notifications
    } else {
        GrantRole::Runtime
    };
    let grants = client.grants(role, &args.user, &args.host).await?;
    if grants.is_empty() {
        eprintln!("SQLite has no database users: access is the file's permissions");
    }
    for grant in grants {
        println!("{grant}");
    }
    Ok(())
}
