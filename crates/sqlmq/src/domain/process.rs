//! A registered worker process ([`ProcessInfo`]).

use std::time::Duration;

use serde::Serialize;

/// A registered worker process.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// for p in client.processes().await? {
///     println!("{} on {} (pid {}), last seen {:?} ago", p.id, p.host, p.pid, p.silent_for);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Owner id: `host:pid:random`.
    pub id: String,
    /// What kind of process (`worker`).
    pub kind: String,
    /// Host name.
    pub host: String,
    /// Process id on its host.
    pub pid: i32,
    /// Ids of the queues it consumes.
    pub queue_ids: Vec<i32>,
    /// When it registered (database clock).
    #[serde(serialize_with = "super::json_time::time")]
    pub started_at: std::time::SystemTime,
    /// Its last heartbeat (database clock).
    #[serde(serialize_with = "super::json_time::time")]
    pub heartbeat_at: std::time::SystemTime,
    /// Time since its last heartbeat.
    #[serde(rename = "heartbeat_age_ms", with = "super::millis")]
    pub silent_for: Duration,
}
