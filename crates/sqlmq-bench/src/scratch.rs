//! The bench's own corner of the database: on MySQL a scratch database (`sqlmq_bench_<run>`)
//! created for the run and dropped at the end, or, where `CREATE DATABASE` is not permitted, a
//! scratch table prefix (`sqlmq_bench_<run>_`) in the configured database whose tables are
//! dropped at the end; on SQLite a scratch file beside the configured one, removed at the end.
//! Every table the bench creates is named under it, so user data is never touched. How each
//! backend creates and removes it is in `backend/`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::backend::Db;

/// How long dropping the scratch area may wait (for example for the metadata locks of
/// connections that an interrupted scenario left behind).
const DROP_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the bench's tables live.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Area {
    /// A database of its own.
    Database {
        /// Its name.
        name: String,
    },
    /// Tables with a prefix of their own in the configured database.
    TablePrefix {
        /// The prefix.
        prefix: String,
        /// The configured database.
        database: String,
    },
    /// A database file of its own (SQLite).
    File {
        /// Its path.
        path: PathBuf,
    },
}

/// The scratch area and a client to administer it.
pub struct Scratch<B: Db> {
    /// What was created.
    pub area: Area,
    /// URL that scenario clients connect to.
    pub url: String,
    /// Prefix that every table name of the bench starts with ("" in a database of its own).
    pub base_prefix: String,
    /// A client whose pool administers the area (it creates no table of its own).
    pub admin: sqlmq::Client<B>,
}

impl<B: Db> Scratch<B> {
    /// A one-line description for the start of a run.
    pub fn describe(&self) -> String {
        match &self.area {
            Area::Database { name } => format!("scratch database {name}"),
            Area::TablePrefix { prefix, database } => {
                format!("scratch tables {prefix}* in database {database}")
            }
            Area::File { path } => format!("scratch file {}", path.display()),
        }
    }

    /// Drop every table of the scratch area whose name starts with `prefix` (which must start
    /// with the base prefix: nothing outside the bench's area can match).
    pub async fn drop_tables(&self, prefix: &str) -> Result<()> {
        debug_assert!(prefix.starts_with(&self.base_prefix));
        if prefix.is_empty() {
            bail!("refusing to drop tables without a prefix");
        }
        // Names are filtered here rather than with LIKE, where `_` is a wildcard.
        let names: Vec<String> = B::tables(self)
            .await?
            .into_iter()
            .filter(|t| t.starts_with(prefix))
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        B::drop_tables(self, &names).await
    }

    /// Remove the scratch area: the database or file, or every table under the base prefix.
    pub async fn remove(&self) -> Result<()> {
        let work = async {
            match &self.area {
                Area::TablePrefix { prefix, .. } => self.drop_tables(prefix).await,
                Area::Database { .. } | Area::File { .. } => B::remove(self).await,
            }
        };
        tokio::time::timeout(DROP_TIMEOUT, work)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {DROP_TIMEOUT:?}"))
            .and_then(|r| r)
            .with_context(|| format!("cannot remove the {}", self.describe()))
    }
}
