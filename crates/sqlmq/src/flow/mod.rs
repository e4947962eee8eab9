//! Batches and workflows: messages sent together, with callbacks when all of them end
//! ([`Batch::on_success`], `on_complete`), steps that wait for the steps they depend on, and
//! results a step's ack leaves for the steps after it ([`DependencyResult`]).
//! [`Client::create_batch`](crate::Client::create_batch) sends a [`Batch`] in one transaction;
//! [`BatchStatus`] tells how far it is.
//!
//! ```no_run
//! use sqlmq::Message;
//! use sqlmq::flow::Batch;
//!
//! # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
//! let mut batch = Batch::new().on_success("emails", Message::new("album ready"));
//! for photo in ["a.jpg", "b.jpg"] {
//!     batch = batch.add("thumbnails", Message::new(photo));
//! }
//! let created = client.create_batch(batch).await?;
//! println!("{:?}", client.batch(created.id).await?.state);
//! # Ok(()) }
//! ```
//!
//! ## Inside
//!
//! [`Client`] methods, here so that the client and queue modules know nothing of them,
//! results (`results.rs`), and durable runs' events (`events.rs`; the runs' steps,
//! sleeps and waits are [`JobContext`](crate::JobContext)'s).
//!
//! A batch is sent in one transaction: its row (open), its members queue by queue in an
//! order where every step comes after the steps it depends on (so that each dependency's
//! node exists when its dependant is recorded), its callbacks (waiting for the batch), then
//! the seal. What happens when members end is the store's (`store/body/flows.rs`): it is
//! recorded in the transaction of each end, which is what makes every callback fire exactly
//! once.

mod events;
mod results;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::client::Client;
use crate::domain::{Error, FlowPart, Message, Result, Sent};
use crate::queue::Queue;
use crate::store::Backend;
use crate::store::rows::ParkedRecord;
use crate::tx;

pub use crate::domain::{
    AwaitedEvent, BATCH_HEADER, Batch, BatchCreated, BatchId, BatchState, BatchStatus, BatchStep,
    ChildRun, Emitted, FLOW_RETENTION, MAX_RESULT_BYTES, MAX_STEP_RESULT, PARENT_HEADER, Resumed,
    Role, RunJournal, RunStep, RunStepState, StepKind, StepState, WaitingRun,
};
pub use results::DependencyResult;

/// Messages for one queue, in the order they are sent.
type Run<B> = (Queue<B>, Vec<Message>);

impl<B: Backend> Client<B> {
    /// Create a batch: its members (to one or several queues) and callbacks in one
    /// transaction — at commit every member is visible at once, on any error none is. Every
    /// named queue must exist. See [`Batch`] for the callbacks and workflows.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// use sqlmq::Message;
    /// use sqlmq::flow::Batch;
    /// let mut batch = Batch::new().on_success("emails", Message::new("album ready"));
    /// for photo in ["a.jpg", "b.jpg"] {
    ///     batch = batch.add("thumbnails", Message::new(photo));
    /// }
    /// let created = client.create_batch(batch).await?;
    /// println!("batch {} of {}", created.id, created.members.len());
    /// # Ok(()) }
    /// ```
    pub async fn create_batch(&self, batch: Batch) -> Result<BatchCreated> {
        let (plan, created) = self.plan_batch(batch).await?;
        let (plan, ids) = (&plan, &created.members);
        let written: Mutex<bool> = Mutex::default();
        let written = &written;
        tx::run_resolving(
            self.conns(),
            "batch",
            |conn, _| {
                Box::pin(async move {
                    self.write_batch(conn, plan).await?;
                    *written.lock().expect("poisoned") = true;
                    Ok(())
                })
            },
            // A lost COMMIT: the batch is all or nothing; its row tells.
            |conn, _| {
                Box::pin(async move {
                    let status = self.store().batch_status(conn, plan.id).await?;
                    Ok(status.is_some() || ids.is_empty() && !*written.lock().expect("poisoned"))
                })
            },
        )
        .await?;
        Ok(created)
    }

