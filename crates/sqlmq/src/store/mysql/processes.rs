//! The registry of worker processes: registration, heartbeats, and finding the dead.
//!
//! A row per running worker process, keyed by its owner id (`host:pid:random`, the `owner` of
//! the leases it takes). Each heartbeat sets `expires_at` to now plus the silence the process
//! itself allows (three heartbeat intervals), from the database clock; any live process may
//! declare another dead once its `expires_at` has passed and release its leases
//! (`maintain::release_owned`). Each process judging by its own deadline keeps processes with
//! different heartbeat settings correct. Leases stay the authority: a process
//! declared dead by mistake finds its claims gone and its acks rejected (fencing).

use std::time::Duration;

use sqlx::{MySqlConnection, Row};

use super::{MySqlStore, micros};
use crate::domain::ProcessInfo;
use crate::domain::time_from_micros;
use crate::domain::{Error, Result};
use crate::store::Processes;
use crate::store::rows::DeadProcess;
use crate::store::rows::ProcessRegistration;
use sqlx::MySql;

pub(crate) const REGISTER: &str = "INSERT INTO {p}processes \
    (id, kind, host, pid, queues, started_at, heartbeat_at, expires_at) \
    VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), \
    DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)) \
    ON DUPLICATE KEY UPDATE queues = VALUES(queues), heartbeat_at = VALUES(heartbeat_at), \
    expires_at = VALUES(expires_at)";
pub(crate) const HEARTBEAT: &str = "UPDATE {p}processes SET heartbeat_at = UTC_TIMESTAMP(6), \
    expires_at = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) WHERE id = ?";
pub(crate) const DEAD: &str = "SELECT id, queues FROM {p}processes FORCE INDEX (expiry) \
    WHERE expires_at < UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT 100";
/// Delete a process row, but only if it is still silent (it may have come back).
pub(crate) const PRUNE: &str =
    "DELETE FROM {p}processes WHERE id = ? AND expires_at < UTC_TIMESTAMP(6)";
pub(crate) const DEREGISTER: &str = "DELETE FROM {p}processes WHERE id = ?";
const LIST: &str = concat!(
    "SELECT id, kind, host, pid, queues, ",
    micros!("started_at"),
    ", ",
    micros!("heartbeat_at"),
    ", TIMESTAMPDIFF(MICROSECOND, heartbeat_at, UTC_TIMESTAMP(6)) FROM {p}processes ORDER BY started_at"
);

fn queue_ids(json: &str) -> Result<Vec<i32>> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("process queues {json:?}: {e}")))
}

fn utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::Corrupt(format!("process id: {e}")))
}

impl Processes<MySql> for MySqlStore {
    async fn register_process(
        &self,
        conn: &mut MySqlConnection,
        process: &ProcessRegistration<'_>,
    ) -> Result<()> {
        sqlx::query(self.st.get(REGISTER))
            .bind(process.id.as_bytes())
            .bind(process.kind)
            .bind(process.host)
            .bind(process.pid)
            .bind(serde_json::to_string(process.queue_ids)?)
            .bind(process.silence.as_micros() as i64)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Write a heartbeat, pushing the deadline to `silence` from now. Returns false when the row
    /// is gone: another process declared this one dead and released its claims.
    async fn heartbeat(
        &self,
        conn: &mut MySqlConnection,
        id: &str,
        silence: Duration,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(HEARTBEAT))
            .bind(silence.as_micros() as i64)
            .bind(id.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Processes past their deadline.
    async fn dead_processes(&self, conn: &mut MySqlConnection) -> Result<Vec<DeadProcess>> {
        let rows = sqlx::query(self.st.get(DEAD)).fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| {
                Ok(DeadProcess {
                    id: utf8(r.try_get(0)?)?,
                    queue_ids: queue_ids(&r.try_get::<String, _>(1)?)?,
                })
            })
            .collect()
    }

    /// Delete a dead process's row once its claims are released (if it is still silent).
    /// Returns whether this call removed it (so that one reaper, and only while the process
    /// stays silent, releases its claims).
    async fn prune_process(&self, conn: &mut MySqlConnection, id: &str) -> Result<bool> {
        let done = sqlx::query(self.st.get(PRUNE))
            .bind(id.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Remove this process's row (clean shutdown).
    async fn deregister_process(&self, conn: &mut MySqlConnection, id: &str) -> Result<()> {
        sqlx::query(self.st.get(DEREGISTER))
            .bind(id.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Every registered process.
    async fn processes(&self, conn: &mut MySqlConnection) -> Result<Vec<ProcessInfo>> {
        let rows = sqlx::query(self.st.get(LIST)).fetch_all(&mut *conn).await?;
        rows.iter()
            .map(|r| {
                Ok(ProcessInfo {
                    id: utf8(r.try_get(0)?)?,
                    kind: r.try_get(1)?,
                    host: r.try_get(2)?,
                    pid: r.try_get(3)?,
                    queue_ids: queue_ids(&r.try_get::<String, _>(4)?)?,
                    started_at: time_from_micros(r.try_get(5)?),
                    heartbeat_at: time_from_micros(r.try_get(6)?),
                    silent_for: Duration::from_micros(r.try_get::<i64, _>(7)?.max(0) as u64),
                })
            })
            .collect()
    }
}
