//! The worker process registry: liveness without a master.

use std::future::Future;
use std::time::Duration;

use super::Backend;
use super::rows::{DeadProcess, ProcessRegistration};
use crate::domain::{ProcessInfo, Result};

/// Registration, heartbeats, and finding the processes that went silent. A process's row says
/// by when (database clock) it must heartbeat again; any live process may declare it dead
/// after that.
pub trait Processes<B: Backend> {
    /// Register (or re-register) a process.
    fn register_process(
        &self,
        conn: &mut B::Connection,
        registration: &ProcessRegistration<'_>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Push the process's deadline to `silence` from now. False when its row is gone (a peer
    /// declared it dead and released its claims).
    fn heartbeat(
        &self,
        conn: &mut B::Connection,
        id: &str,
        silence: Duration,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Processes past their deadline.
    fn dead_processes(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<Vec<DeadProcess>>> + Send;

    /// Delete a process's row if it is still past its deadline. True for the one caller that
    /// removed it (only that one releases its claims).
    fn prune_process(
        &self,
        conn: &mut B::Connection,
        id: &str,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Remove a process's row (clean shutdown).
    fn deregister_process(
        &self,
        conn: &mut B::Connection,
        id: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Every registered process.
    fn processes(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<Vec<ProcessInfo>>> + Send;
}
