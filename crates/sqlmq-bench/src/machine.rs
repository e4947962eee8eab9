//! The machine and the database a run measured (a MySQL/MariaDB server, or SQLite and the
//! settings of sqlmq's connections to it), so that every figure travels with the conditions it
//! was measured under. Each backend reads its own facts (`backend/`).

use std::collections::BTreeMap;

use serde::Serialize;

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

/// The database a run measured, as its backend reports it. Serialized without a tag: the
/// fields say which it is (`flavor`).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ServerFacts {
    /// A MySQL/MariaDB server.
    MySql(MySqlFacts),
    /// The SQLite library linked into the bench.
    Sqlite(SqliteFacts),
}

/// The MySQL/MariaDB server: identity and the settings that decide durability and speed.
#[derive(Clone, Debug, Serialize)]
pub struct MySqlFacts {
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

/// SQLite: the library's version and the settings of the connections sqlmq opens, which
/// decide durability and speed there. It has no server, hence no server variables.
#[derive(Clone, Debug, Serialize)]
pub struct SqliteFacts {
    /// `SQLite`.
    pub flavor: &'static str,
    /// `sqlite_version()`.
    pub version: String,
    /// `PRAGMA journal_mode` (`wal`: readers never block the writer).
    pub journal_mode: String,
    /// `PRAGMA synchronous` by name (`FULL`: a commit is on disk when it returns).
    pub synchronous: String,
    /// `PRAGMA busy_timeout`: how long a writer waits for the file's write lock.
    pub busy_timeout_ms: i64,
    /// How sqlmq writes: one writer connection per client, so writes of one process take turns.
    pub writers: &'static str,
    /// Whether commits survive an OS crash with these settings.
    pub durable: bool,
    /// Why there are no server variables to report.
    pub variables: String,
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
