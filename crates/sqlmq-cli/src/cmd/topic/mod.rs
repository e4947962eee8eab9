//! `sqlmq topic create|list|describe|delete`: declare, look at and remove topics.
//!
//! | file | what |
//! |---|---|
//! | `create.rs` | `topic create` |
//! | `list.rs` | `topic list` |
//! | `describe.rs` | `topic describe` |
//! | `delete.rs` | `topic delete` |
//! | `view.rs` | records and lags for humans and JSON, shared by the topic commands |

pub mod create;
pub mod delete;
pub mod describe;
pub mod list;
pub mod view;

use anyhow::Result;
use clap::Subcommand;

use crate::settings::Settings;
use sqlmq::Backend;

/// `sqlmq topic ...`
#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a topic, or change the given settings of an existing one (partitions only grow)
    Create(create::Args),
    /// List topics with their partitions, records and groups
    List(list::Args),
    /// Show a topic's settings, partitions and consumer groups with their lag
    Describe(describe::Args),
    /// Delete a topic with its records and consumer groups (asks for --yes)
    Delete(delete::Args),
}

/// Run `sqlmq topic ...`.
pub async fn run<B: Backend>(settings: &Settings, command: TopicCommand) -> Result<()> {
    match command {
        TopicCommand::Create(args) => create::run::<B>(settings, args).await,
        TopicCommand::List(args) => list::run::<B>(settings, args).await,
        TopicCommand::Describe(args) => describe::run::<B>(settings, args).await,
        TopicCommand::Delete(args) => delete::run::<B>(settings, args).await,
    }
}
