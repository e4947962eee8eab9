//! Looking at durable runs: a run's journal ([`Client::journal`]) and the events runs wait
//! for ([`Client::awaited_events`]).

use crate::client::Client;
use crate::domain::{
    AwaitedEvent, MessageId, Result, RunJournal, RunStep, RunStepState, StepKind, WaitingRun,
    time_from_micros,
};
use crate::store::{Backend, JournalRow};

/// The public form of a stored journal row.
pub(crate) fn step_of(row: &JournalRow) -> RunStep {
    RunStep {
        seq: row.seq.max(0) as u32,
        name: row.name.clone(),
        kind: StepKind::of_code(row.kind),
        state: RunStepState::of_code(row.state),
        recorded_at: time_from_micros(row.recorded_at_us),
        wake_at: row.wake_at_us.map(time_from_micros),
        result_bytes: row.result.as_ref().map_or(0, |r| r.len() as u64),
    }
}

impl<B: Backend> Client<B> {
    /// The journal of message `id`'s durable run — its steps, sleeps and event waits in order —
    /// and the events it waits for. Empty when the message made no durable call or its run
    /// ended with an ack.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::MessageId) -> sqlmq::Result<()> {
    /// for step in client.journal(id).await?.steps {
    ///     println!("{} {:?} {}", step.kind, step.name, step.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn journal(&self, id: MessageId) -> Result<RunJournal> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let store = self.store();
        let rows = store.journal(&mut conn, id).await?;
        let waiting_for = store.waits_of(&mut conn, id).await?;
        Ok(RunJournal {
            steps: rows.iter().map(step_of).collect(),
            waiting_for,
        })
    }

    /// The events suspended runs wait for, with how many wait and since when, the longest
    /// awaited first (at most `limit`).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for e in client.awaited_events(20).await? {
    ///     println!("{}: {} runs", e.name, e.runs);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn awaited_events(&self, limit: usize) -> Result<Vec<AwaitedEvent>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self.store().awaited_events(&mut conn, limit).await?;
        Ok(rows
            .into_iter()
            .map(|(name, runs, since)| AwaitedEvent {
                name,
                runs: runs.max(0) as u64,
                since: time_from_micros(since),
            })
            .collect())
    }

    /// The runs suspended waiting for the event `name`, the longest waiting first (at most
    /// `limit`).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let waiting = client.runs_waiting_for("order-42-shipped", 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn runs_waiting_for(&self, name: &str, limit: usize) -> Result<Vec<WaitingRun>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self.store().waiting_runs(&mut conn, name, limit).await?;
        Ok(rows
            .into_iter()
            .map(|(id, queue, since)| WaitingRun {
                id,
                queue,
                since: time_from_micros(since),
            })
            .collect())
    }
}
