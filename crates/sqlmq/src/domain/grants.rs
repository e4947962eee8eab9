//! Least privilege: the two kinds of database users sqlmq expects, and what each may do.
//!
//! Everyday use (sending, claiming, acknowledging, publishing, consuming, housekeeping) runs
//! data statements only, so the application's user needs no DDL right. Creating and upgrading
//! the schema is the migration user's job. [`Client::grants`](crate::Client::grants) prints the
//! GRANT statements of each for the database and table prefix of a client.

/// Which user a list of grants is for.
///
/// ```
/// use sqlmq::admin::GrantRole;
/// assert_ne!(GrantRole::Runtime, GrantRole::Migration);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantRole {
    /// The application's user: `SELECT, INSERT, UPDATE, DELETE` on sqlmq's tables (only
    /// `SELECT` on the schema-version table), no DDL.
    Runtime,
    /// The user that runs `sqlmq migrate`: the runtime grants plus `CREATE, ALTER, INDEX` on the
    /// database (migrations create tables; later versions may alter them or add indexes).
    Migration,
    /// What notifications need besides the runtime grants, on MySQL/MariaDB: reading the
    /// server's binary log (`REPLICATION SLAVE`) and where it ends (`BINLOG MONITOR` on MariaDB,
    /// `REPLICATION CLIENT` on MySQL), server-wide. Optional: without them waiting consumers
    /// poll ([`ClientBuilder::notifications`](crate::client::ClientBuilder::notifications)). The binary
    /// log carries every database's row changes, so grant it where that is acceptable.
    Notifications,
    /// What reading InnoDB's history list length needs besides the runtime grants
    /// ([`Client::history_list_length`](crate::Client::history_list_length), `sqlmq serve`'s
    /// gauge `sqlmq_innodb_history_list_length` and its alert): on MySQL the `PROCESS`
    /// privilege, server-wide; nothing on MariaDB, which reports the figure to every user.
    /// Optional: without it the figure is reported unavailable. `PROCESS` also shows every
    /// session's statements (the process list, `information_schema.INNODB_TRX`), so it is not
    /// part of the runtime grants: give it to the user `sqlmq serve` runs as, where that is
    /// acceptable.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for grant in client.grants(sqlmq::admin::GrantRole::Monitoring, "serve", "%").await? {
    ///     println!("{grant}"); // MySQL: GRANT PROCESS ON *.* TO 'serve'@'%';
    /// }
    /// # Ok(()) }
    /// ```
    Monitoring,
}

/// What a refused everyday call needs (the `needs` of [`Error::PermissionDenied`](crate::Error)).
pub(crate) const RUNTIME_GRANTS_NEEDED: &str = "everyday use needs SELECT, INSERT, UPDATE and \
    DELETE on sqlmq's tables (`sqlmq grants --user NAME` prints the GRANT statements; docs/guide/src/operations.md: \
    Least privilege)";

/// What a refused `migrate` needs.
pub(crate) const MIGRATION_GRANTS_NEEDED: &str = "`migrate` creates and upgrades tables: run it \
    as a user with CREATE, ALTER, INDEX, CREATE ROUTINE and ALTER ROUTINE on the database \
    besides the runtime grants \
    (`sqlmq grants --migration --user NAME` prints them; docs/guide/src/operations.md: Least privilege)";
