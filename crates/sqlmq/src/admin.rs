//! Operating a database: the server's facts, the schema, maintenance, grants and processes.
//!
//! These are what [`Client`](crate::Client)'s operator methods return, and what `sqlmq
//! status`, `sqlmq migrate`, `sqlmq grants` and the dashboard print:
//! [`ServerInfo`] and its [`Flavor`] (`Client::server`), [`MigrationReport`]
//! (`Client::migrate`), [`HistoryListLength`] (InnoDB's undo backlog, the one server figure
//! that slows every queue), [`MaintenanceReport`], [`GroupMaintenance`] and
//! [`RetentionReport`] (what housekeeping did: `Queue::maintain`, `Group::maintain`,
//! `Topic::apply_retention`), [`GrantRole`] (the least-privilege grants of a
//! runtime or a migration user) and [`ProcessInfo`] (the workers alive, with their
//! heartbeats). [`validate_name`] checks a queue, topic or group name before it is used.
//!
//! ```no_run
//! # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
//! let report = client.migrate().await?;
//! let server = client.server();
//! println!("{:?} {}: schema {}", server.flavor, server.version, report.to_version);
//! for process in client.processes().await? {
//!     println!("{} ({}) heard from {:?} ago", process.id, process.kind, process.silent_for);
//! }
//! # Ok(()) }
//! ```

pub use crate::domain::{
    Flavor, GrantRole, GroupMaintenance, HistoryListLength, MaintenanceReport, MigrationReport,
    ProcessInfo, RetentionReport, ServerInfo, validate_name,
};