    /// Create a batch inside the caller's transaction (see [`Client::create_batch`]): it
    /// exists when that transaction commits, and not at all if it rolls back.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// let batch = sqlmq::flow::Batch::new().add("jobs", sqlmq::Message::new("x"));
    /// client.create_batch_in(&mut tx, batch).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_batch_in(
        &self,
        conn: &mut B::Connection,
        batch: Batch,
    ) -> Result<BatchCreated> {
        let (plan, created) = self.plan_batch(batch).await?;
        let plan = &plan;
        tx::run_in::<B, _, _>(conn, |conn, _| Box::pin(self.write_batch(conn, plan))).await?;
        Ok(created)
    }

    /// Add members to an open batch (a running member may fan out more work into its own
    /// batch): sent to `queue` in one transaction. Fails with
    /// [`Error::BatchSealed`] once the batch is sealed.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> sqlmq::Result<()> {
    /// client.add_to_batch(id, "thumbnails", vec![sqlmq::Message::new("c.jpg")]).await?;
    /// client.seal_batch(id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_to_batch(
        &self,
        id: BatchId,
        queue: &str,
        messages: Vec<Message>,
    ) -> Result<Vec<Sent>> {
        let (queue, messages) = self.new_members(id, queue, messages).await?;
        let (queue, messages) = (&queue, &messages);
        tx::run(self.conns(), "batch_add", |conn, _| {
            Box::pin(queue.send_on(conn, messages))
        })
        .await
    }

    /// [`Client::add_to_batch`] inside the caller's transaction — a member's handler adds to
    /// its batch in the transaction of its ack, so the work and its follow-ups commit together.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// client.add_to_batch_in(&mut tx, id, "jobs", vec![sqlmq::Message::new("more")]).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_to_batch_in(
        &self,
        conn: &mut B::Connection,
        id: BatchId,
        queue: &str,
        messages: Vec<Message>,
    ) -> Result<Vec<Sent>> {
        let (queue, messages) = self.new_members(id, queue, messages).await?;
        let (queue, messages) = (&queue, &messages);
        tx::run_in::<B, _, _>(conn, |conn, _| Box::pin(queue.send_on(conn, messages))).await
    }

    /// Seal an open batch: no more members; it finishes (and sends its callbacks) when its
    /// last member does, or now if none is pending. Sealing a sealed or finished batch does
    /// nothing.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> sqlmq::Result<()> {
    /// client.seal_batch(id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn seal_batch(&self, id: BatchId) -> Result<()> {
        self.require_schema()?;
        tx::run(self.conns(), "batch_seal", |conn, _| {
            Box::pin(self.seal_on(conn, id))
        })
        .await
    }

    /// [`Client::seal_batch`] inside the caller's transaction.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// client.seal_batch_in(&mut tx, id).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn seal_batch_in(&self, conn: &mut B::Connection, id: BatchId) -> Result<()> {
        self.require_schema()?;
        tx::run_in::<B, _, _>(conn, |conn, _| Box::pin(self.seal_on(conn, id))).await
    }

    /// A batch's progress: its counts, and each member and callback with its state and
    /// dependencies. Fails with [`Error::BatchNotFound`] for an
    /// unknown batch (or one past the flow retention, [`FLOW_RETENTION`]).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, id: sqlmq::flow::BatchId) -> sqlmq::Result<()> {
    /// let b = client.batch(id).await?;
    /// println!("{:?}: {} of {} done, {} dead", b.state, b.succeeded, b.members, b.dead);
    /// # Ok(()) }
    /// ```
    pub async fn batch(&self, id: BatchId) -> Result<BatchStatus> {
        self.require_schema()?;
        let store = self.store();
        tx::snapshot(self.conns(), |conn, _| {
            Box::pin(async move { store.batch_status(conn, id).await })
        })
        .await?
        .ok_or(Error::BatchNotFound(id))
    }

    /// Batches and workflows with their counts (their steps: [`Client::batch`]), the newest
    /// first, up to `limit` (1 to [`Client::MAX_BATCH_LIST`]): of one `state`, or with `None`
    /// the unfinished ones (open, then sealed) followed by the ones finished most recently —
    /// finished ones are kept for the flow retention ([`FLOW_RETENTION`]). For an operator who
    /// does not know a batch's id.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for b in client.batches(None, 50).await? {
    ///     println!("{} {:?}: {} of {} done, {} dead", b.id, b.state, b.succeeded, b.members, b.dead);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn batches(
        &self,
        state: Option<BatchState>,
        limit: usize,
    ) -> Result<Vec<BatchStatus>> {
        self.require_schema()?;
        if limit == 0 || limit > Client::MAX_BATCH_LIST {
            return Err(Error::InvalidArgument(format!(
                "a list of batches holds 1 to {} batches, not {limit}",
                Client::MAX_BATCH_LIST
            )));
        }
        let states = match state {
            Some(state) => vec![state],
            None => vec![BatchState::Open, BatchState::Sealed, BatchState::Finished],
        };
        let store = self.store();
        tx::snapshot(self.conns(), |conn, _| {
            let states = states.clone();
            Box::pin(async move {
                let mut found = Vec::new();
                for state in states {
                    let left = limit - found.len();
                    if left == 0 {
                        break;
                    }
                    found.extend(store.batches(conn, state, left).await?);
                }
                Ok(found)
            })
        })
        .await
    }

    /// The queue named `queue`, and `messages` checked as new members of batch `id`.
    async fn new_members(
        &self,
        id: BatchId,
        queue: &str,
        messages: Vec<Message>,
    ) -> Result<(Queue<B>, Vec<Message>)> {
        let queue = self.queue(queue).await?;
        let messages = tag_members(id, messages);
        queue.check_messages(&messages)?;
        Ok((queue, messages))
    }

    async fn seal_on(&self, conn: &mut B::Connection, id: BatchId) -> Result<()> {
        if !self.store().seal_batch_row(conn, id).await?
            && self.store().batch_status(conn, id).await?.is_none()
        {
            return Err(Error::BatchNotFound(id));
        }
        Ok(())
    }

    /// Check a batch and look its queues up: the runs to send, in order, and what creating
    /// it returns.
    async fn plan_batch(&self, mut batch: Batch) -> Result<(Plan<B>, BatchCreated)> {
        self.require_schema()?;
        let (deps, order) = batch.prepare()?;
        let mut queues: HashMap<String, Queue<B>> = HashMap::new();
        for (p, _) in &batch.members {
            if !queues.contains_key(&p.queue) {
                queues.insert(p.queue.clone(), self.queue(&p.queue).await?);
            }
        }
        for (_, p) in &batch.callbacks {
            if !queues.contains_key(&p.queue) {
                queues.insert(p.queue.clone(), self.queue(&p.queue).await?);
            }
        }
        let created = BatchCreated {
            id: batch.id,
            members: batch.members.iter().map(|(p, _)| p.message.id).collect(),
            steps: batch
                .members
                .iter()
                .filter_map(|(p, _)| {
                    let step = p.message.flow.as_ref()?.step.clone()?;
                    Some((step, p.message.id))
                })
                .collect::<BTreeMap<_, _>>(),
        };
        let mut members: Vec<Option<Message>> = Vec::with_capacity(batch.members.len());
        for ((p, _), ds) in batch.members.iter_mut().zip(deps) {
            let m = std::mem::replace(&mut p.message, Message::new(""));
            members.push(Some(m.depends_on(ds)));
        }
        let mut runs: Vec<Run<B>> = Vec::new();
        for i in order {
            let queue = &queues[&batch.members[i].0.queue];
            let m = members[i].take().expect("each member once");
            match runs.last_mut() {
                Some((q, ms)) if q.id() == queue.id() => ms.push(m),
                _ => runs.push((queue.clone(), vec![m])),
            }
        }
        let callbacks = batch
            .callbacks
            .into_iter()
            .map(|(_, p)| (queues[&p.queue].clone(), vec![p.message]))
            .collect();
        for (q, ms) in runs.iter().chain(&callbacks) {
            q.check_messages(ms)?;
        }
        let mut records = Vec::with_capacity(batch.records.len());
        for (role, name, record) in batch.records {
            let topic = self.topic(&name).await?;
            topic.check(std::slice::from_ref(&record))?;
            let headers = (!record.headers.is_empty())
                .then(|| serde_json::to_string(&record.headers))
                .transpose()?;
            records.push(ParkedRecord {
                id: record.id,
                role,
                topic_id: topic.id(),
                partition: record.partition_of(topic.config().partitions) as i32,
                key: record.key,
                headers,
                body: record.body,
            });
        }
        Ok((
            Plan {
                id: batch.id,
                open: batch.open,
                runs,
                callbacks,
                records,
            },
            created,
        ))
    }

    /// Write a planned batch in `conn`'s transaction.
    async fn write_batch(&self, conn: &mut B::Connection, plan: &Plan<B>) -> Result<()> {
        self.store().create_batch_row(conn, plan.id, true).await?;
        self.store()
            .park_records(conn, plan.id, &plan.records)
            .await?;
        for (queue, messages) in plan.runs.iter().chain(&plan.callbacks) {
            // A message already stored (its id, or its idempotency key within the queue's
            // window) would not join the batch: refused, and the batch with it.
            if let Some(s) = queue
                .send_on(conn, messages)
                .await?
                .iter()
                .find(|s| s.duplicate)
            {
                return Err(Error::InvalidArgument(format!(
                    "message {} is stored already (its id or its idempotency key): it cannot \
                     join a new batch",
                    s.id
                )));
            }
        }
        if !plan.open {
            self.store().seal_batch_row(conn, plan.id).await?;
        }
        Ok(())
    }
}

/// A batch ready to write: its runs of members (each a queue and its messages, every step
/// after its dependencies) and its callbacks.
struct Plan<B: Backend> {
    id: BatchId,
    open: bool,
    runs: Vec<Run<B>>,
    callbacks: Vec<Run<B>>,
    /// Callbacks to topics, kept until the batch finishes.
    records: Vec<ParkedRecord>,
}

/// Members of batch `id`.
fn tag_members(id: BatchId, messages: Vec<Message>) -> Vec<Message> {
    messages
        .into_iter()
        .map(|mut m| {
            m.flow = Some(FlowPart {
                batch: Some(id),
                step: None,
                role: Role::Member,
            });
            m
        })
        .collect()
}
