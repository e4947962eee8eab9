//! [`Run`]: a durable run driven by its receipt, its calls named — for consumers outside the
//! worker runtime: the HTTP API's workers in other languages, a `receive` loop.

use std::time::Duration;

use super::Queue;
use super::durable::Resolution;
use crate::domain::{
    Error, KIND_EVENT, KIND_SLEEP, KIND_STEP, Receipt, Result, Resumed, RunJournal,
    check_durable_name, check_durable_size, check_wait,
};
use crate::store::{Backend, JournalRow};

/// A received message's durable run, by its receipt: record and read steps, sleep, wait for
/// events. The worker's [`JobContext`](crate::JobContext) places its calls by their order in
/// the handler; a `Run`'s calls are found by name instead (unique per kind within a run), so
/// a consumer that asks again after a crash gets what was recorded. Each write holds only
/// while the receipt's lease does ([`Error::LeaseLost`] otherwise, nothing written).
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
/// use std::time::Duration;
/// use sqlmq::flow::Resumed;
/// for d in q.receive(1, Duration::from_secs(60)).await? {
///     let run = q.run(d.receipt());
///     if run.step("charge").await?.is_none() {
///         run.record_step("charge", br#""ch_42""#).await?; // after charging
///     }
///     if run.wait_for_event("order-42-shipped", Duration::from_secs(3 * 86_400)).await?
///         == Resumed::Suspended
///     {
///         continue; // back in the queue until the event or the deadline
///     }
///     run.ack().await?; // the ack, and the journal forgotten
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Run<B: Backend = crate::DefaultBackend> {
    queue: Queue<B>,
    receipt: Receipt,
}

impl<B: Backend> Queue<B> {
    /// The durable run of the message `receipt` holds (see [`Run`]).
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// let run = q.run(d.receipt());
    /// println!("{} steps recorded", run.journal().await?.steps.len());
    /// # Ok(()) }
    /// ```
    pub fn run(&self, receipt: Receipt) -> Run<B> {
        Run {
            queue: self.clone(),
            receipt,
        }
    }
}

impl<B: Backend> Run<B> {
    /// The run's journal and the events it waits for.
    ///
    /// ```no_run
    /// # async fn f(run: sqlmq::queue::Run) -> sqlmq::Result<()> {
    /// for step in run.journal().await?.steps { println!("{} {}", step.name, step.state) }
    /// # Ok(()) }
    /// ```
    pub async fn journal(&self) -> Result<RunJournal> {
        self.queue.client().journal(self.receipt.id).await
    }

    /// The recorded result (JSON) of the step `name`, if it completed.
    ///
    /// ```no_run
    /// # async fn f(run: sqlmq::queue::Run) -> sqlmq::Result<()> {
    /// if let Some(result) = run.step("charge").await? { println!("{}", String::from_utf8_lossy(&result)) }
    /// # Ok(()) }
    /// ```
    pub async fn step(&self, name: &str) -> Result<Option<Vec<u8>>> {
        check_durable_name("step", name)?;
        let rows = self.queue.journal_rows(self.receipt.id).await?;
        Ok(find(&rows, KIND_STEP, name).map(|r| r.result.clone().unwrap_or_default()))
    }

    /// Record the step `name` as completed with `result` (JSON, at most
    /// [`MAX_STEP_RESULT`](crate::flow::MAX_STEP_RESULT) bytes). Returns the result that stands:
    /// `result`, or the one recorded earlier if the step was recorded already (a retry of this
    /// call, or of the whole delivery, records nothing twice).
    ///
    /// ```no_run
    /// # async fn f(run: sqlmq::queue::Run) -> sqlmq::Result<()> {
    /// run.record_step("charge", br#"{"charge":"ch_42"}"#).await?;
    /// # Ok(()) }
    /// ```
    pub async fn record_step(&self, name: &str, result: &[u8]) -> Result<Vec<u8>> {
        check_durable_name("step", name)?;
        check_durable_size(result)?;
        serde_json::from_slice::<serde_json::Value>(result)?;
        let rows = self.queue.journal_rows(self.receipt.id).await?;
        if let Some(row) = find(&rows, KIND_STEP, name) {
            return Ok(row.result.clone().unwrap_or_default());
        }
        let held = self
            .queue
            .record_done_step(self.receipt, next(&rows), name, result)
            .await?;
        if !held {
            return Err(self.lost());
        }
        Ok(result.to_vec())
    }

