//! `sqlmq grants`: print the GRANT statements of the runtime or the migration user, or what
//! notifications or monitoring need besides.

use anyhow::Result;
use sqlmq::Backend;
use sqlmq::admin::{Flavor, GrantRole};

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
    #[arg(long, conflicts_with_all = ["notifications", "monitoring"])]
    migration: bool,
    /// Print the server-wide grant notifications need besides the runtime grants (reading the
    /// binary log): optional, without it waiting consumers poll
    #[arg(long, conflicts_with = "monitoring")]
    notifications: bool,
    /// Print what reading InnoDB's history list length needs besides the runtime grants (for
    /// the user `sqlmq serve` runs as): PROCESS on MySQL, nothing on MariaDB. Optional, without
    /// it the gauge and its alert are unavailable
    #[arg(long)]
    monitoring: bool,
}

/// Run `sqlmq grants`: one statement per line, ready for `mysql`; nothing on SQLite (no users).
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let client = settings.connect::<B>().await?;
    let role = if args.migration {
        GrantRole::Migration
    } else if args.notifications {
        GrantRole::Notifications
    } else if args.monitoring {
        GrantRole::Monitoring
    } else {
        GrantRole::Runtime
    };
    let grants = client.grants(role, &args.user, &args.host).await?;
    if grants.is_empty() {
        if client.server().flavor == Flavor::Sqlite {
            eprintln!("SQLite has no database users: access is the file's permissions");
        } else {
            eprintln!(
                "nothing to grant: MariaDB reports InnoDB's history list length to every user"
            );
        }
    }
    for grant in grants {
        println!("{grant}");
    }
    Ok(())
}
