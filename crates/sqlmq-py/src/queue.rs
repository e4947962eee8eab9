//! `Queue`: send, receive, settle and look after one queue. Every method blocks its thread with
//! the GIL released; each has an `_async` twin that returns an awaitable for asyncio.

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::backend::{AnyQueue, both};
use crate::convert;
use crate::fairness::FairnessKey;
use crate::message::{Delivery, QueueStats, QueuedMessage, Sent, message, receipt};
use crate::runtime::{awaitable, block_on};

/// A queue of the database, looked up by name (`Client.queue`, `Client.create_queue`).
///
/// ```python
/// emails = client.queue("emails")
/// emails.send(b'{"order": 42}')
/// for d in emails.receive(10, lease=30):
///     emails.ack(d.receipt)
/// ```
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct Queue {
    pub(crate) inner: AnyQueue,
}

/// The library's messages of a Python list of messages or bodies.
fn messages(list: &Bound<'_, PyList>) -> PyResult<Vec<sqlmq::Message>> {
    list.iter().map(|m| message(&m)).collect()
}

/// The library's receipts of a Python list of receipts (or their text).
fn receipts(list: &Bound<'_, PyList>) -> PyResult<Vec<sqlmq::queue::Receipt>> {
    list.iter().map(|r| receipt(&r)).collect()
}

#[pymethods]
impl Queue {
    /// The queue's name.
    #[getter]
    fn name(&self) -> String {
        both!(queue &self.inner, q => q.name().to_owned())
    }

    /// Send one message (a `Message`, or a body: bytes or str); it is durable when this returns.
    fn send(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<Sent> {
        let m = crate::message::message(message)?;
        let sent = block_on(py, async { both!(queue &self.inner, q => q.send(m).await) })?;
        Ok(sent.into())
    }

    /// `send`, awaitable.
    fn send_async<'py>(
        &self,
        py: Python<'py>,
        message: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = crate::message::message(message)?;
        let q = self.inner.clone();
        awaitable(py, async move {
            let sent = both!(queue q, q => q.send(m).await)?;
            Ok(Sent::from(sent))
        })
    }

    /// Send every message of `messages` in one transaction: all of them become visible at
    /// once, or none.
    fn send_batch(&self, py: Python<'_>, messages: &Bound<'_, PyList>) -> PyResult<Vec<Sent>> {
        let ms = self::messages(messages)?;
        let sent = block_on(py, async {
            both!(queue &self.inner, q => q.send_batch(ms).await)
        })?;
        Ok(sent.into_iter().map(Sent::from).collect())
    }

