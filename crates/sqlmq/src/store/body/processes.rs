//! The registry of worker processes: registration, heartbeats, and finding the dead.
//!
//! A row per running worker process, keyed by its owner id (`host:pid:random`, the `owner` of
//! the leases it takes). Each heartbeat sets `expires_at` to now plus the silence the process
//! itself allows (three heartbeat intervals), from the database clock; any live process may
//! declare another dead once its `expires_at` has passed and release its leases. Each process
//! judging by its own deadline keeps processes with different heartbeat settings correct.
//! Leases stay the authority: a process declared dead by mistake finds its claims gone and its
//! acks rejected (fencing). Each method is one autocommit statement: no two writes need to be
//! atomic together, and `prune_process` is one conditional `DELETE`, so of two reapers exactly
//! one removes the row.

use std::time::Duration;

use super::{Columns, SqlStore, Statement};
use crate::domain::{Error, ProcessInfo, Result, micros_of, time_from_micros};
use crate::store::Backend;
use crate::store::rows::{DeadProcess, ProcessRegistration};

/// The registry's statements. Times are the database clock; durations are bound as
/// microseconds.
pub struct ProcessSql {
    /// Insert or refresh a registration: `id, kind, host, pid, queues` (JSON), silence (µs).
    pub register: &'static str,
    /// Push a deadline: silence (µs), id.
    pub heartbeat: &'static str,
    /// Up to 100 processes past their deadline, the longest silent first: `id, queues`.
    pub dead: &'static str,
    /// Delete a registration if it is still past its deadline: id.
    pub prune: &'static str,
    /// Delete a registration: id.
    pub deregister: &'static str,
    /// Every registration, oldest first: `id, kind, host, pid, queues, started (µs),
    /// heartbeat (µs), silent for (µs)`.
    pub list: &'static str,
}

fn queue_ids(json: &str) -> Result<Vec<i32>> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("process queues {json:?}: {e}")))
}

fn utf8(bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::Corrupt(format!("process id: {e}")))
}

/// Registration, heartbeats, and finding the processes that went silent. A process's row says
/// by when (database clock) it must heartbeat again; any live process may declare it dead
/// after that.
impl<B: Backend> SqlStore<B> {
    /// Register (or re-register) a process.
    pub(crate) async fn register_process(
        &self,
        conn: &mut B::Connection,
        process: &ProcessRegistration<'_>,
    ) -> Result<()> {
        self.query(B::PROCESSES.register)
            .arg(process.id.as_bytes())
            .arg(process.kind)
            .arg(process.host)
            .arg(process.pid)
            .arg(serde_json::to_string(process.queue_ids)?)
            .arg(micros_of(process.silence))
            .run(conn)
            .await?;
        Ok(())
    }

    /// Push the process's deadline to `silence` from now. False when its row is gone (a peer
    /// declared it dead and released its claims).
    pub(crate) async fn heartbeat(
        &self,
        conn: &mut B::Connection,
        id: &str,
        silence: Duration,
    ) -> Result<bool> {
        let done = self
            .query(B::PROCESSES.heartbeat)
            .arg(micros_of(silence))
            .arg(id.as_bytes())
            .run(conn)
            .await?;
        Ok(done == 1)
    }

    /// Processes past their deadline.
    pub(crate) async fn dead_processes(
        &self,
        conn: &mut B::Connection,
    ) -> Result<Vec<DeadProcess>> {
        let rows = self.query(B::PROCESSES.dead).rows(conn).await?;
        rows.iter()
            .map(|r| {
                Ok(DeadProcess {
                    id: utf8(r.col(0)?)?,
                    queue_ids: queue_ids(&r.col::<String>(1)?)?,
                })
            })
            .collect()
    }

    /// Delete a process's row if it is still past its deadline. True for the one caller that
    /// removed it (only that one releases its claims).
    pub(crate) async fn prune_process(&self, conn: &mut B::Connection, id: &str) -> Result<bool> {
        let done = self
            .query(B::PROCESSES.prune)
            .arg(id.as_bytes())
            .run(conn)
            .await?;
        Ok(done == 1)
    }

    /// Remove a process's row (clean shutdown).
    pub(crate) async fn deregister_process(
        &self,
        conn: &mut B::Connection,
        id: &str,
    ) -> Result<()> {
        self.query(B::PROCESSES.deregister)
            .arg(id.as_bytes())
            .run(conn)
            .await?;
        Ok(())
    }

    /// Every registered process.
    pub(crate) async fn processes(&self, conn: &mut B::Connection) -> Result<Vec<ProcessInfo>> {
        let rows = self.query(B::PROCESSES.list).rows(conn).await?;
        rows.iter()
            .map(|r| {
                Ok(ProcessInfo {
                    id: utf8(r.col(0)?)?,
                    kind: r.col(1)?,
                    host: r.col(2)?,
                    pid: r.col(3)?,
                    queue_ids: queue_ids(&r.col::<String>(4)?)?,
                    started_at: time_from_micros(r.col(5)?),
                    heartbeat_at: time_from_micros(r.col(6)?),
                    silent_for: crate::domain::duration_from_micros(r.col(7)?),
                })
            })
            .collect()
    }
}
