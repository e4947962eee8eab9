//! The machine and the MySQL/MariaDB server a run measured, so that every figure travels with
//! the conditions it was measured under.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use sqlx::{MySqlPool, Row};

/// The machine the bench ran on (read from `/proc` and `/etc/os-release` on Linux).
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs this process may use.
    pub cores: usize,
    /// CPU model name.
    pub cpu: Option<String>,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// Operating system name.
    pub os: Option<String>,
}

impl Machine {
    /// Read the machine's facts; unknown ones are left empty.
    pub fn detect() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        let os_release = read("/etc/os-release");
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu: field(&cpuinfo, "model name", ':').map(str::to_owned),
            memory_bytes: field(&meminfo, "MemTotal", ':')
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            os: field(&os_release, "PRETTY_NAME", '=').map(|v| v.trim_matches('"').to_owned()),
        }
    }
}

/// The value of the first `key<sep>value` line of `text`.
fn field<'t>(text: &'t str, key: &str, sep: char) -> Option<&'t str> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(sep)?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The MySQL/MariaDB server: identity and the settings that decide durability and speed.
#[derive(Clone, Debug, Serialize)]
pub struct ServerFacts {
    /// `MySql` or `MariaDb`.
    pub flavor: String,
    /// `VERSION()`.
    pub version: String,
    /// 1 means every commit is flushed to disk.
    pub innodb_flush_log_at_trx_commit: i64,
    /// 1 means the binary log is synced at every commit.
    pub sync_binlog: i64,
    /// Whether the binary log is on.
    pub log_bin: bool,
    /// Binary log format.
    pub binlog_format: String,
    /// Whether commits survive an OS crash with these settings.
    pub durable: bool,
    /// Other settings that shape the figures.
    pub variables: BTreeMap<String, String>,
}

/// Settings reported beside the durability ones (missing ones are left out: they differ
/// between MySQL and MariaDB).
const REPORTED_VARIABLES: &str = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
    ('innodb_buffer_pool_size', 'innodb_flush_method', 'innodb_log_file_size', \
    'innodb_doublewrite', 'innodb_flush_neighbors', 'max_connections', 'max_prepared_stmt_count', \
    'performance_schema', 'transaction_isolation', 'tx_isolation', 'version_comment')";

impl ServerFacts {
    /// The facts the sqlmq client read at connect time, plus a few settings read from `pool`.
    pub async fn read(client: &sqlmq::Client, pool: &MySqlPool) -> Result<ServerFacts> {
        let s = client.server();
        let variables = sqlx::query(REPORTED_VARIABLES)
            .fetch_all(pool)
            .await?
            .iter()
            .filter_map(|r| Some((text(r, 0)?, text(r, 1)?)))
            .collect();
        Ok(ServerFacts {
            flavor: format!("{:?}", s.flavor)
                .replace("MariaDb", "MariaDB")
                .replace("MySql", "MySQL"),
            version: s.version.clone(),
            innodb_flush_log_at_trx_commit: s.innodb_flush_log_at_trx_commit,
            sync_binlog: s.sync_binlog,
            log_bin: s.log_bin,
            binlog_format: s.binlog_format.clone(),
            durable: s.durable(),
            variables,
        })
    }
}

/// A text column that may come back as bytes (SHOW results are binary on some servers).
pub fn text(row: &sqlx::mysql::MySqlRow, idx: usize) -> Option<String> {
    row.try_get::<String, _>(idx).ok().or_else(|| {
        Some(String::from_utf8_lossy(&row.try_get::<Vec<u8>, _>(idx).ok()?).into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_key_value_lines() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC\n";
        assert_eq!(field(text, "model name", ':'), Some("AMD EPYC"));
        assert_eq!(
            field("PRETTY_NAME=\"Debian\"\n", "PRETTY_NAME", '='),
            Some("\"Debian\"")
        );
        assert_eq!(field("", "x", ':'), None);
        let m = Machine::detect();
        assert!(m.cores >= 1);
    }
}
