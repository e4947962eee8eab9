//! Counts of worker processes, the server's undo history and the wakeup probes (queues and
//! topics are found by their own modules: `queue/lookups.rs`, `topic/lookups.rs`).

use crate::domain::{Error, HistoryListLength, ProcessInfo, Result};
use crate::store::Backend;
use crate::store::rows::{GroupSignal, QueueSignal};

use super::Client;

impl<B: Backend> Client<B> {
    /// The wakeup probe over `queue_ids` (one non-locking query).
    pub(crate) async fn probe(&self, queue_ids: &[i32]) -> Result<Vec<QueueSignal>> {
        if queue_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conns().read().await?;
        self.inner.db.store.probe(&mut conn, queue_ids).await
    }

    /// The wakeup probe over consumer groups `group_ids` (one non-locking query).
    pub(crate) async fn probe_groups(&self, group_ids: &[i32]) -> Result<Vec<GroupSignal>> {
        let mut conn = self.conns().read().await?;
        self.inner.db.store.probe_groups(&mut conn, group_ids).await
    }

    /// Every registered worker process.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for p in client.processes().await? { println!("{} {:?}", p.id, p.silent_for) }
    /// # Ok(()) }
    /// ```
    pub async fn processes(&self) -> Result<Vec<ProcessInfo>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        self.inner.db.store.processes(&mut conn).await
    }

    /// InnoDB's history list length now: the undo logs of committed transactions that purge
    /// has not removed yet, which a long-running transaction anywhere on the server (or a purge
    /// that falls behind) makes grow, and every claim then pays for. One read, no lock, no
    /// schema needed.
    ///
    /// `None` where the database has no such history (SQLite).
    /// [`HistoryListLength::Unavailable`] says why the server would not tell: on MySQL the
    /// figure needs the `PROCESS` privilege, which the runtime grants leave out (`sqlmq grants
    /// --monitoring` prints it); MariaDB reports it to every user. Only an unavailable database
    /// (retryable errors) is an `Err`.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// match client.history_list_length().await? {
    ///     Some(sqlmq::admin::HistoryListLength::Length(n)) => println!("history list length {n}"),
    ///     Some(unavailable) => println!("{unavailable:?}"),
    ///     None => println!("no undo history on this database"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn history_list_length(&self) -> Result<Option<HistoryListLength>> {
        if !B::UNDO_HISTORY {
            return Ok(None);
        }
        let mut conn = self.conns().read().await?;
        let read =
            B::history_list_length(&self.inner.db.store, &mut conn, &self.inner.db.server).await;
        let unavailable = match read {
            Ok(Some(n)) => return Ok(Some(HistoryListLength::Length(n))),
            Ok(None) => "the server reports no history list length (InnoDB's trx_rseg_history_len \
                 counter disabled? innodb_monitor_enable turns it on)"
                .to_owned(),
            Err(Error::PermissionDenied { source, .. }) => format!(
                "the database user may not read it ({source}); `sqlmq grants --monitoring --user \
                 NAME` prints the grant (docs/guide/src/http.md: Alerts)"
            ),
            // The database is unavailable: the caller's outage, as for any other read.
            Err(e) if e.is_retryable() => return Err(e),
            // A server that has no such table or variable: not this call's failure.
            Err(e) => e.to_string(),
        };
        Ok(Some(HistoryListLength::Unavailable(unavailable)))
    }
}
