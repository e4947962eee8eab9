//! The bench's own corner of the server: a scratch database (`sqlmq_bench_<run>`) created for
//! the run and dropped at the end, or, where `CREATE DATABASE` is not permitted, a scratch
//! table prefix (`sqlmq_bench_<run>_`) in the configured database whose tables are dropped at the
//! end. Every table the bench creates is named under it, so user data is never touched.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use sqlx::{AssertSqlSafe, MySqlPool, Row};

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
}

/// The scratch area and a connection pool to administer it.
pub struct Scratch {
    /// What was created.
    pub area: Area,
    /// URL that scenario clients connect to.
    pub url: String,
    /// Prefix that every table name of the bench starts with ("" in a database of its own).
    pub base_prefix: String,
    admin: MySqlPool,
}

impl Scratch {
    /// Create the scratch area for run `run_id`, with `admin` (a pool on the configured
    /// database at `url`).
    pub async fn create(admin: MySqlPool, url: &str, run_id: &str) -> Result<Scratch> {
        let name = format!("sqlmq_bench_{run_id}");
        let create = sqlx::query(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&admin)
            .await;
        match create {
            Ok(_) => Ok(Scratch {
                url: with_database(url, &name)?,
                area: Area::Database { name },
                base_prefix: String::new(),
                admin,
            }),
            Err(e) => {
                let database: Option<String> =
                    sqlx::query_scalar("SELECT CAST(DATABASE() AS CHAR)")
                        .fetch_one(&admin)
                        .await?;
                let Some(database) = database else {
                    bail!("cannot create a scratch database ({e}) and the URL names no database");
                };
                let prefix = format!("{name}_");
                eprintln!(
                    "bench: cannot create a scratch database ({e}); using tables prefixed \
                     {prefix} in database {database} instead"
                );
                Ok(Scratch {
                    url: url.to_owned(),
                    area: Area::TablePrefix {
                        prefix: prefix.clone(),
                        database,
                    },
                    base_prefix: prefix,
                    admin,
                })
            }
        }
    }

    /// A one-line description for the start of a run.
    pub fn describe(&self) -> String {
        match &self.area {
            Area::Database { name } => format!("scratch database {name}"),
            Area::TablePrefix { prefix, database } => {
                format!("scratch tables {prefix}* in database {database}")
            }
        }
    }

    /// The schema holding the bench's tables.
    fn schema(&self) -> &str {
        match &self.area {
            Area::Database { name } => name,
            Area::TablePrefix { database, .. } => database,
        }
    }

    /// Drop every table of the scratch area whose name starts with `prefix` (which must start
    /// with the base prefix: nothing outside the bench's area can match).
    pub async fn drop_tables(&self, prefix: &str) -> Result<()> {
        debug_assert!(prefix.starts_with(&self.base_prefix));
        if prefix.is_empty() {
            bail!("refusing to drop tables without a prefix");
        }
        let schema = self.schema().to_owned();
        // Names are filtered here rather than with LIKE, where `_` is a wildcard.
        let names: Vec<String> = sqlx::query(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = ?",
        )
        .bind(&schema)
        .fetch_all(&self.admin)
        .await?
        .iter()
        .map(|r| r.get::<String, _>(0))
        .filter(|t| t.starts_with(prefix))
        .collect();
        if names.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = names.iter().map(|t| format!("`{schema}`.`{t}`")).collect();
        let sql = format!("DROP TABLE IF EXISTS {}", list.join(", "));
        sqlx::query(AssertSqlSafe(sql)).execute(&self.admin).await?;
        Ok(())
    }

    /// Remove the scratch area: the database, or every table under the base prefix.
    pub async fn remove(&self) -> Result<()> {
        let work = async {
            match &self.area {
                Area::Database { name } => {
                    sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`")))
                        .execute(&self.admin)
                        .await?;
                    Ok(())
                }
                Area::TablePrefix { prefix, .. } => self.drop_tables(prefix).await,
            }
        };
        tokio::time::timeout(DROP_TIMEOUT, work)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {DROP_TIMEOUT:?}"))
            .and_then(|r| r)
            .with_context(|| format!("cannot remove the {}", self.describe()))
    }
}

/// `url` with its database replaced by `database`
/// (`mysql://u:p@h:3306/app?ssl-mode=disabled` → `mysql://u:p@h:3306/DATABASE?ssl-mode=disabled`).
pub fn with_database(url: &str, database: &str) -> Result<String> {
    let Some(scheme_end) = url.find("://") else {
        bail!("the database URL has no scheme");
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    let query_at = rest.find('?').unwrap_or(rest.len());
    let path_at = rest[..query_at].find('/').unwrap_or(query_at);
    Ok(format!(
        "{}{}/{database}{}",
        &url[..rest_start],
        &rest[..path_at],
        &rest[query_at..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_the_database() {
        let cases = [
            (
                "mysql://root@127.0.0.1:3306/test",
                "mysql://root@127.0.0.1:3306/x",
            ),
            (
                "mysql://u:p@h/app?ssl-mode=disabled",
                "mysql://u:p@h/x?ssl-mode=disabled",
            ),
            ("mysql://h:3306", "mysql://h:3306/x"),
            ("mysql://h?a=b", "mysql://h/x?a=b"),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x").unwrap(), want, "{url}");
        }
        assert!(with_database("nonsense", "x").is_err());
    }
}