    /// `send_batch`, awaitable.
    fn send_batch_async<'py>(
        &self,
        py: Python<'py>,
        messages: &Bound<'_, PyList>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ms = self::messages(messages)?;
        let q = self.inner.clone();
        awaitable(py, async move {
            let sent = both!(queue q, q => q.send_batch(ms).await)?;
            Ok(sent.into_iter().map(Sent::from).collect::<Vec<_>>())
        })
    }

    /// Claim up to `n` ready messages (1 to 1000), each leased for `lease` seconds: until then
    /// no other consumer gets it. Ack each when handled; what is not acked comes back when its
    /// lease ends.
    #[pyo3(signature = (n=1, lease=30.0))]
    fn receive(&self, py: Python<'_>, n: usize, lease: f64) -> PyResult<Vec<Delivery>> {
        let lease = convert::seconds("lease", lease)?;
        let got = block_on(py, async {
            both!(queue &self.inner, q => q.receive(n, lease).await)
        })?;
        Ok(Delivery::all(got))
    }

    /// `receive`, awaitable.
    #[pyo3(signature = (n=1, lease=30.0))]
    fn receive_async<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        lease: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let lease = convert::seconds("lease", lease)?;
        let q = self.inner.clone();
        awaitable(py, async move {
            let got = both!(queue q, q => q.receive(n, lease).await)?;
            Ok(Delivery::all(got))
        })
    }

    /// As `receive`, waiting up to `wait` seconds for a message when none is ready (a long
    /// poll: it is answered as soon as one is sent).
    #[pyo3(signature = (n=1, lease=30.0, wait=20.0))]
    fn receive_wait(
        &self,
        py: Python<'_>,
        n: usize,
        lease: f64,
        wait: f64,
    ) -> PyResult<Vec<Delivery>> {
        let lease = convert::seconds("lease", lease)?;
        let wait = convert::seconds("wait", wait)?;
        let got = block_on(py, async {
            both!(queue &self.inner, q => q.receive_wait(n, lease, wait).await)
        })?;
        Ok(Delivery::all(got))
    }

    /// Ack a claim (its `Receipt`, or the receipt's text): the message is done. `LeaseLost` when
    /// the lease ended or was taken over (nothing changes).
    fn ack(&self, py: Python<'_>, receipt: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = crate::message::receipt(receipt)?;
        block_on(py, async { both!(queue &self.inner, q => q.ack(r).await) })
    }

    /// `ack`, awaitable.
    fn ack_async<'py>(
        &self,
        py: Python<'py>,
        receipt: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = crate::message::receipt(receipt)?;
        let q = self.inner.clone();
        awaitable(py, async move { both!(queue q, q => q.ack(r).await) })
    }

    /// Ack several claims in one transaction; returns the receipts whose leases were lost (not
    /// acked), the others are acked.
    fn ack_batch(
        &self,
        py: Python<'_>,
        receipts: &Bound<'_, PyList>,
    ) -> PyResult<Vec<crate::message::Receipt>> {
        let rs = self::receipts(receipts)?;
        let report = block_on(py, async {
            both!(queue &self.inner, q => q.ack_batch(&rs).await)
        })?;
        Ok(report
            .lost
            .into_iter()
            .map(|inner| crate::message::Receipt { inner })
            .collect())
    }

    /// A failed attempt: the message comes back after `retry_in` seconds (the queue's backoff
    /// when None), or becomes a dead letter when its attempts are spent; `error` goes into its
    /// error history. Returns what became of it: "retried" or "dead".
    #[pyo3(signature = (receipt, error="", retry_in=None))]
    fn nack(
        &self,
        py: Python<'_>,
        receipt: &Bound<'_, PyAny>,
        error: &str,
        retry_in: Option<f64>,
    ) -> PyResult<&'static str> {
        let r = crate::message::receipt(receipt)?;
        let retry_in = retry_in
            .map(|s| convert::seconds("retry_in", s))
            .transpose()?;
        let outcome = block_on(py, async {
            both!(queue &self.inner, q => q.nack(r, retry_in, error).await)
        })?;
        Ok(match outcome {
            sqlmq::queue::NackOutcome::DeadLettered => "dead",
            _ => "retried",
        })
    }

    /// Push the lease's end to `lease` seconds from now. `LeaseLost` when it already ended.
    #[pyo3(signature = (receipt, lease=30.0))]
    fn extend(&self, py: Python<'_>, receipt: &Bound<'_, PyAny>, lease: f64) -> PyResult<()> {
        let r = crate::message::receipt(receipt)?;
        let lease = convert::seconds("lease", lease)?;
        block_on(py, async {
            both!(queue &self.inner, q => q.extend(r, lease).await)
        })
    }

    /// Counts of the queue's messages by state.
    fn stats(&self, py: Python<'_>) -> PyResult<QueueStats> {
        let stats = block_on(py, async { both!(queue &self.inner, q => q.stats().await) })?;
        Ok(stats.into())
    }

    /// Look without taking: up to `limit` messages in `state` ("ready", "scheduled", "blocked",
    /// "waiting" or "in_flight"), in the order that state hands them out, and the cursor of the
    /// next page (give it as `after`; None after the last). No lease, no lock, no attempt.
    #[pyo3(signature = (state="ready", after=None, limit=100))]
    fn browse(
        &self,
        py: Python<'_>,
        state: &str,
        after: Option<String>,
        limit: usize,
    ) -> PyResult<(Vec<QueuedMessage>, Option<String>)> {
        let state: sqlmq::inspect::MessageState = state.parse().map_err(crate::errors::to_py)?;
        let page = block_on(py, async {
            both!(queue &self.inner, q => q.browse(state, after.as_deref(), limit).await)
        })?;
        let messages = page.messages.into_iter().map(QueuedMessage::from).collect();
        Ok((messages, page.next))
    }

    /// The message `id` in whatever state it is (dead letters included), or None when the
    /// queue has no such message (any more).
    fn message(&self, py: Python<'_>, id: &str) -> PyResult<Option<QueuedMessage>> {
        let id = convert::message_id(id)?;
        let found = block_on(py, async {
            both!(queue &self.inner, q => q.message(id).await)
        })?;
        Ok(found.map(QueuedMessage::from))
    }

    /// Stop handing out messages (sends go on); `resume` undoes it.
    fn pause(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, async { both!(queue &self.inner, q => q.pause().await) })
    }

    /// Hand out messages again after `pause`.
    fn resume(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, async {
            both!(queue &self.inner, q => q.resume().await)
        })
    }

    /// Cancel a message in any state: `"removed"` when it was waiting, `"running"` when a
    /// consumer holds it (its handler is told; its ack fails with `Cancelled`).
    /// `MessageNotFound` when there is none.
    fn cancel(&self, py: Python<'_>, id: &str) -> PyResult<&'static str> {
        let id = convert::message_id(id)?;
        let cancelled = block_on(py, async {
            both!(queue &self.inner, q => q.cancel(id).await)
        })?;
        Ok(match cancelled {
            sqlmq::queue::Cancelled::Removed => "removed",
            sqlmq::queue::Cancelled::Running => "running",
        })
    }

    /// Remove every message but the dead letters and those in flight; returns how many.
    fn purge(&self, py: Python<'_>) -> PyResult<u64> {
        block_on(py, async { both!(queue &self.inner, q => q.purge().await) })
    }

    /// The dead letters, oldest first, at most `limit`: (id, attempts, last error) tuples.
    #[pyo3(signature = (limit=100))]
    fn dead_letters(
        &self,
        py: Python<'_>,
        limit: usize,
    ) -> PyResult<Vec<(String, u32, Option<String>)>> {
        let dead = block_on(py, async {
            both!(queue &self.inner, q => q.dead_letters(limit).await)
        })?;
        Ok(dead
            .into_iter()
            .map(|d| {
                let last = d.errors.last().map(|e| e.error.clone());
                (d.id.to_string(), d.attempts, last)
            })
            .collect())
    }

    /// Set fairness key `key`'s weight on a fair queue (1 to 10 000; every key starts at 1):
    /// its share of deliveries while other keys have messages waiting.
    fn set_weight(&self, py: Python<'_>, key: &str, weight: u32) -> PyResult<()> {
        block_on(py, async {
            both!(queue &self.inner, q => q.set_weight(key, weight).await)
        })
    }

    /// A fair queue's keys with the most messages ready, most first, at most `limit`; then
    /// keys with messages in flight and nothing ready; then keys with a weight set and
    /// neither.
    #[pyo3(signature = (limit=20))]
    fn fairness_keys(&self, py: Python<'_>, limit: usize) -> PyResult<Vec<FairnessKey>> {
        let keys = block_on(py, async {
            both!(queue &self.inner, q => q.fairness_keys(limit).await)
        })?;
        Ok(keys.into_iter().map(FairnessKey::from).collect())
    }

    /// Send dead letters back to the queue (all of them when `ids` is None); returns how many.
    #[pyo3(signature = (ids=None))]
    fn redrive(&self, py: Python<'_>, ids: Option<Vec<String>>) -> PyResult<u64> {
        match ids {
            None => block_on(py, async {
                both!(queue &self.inner, q => q.redrive_all().await)
            }),
            Some(ids) => {
                let ids = ids
                    .iter()
                    .map(|id| convert::message_id(id))
                    .collect::<PyResult<Vec<_>>>()?;
                let done = block_on(py, async {
                    both!(queue &self.inner, q => q.redrive(&ids).await)
                })?;
                Ok(done.len() as u64)
            }
        }
    }

    /// Send `n` copies of `body` one at a time from a loop of the library's own (the
    /// benchmark's baseline for `send` called from Python); returns the seconds it took.
    fn _send_loop(&self, py: Python<'_>, n: usize, body: &Bound<'_, PyAny>) -> PyResult<f64> {
        let body = convert::body(body)?;
        block_on(py, async {
            let started = std::time::Instant::now();
            for _ in 0..n {
                let m = sqlmq::Message::new(body.clone());
                both!(queue &self.inner, q => q.send(m).await)?;
            }
            Ok(started.elapsed().as_secs_f64())
        })
    }

    fn __repr__(&self) -> String {
        format!("Queue({:?})", self.name())
    }
}
