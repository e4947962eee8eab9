//! Facts about the database server ([`ServerInfo`]).

use serde::Serialize;

/// The database sqlmq runs on: MySQL, MariaDB or SQLite.
///
/// ```
/// # fn f(client: sqlmq::Client) {
/// if client.server().flavor == sqlmq::admin::Flavor::MariaDb { println!("MariaDB") }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Flavor {
    /// Oracle MySQL (or a compatible fork reporting itself as MySQL, such as Percona Server).
    MySql,
    /// MariaDB.
    MariaDb,
    /// SQLite (the library linked into this program).
    Sqlite,
}

/// Facts about the server, read at connect time.
///
/// ```
/// # fn f(client: sqlmq::Client) {
/// let s = client.server();
/// println!("{:?} {} (durable: {})", s.flavor, s.version, s.warnings.is_empty());
/// # }
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ServerInfo {
    /// MySQL, MariaDB or SQLite.
    pub flavor: Flavor,
    /// `VERSION()`, e.g. `10.11.19-MariaDB-0+deb12u1` (SQLite: `sqlite_version()`).
    pub version: String,
    /// Parsed (major, minor, patch).
    pub version_number: (u32, u32, u32),
    /// `@@innodb_flush_log_at_trx_commit` (1 for durable commits).
    pub innodb_flush_log_at_trx_commit: i64,
    /// `@@sync_binlog` (1 for durable commits when the binary log is on).
    pub sync_binlog: i64,
    /// Whether the binary log is on.
    pub log_bin: bool,
    /// `@@binlog_format`.
    pub binlog_format: String,
    /// `@@max_allowed_packet` in bytes (SQLite: the largest statement sqlmq builds).
    pub max_allowed_packet: u64,
    /// Whether the server is a node of a Galera cluster (`wsrep_on`; SQLite: never).
    pub galera: bool,
    /// Durability warnings (empty when commits are durable).
    pub warnings: Vec<String>,
}

impl ServerInfo {
    /// Whether commits survive an OS crash with these settings.
    ///
    /// ```
    /// # fn f(client: sqlmq::Client) { assert_eq!(client.server().durable(), client.server().warnings.is_empty()); }
    /// ```
    pub fn durable(&self) -> bool {
        self.warnings.is_empty()
    }
}

/// InnoDB's history list length: the undo logs of committed transactions that purge has not
/// removed yet ([`Client::history_list_length`](crate::Client::history_list_length)).
///
/// It stays small (hundreds) while every transaction is short, as sqlmq's are; it grows while
/// a transaction anywhere on the server stays open (its read view keeps every later row version
/// alive) or purge falls behind the writes. A queue suffers from it: a claim reads the head of
/// `ready`, where the rows of claimed messages linger delete-marked until purged.
///
/// ```
/// use sqlmq::admin::HistoryListLength;
/// # fn f(h: HistoryListLength) {
/// match h {
///     HistoryListLength::Length(n) => println!("{n} undo logs not purged yet"),
///     HistoryListLength::Unavailable(why) => println!("not available: {why}"),
///     _ => {}
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum HistoryListLength {
    /// The undo logs of committed transactions not purged yet.
    Length(u64),
    /// The server would not tell this client's user, or does not report the figure: why, and
    /// what would let it (on MySQL, the `PROCESS` privilege: `sqlmq grants --monitoring`).
    Unavailable(String),
}

impl HistoryListLength {
    /// The length, when the server reported it.
    ///
    /// ```
    /// use sqlmq::admin::HistoryListLength;
    /// assert_eq!(HistoryListLength::Length(42).length(), Some(42));
    /// assert_eq!(HistoryListLength::Unavailable("no".into()).length(), None);
    /// ```
    pub fn length(&self) -> Option<u64> {
        match self {
            HistoryListLength::Length(n) => Some(*n),
            HistoryListLength::Unavailable(_) => None,
        }
    }
}
