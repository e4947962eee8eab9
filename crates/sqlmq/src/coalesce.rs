//! Group commit of single writes: `Queue::send` and `Topic::publish` calls made at about the
//! same time through one handle (and its clones) share one transaction, one round trip and
//! one commit.
//!
//! Why: a single send or publish on its own pays a whole transaction for one message, and with
//! many producers the server spends its time opening and committing transactions rather than
//! writing rows (docs/design/round-trips.md). Kafka's producer and River's batched
//! inserts gather concurrent writes the same way.
//!
//! Batching is natural rather than timed, as the worker's acker does it: a background task
//! takes every write that is waiting (up to [`MAX_WRITES`]) and commits them together, while
//! at most [`IN_FLIGHT`] such commits run at once. A lone write goes at once — no write ever
//! waits for a linger — and writes gather only while earlier commits are in flight, so the
//! busier the handle, the more each commit carries.
//!
//! Each write still has an outcome of its own. The shared batch goes through the same path as
//! `send_batch` / `publish_batch`, which answers per message (a resent id is a duplicate, the
//! others are written). If the shared batch fails as a whole, every write in it is made again
//! on its own, concurrently — exactly what would have happened without coalescing — so one
//! message can never fail another.
//!
//! A write whose caller stops waiting before its batch is taken is left out of the batch; once
//! taken, it is made whether or not anyone still waits for the answer (as with any request
//! whose reply is lost).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;

use crate::domain::{Error, ErrorClass, Result};

/// Most writes committed together.
pub(crate) const MAX_WRITES: usize = 256;

/// Most shared commits of one handle running at once. One would gather the most per commit
/// but leave the next batch waiting for a whole round trip; two let a batch form while the
/// previous one commits (measured: docs/BENCHMARKS.md, "Group commit of single sends").
pub(crate) const IN_FLIGHT: usize = 2;

/// Where coalesced writes go: a queue (messages) or a topic (records).
pub(crate) trait Sink: Clone + Send + Sync + 'static {
    /// One write.
    type Item: Send + 'static;
    /// Its answer.
    type Answer: Send + 'static;

    /// Write `items` (checked already, not empty) atomically in a transaction of our own,
    /// answering each in order.
    fn write(&self, items: &[Self::Item])
    -> impl Future<Output = Result<Vec<Self::Answer>>> + Send;
}

/// A write waiting for its batch: the item and where its answer goes.
type Pending<S> = (
    <S as Sink>::Item,
    oneshot::Sender<Result<<S as Sink>::Answer>>,
);

/// The writers' handle to a sink's coalescing task. Dropping it ends the task once what it
/// took is committed.
pub(crate) struct Coalescer<S: Sink> {
    requests: mpsc::UnboundedSender<Pending<S>>,
}

impl<S: Sink> Coalescer<S> {
    /// Start the task that commits `sink`'s coalesced writes. Give it a handle of its own
    /// (not the one that owns this coalescer), so that the task ends with the last user's
    /// handle.
    pub(crate) fn start(sink: S) -> Coalescer<S> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(sink, rx));
        Coalescer { requests: tx }
    }

    /// Write `item` with whatever else is waiting. The unbounded channel holds at most one
    /// item per waiting caller.
    pub(crate) async fn write(&self, item: S::Item) -> Result<S::Answer> {
        let (tx, rx) = oneshot::channel();
        if self.requests.send((item, tx)).is_err() {
            return Err(crashed());
        }
        // A dropped reply means the task that took the item ended without answering (a panic,
        // or the runtime shutting down): whether it was written is unknown.
        rx.await.unwrap_or_else(|_| Err(crashed()))
    }
}

/// The error of a write whose batch ended without an answer.
fn crashed() -> Error {
    Error::Database {
        class: ErrorClass::Reconnect,
        source: sqlx::Error::WorkerCrashed,
    }
}

async fn run<S: Sink>(sink: S, mut requests: mpsc::UnboundedReceiver<Pending<S>>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        // Take a slot before taking writes, so that writes gather while every slot is busy.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let mut batch = Vec::with_capacity(MAX_WRITES);
        if requests.recv_many(&mut batch, MAX_WRITES).await == 0 {
            return;
        }
        let sink = sink.clone();
        tokio::spawn(async move {
            commit(&sink, batch).await;
            drop(slot);
        });
    }
}

/// Commit `batch` as one write and answer each caller; when it fails as a whole, make each
/// write on its own.
async fn commit<S: Sink>(sink: &S, batch: Vec<Pending<S>>) {
    let (items, replies): (Vec<S::Item>, Vec<_>) = batch
        .into_iter()
        .filter(|(_, reply)| !reply.is_closed())
        .unzip();
    match items.len() {
        0 => {}
        1 => answer(replies, sink.write(&items).await),
        _ => match sink.write(&items).await {
            Ok(answers) => answer(replies, Ok(answers)),
            Err(_) => alone(sink, items, replies).await,
        },
    }
}

/// Make each write in a transaction of its own, all at once.
async fn alone<S: Sink>(
    sink: &S,
    items: Vec<S::Item>,
    replies: Vec<oneshot::Sender<Result<S::Answer>>>,
) {
    let mut each = JoinSet::new();
    for (item, reply) in items.into_iter().zip(replies) {
        let sink = sink.clone();
        each.spawn(async move {
            let answers = sink.write(std::slice::from_ref(&item)).await;
            answer(vec![reply], answers);
        });
    }
    while each.join_next().await.is_some() {}
}

/// Hand each caller its answer (in batch order), or the error to the only caller.
fn answer<A>(replies: Vec<oneshot::Sender<Result<A>>>, answers: Result<Vec<A>>) {
    match answers {
        Ok(answers) => {
            for (reply, a) in replies.into_iter().zip(answers) {
                // The caller may have stopped waiting; the write is made all the same.
                let _ = reply.send(Ok(a));
            }
        }
        Err(e) => {
            debug_assert_eq!(replies.len(), 1, "a shared batch's error is never shared");
            if let Some(reply) = replies.into_iter().next() {
                let _ = reply.send(Err(e));
            }
        }
    }
}