    /// Sleep `duration` under the name `name` (unique among the run's sleeps): the first call
    /// suspends the run ([`Resumed::Suspended`]: the message is back in the queue until then,
    /// its attempt not spent); a call once the time passed returns [`Resumed::Awake`].
    ///
    /// ```no_run
    /// # async fn f(run: sqlmq::queue::Run) -> sqlmq::Result<()> {
    /// let _ = run.sleep("cool-off", std::time::Duration::from_secs(3600)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn sleep(&self, name: &str, duration: Duration) -> Result<Resumed> {
        check_durable_name("sleep", name)?;
        check_wait("sleep", duration)?;
        let rows = self.queue.journal_rows(self.receipt.id).await?;
        let recorded = find(&rows, KIND_SLEEP, name);
        let seq = recorded.map_or_else(|| next(&rows), |r| r.seq);
        let resolution = self
            .queue
            .sleep_at(self.receipt, seq, name, duration, recorded)
            .await?;
        self.resumed(resolution, |_| Resumed::Awake)
    }

    /// Wait for the event `name` for at most `timeout` from the first call: the payload when it
    /// came ([`Resumed::Event`]), [`Resumed::TimedOut`] when the deadline passed first, and
    /// until either [`Resumed::Suspended`] (the message is back in the queue; the emit puts it
    /// back in line at once). See [`JobContext::wait_for_event`](crate::JobContext::wait_for_event).
    ///
    /// ```no_run
    /// # async fn f(run: sqlmq::queue::Run) -> sqlmq::Result<()> {
    /// let shipped = run.wait_for_event("order-42-shipped", std::time::Duration::from_secs(86_400)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_event(&self, name: &str, timeout: Duration) -> Result<Resumed> {
        check_durable_name("event", name)?;
        check_wait("event wait", timeout)?;
        let rows = self.queue.journal_rows(self.receipt.id).await?;
        let recorded = find(&rows, KIND_EVENT, name);
        let seq = recorded.map_or_else(|| next(&rows), |r| r.seq);
        let resolution = self
            .queue
            .wait_at(self.receipt, seq, name, timeout, recorded)
            .await?;
        self.resumed(resolution, |payload| match payload {
            Some(payload) => Resumed::Event { payload },
            None => Resumed::TimedOut,
        })
    }

    /// Ack the message and forget its run's journal, in one transaction ([`Queue::ack`] acks
    /// alone and leaves the journal to the housekeeping, which removes it within minutes).
    ///
    /// ```no_run
    /// # async fn f(run: sqlmq::queue::Run) -> sqlmq::Result<()> {
    /// run.ack().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack(&self) -> Result<()> {
        self.queue.ack_run(self.receipt).await
    }

    fn resumed(
        &self,
        resolution: Resolution,
        over: impl FnOnce(Option<Vec<u8>>) -> Resumed,
    ) -> Result<Resumed> {
        match resolution {
            Resolution::Over(payload) => Ok(over(payload)),
            Resolution::Suspended => Ok(Resumed::Suspended),
            Resolution::Lost | Resolution::Failed => Err(self.lost()),
        }
    }

    fn lost(&self) -> Error {
        Error::LeaseLost {
            id: self.receipt.id,
            token: self.receipt.token,
        }
    }
}

/// The row of the call of `kind` named `name`.
fn find<'a>(rows: &'a [JournalRow], kind: i16, name: &str) -> Option<&'a JournalRow> {
    rows.iter().find(|r| r.kind == kind && r.name == name)
}

/// The place after the run's last row.
fn next(rows: &[JournalRow]) -> i32 {
    rows.iter().map(|r| r.seq + 1).max().unwrap_or(0)
}
