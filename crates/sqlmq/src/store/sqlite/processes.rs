//! The registry of worker processes: registration, heartbeats, and finding the dead.
//!
//! The rows and rules of the MySQL backend (see its `processes.rs`): a row per running worker
//! process, keyed by its owner id, whose `expires_at` (database clock, microseconds) each
//! heartbeat pushes to now plus the silence the process allows; any live process may declare
//! another dead once that has passed. The engine runs each of these as a single autocommit
//! statement on the writer (reads on a reader): no two writes need to be atomic together, and
//! `prune_process` is one conditional `DELETE`, so of two reapers exactly one removes the row.

use std::time::Duration;

use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, now_us};
use crate::domain::{Error, ProcessInfo, Result, time_from_micros};
use crate::store::Processes;
use crate::store::rows::{DeadProcess, ProcessRegistration};

const REGISTER: &str = concat!(
    "INSERT INTO {p}processes ",
    "(id, kind, host, pid, queues, started_at, heartbeat_at, expires_at) VALUES (?, ?, ?, ?, ?, ",
    now_us!(),
    ", ",
    now_us!(),
    ", ",
    now_us!(),
    " + ?) ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, ",
    "heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at"
);
const HEARTBEAT: &str = concat!(
    "UPDATE {p}processes SET heartbeat_at = ",
    now_us!(),
    ", expires_at = ",
    now_us!(),
    " + ? WHERE id = ?"
);
const DEAD: &str = concat!(
    "SELECT id, queues FROM {p}processes WHERE expires_at < ",
    now_us!(),
    " ORDER BY expires_at LIMIT 100"
);
/// Delete a process row, but only if it is still silent (it may have come back).
const PRUNE: &str = concat!(
    "DELETE FROM {p}processes WHERE id = ? AND expires_at < ",
    now_us!()
);
const DEREGISTER: &str = "DELETE FROM {p}processes WHERE id = ?";
const LIST: &str = concat!(
    "SELECT id, kind, host, pid, queues, started_at, heartbeat_at, ",
    now_us!(),
    " - heartbeat_at FROM {p}processes ORDER BY started_at"
);

fn queue_ids(json: &str) -> Result<Vec<i32>> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("process queues {json:?}: {e}")))
}

fn utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::Corrupt(format!("process id: {e}")))
}

impl Processes<Sqlite> for SqliteStore {
    async fn register_process(
        &self,
        conn: &mut SqliteConnection,
        process: &ProcessRegistration<'_>,
    ) -> Result<()> {
        sqlx::query(self.st.get(REGISTER))
            .bind(process.id.as_bytes())
            .bind(process.kind)
            .bind(process.host)
            .bind(process.pid)
            .bind(serde_json::to_string(process.queue_ids)?)
            .bind(process.silence.as_micros().min(i64::MAX as u128) as i64)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Write a heartbeat, pushing the deadline to `silence` from now. Returns false when the row
    /// is gone: another process declared this one dead and released its claims.
    async fn heartbeat(
        &self,
        conn: &mut SqliteConnection,
        id: &str,
        silence: Duration,
    ) -> Result<bool> {
        let done = sqlx::query(self.st.get(HEARTBEAT))
            .bind(silence.as_micros().min(i64::MAX as u128) as i64)
            .bind(id.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Processes past their deadline.
    async fn dead_processes(&self, conn: &mut SqliteConnection) -> Result<Vec<DeadProcess>> {
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

    /// Delete a dead process's row (if it is still silent). Returns whether this call removed
    /// it (so that one reaper, and only while the process stays silent, releases its claims).
    async fn prune_process(&self, conn: &mut SqliteConnection, id: &str) -> Result<bool> {
        let done = sqlx::query(self.st.get(PRUNE))
            .bind(id.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Remove this process's row (clean shutdown).
    async fn deregister_process(&self, conn: &mut SqliteConnection, id: &str) -> Result<()> {
        sqlx::query(self.st.get(DEREGISTER))
            .bind(id.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Every registered process.
    async fn processes(&self, conn: &mut SqliteConnection) -> Result<Vec<ProcessInfo>> {
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
