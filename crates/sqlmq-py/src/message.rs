//! The values a queue takes and gives: [`Message`] to send, [`Sent`] back, [`Delivery`] and its
//! [`Receipt`] from a claim, [`QueueStats`].

use std::collections::BTreeMap;

use pyo3::prelude::*;

use crate::convert;

/// A message to send: a body and its options.
///
/// ```python
/// sqlmq.Message(b"resize 42", priority=-1, delay=30, ordering_key="customer-7",
///               headers={"trace": "abc"})
/// ```
#[pyclass(module = "sqlmq._sqlmq", frozen, from_py_object)]
#[derive(Clone)]
pub(crate) struct Message {
    pub(crate) inner: sqlmq::Message,
}

#[pymethods]
impl Message {
    /// `body`: bytes or str (sent as UTF-8). `id`: the message id (a UUID's text; sending a
    /// stored id again is a no-op that answers the first). `priority`: -32768 to 32767, lower
    /// first. `delay`: seconds before it may be delivered. `ordering_key`: strict FIFO among
    /// messages of the key. `concurrency_key`: at most the queue's concurrency limit of the key
    /// in flight. `idempotency_key`: a second send of the key within the queue's dedup window
    /// answers the first. `headers`: str to str. `depends_on`: ids of messages that must be acked
    /// first. `deadline`: a timezone-aware `datetime` after which it is never delivered (a
    /// worker stops a handler still running then; it becomes a dead letter). `run_timeout`:
    /// seconds each attempt may run, past which a worker stops it and dead-letters it.
    /// `replace_key`: replace the key's waiting message (body, headers, due time), or once that
    /// one was claimed send anew under the key. `debounce`: with `replace_key`, deliver once,
    /// after the key has had no send for this many seconds. `fairness_key`: the tenant whose
    /// share of a fair queue's deliveries it counts against.
    #[new]
    #[pyo3(signature = (body, *, id=None, priority=0, delay=None, ordering_key=None,
        concurrency_key=None, idempotency_key=None, headers=None, depends_on=None,
        deadline=None, run_timeout=None, replace_key=None, debounce=None, fairness_key=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        body: &Bound<'_, PyAny>,
        id: Option<&str>,
        priority: i16,
        delay: Option<f64>,
        ordering_key: Option<String>,
        concurrency_key: Option<String>,
        idempotency_key: Option<String>,
        headers: Option<BTreeMap<String, String>>,
        depends_on: Option<Vec<String>>,
        deadline: Option<std::time::SystemTime>,
        run_timeout: Option<f64>,
        replace_key: Option<String>,
        debounce: Option<f64>,
        fairness_key: Option<String>,
    ) -> PyResult<Message> {
        let mut m = sqlmq::Message::new(convert::body(body)?).priority(priority);
        if let Some(id) = id {
            m = m.with_id(convert::message_id(id)?);
        }
        if let Some(delay) = delay {
            m = m.delay(convert::seconds("delay", delay)?);
        }
        if let Some(key) = ordering_key {
            m = m.ordering_key(key);
        }
        if let Some(key) = concurrency_key {
            m = m.concurrency_key(key);
        }
        if let Some(key) = idempotency_key {
            m = m.idempotency_key(key);
        }
        if let Some(key) = fairness_key {
            m = m.fairness_key(key);
        }
        for (k, v) in headers.unwrap_or_default() {
            m = m.header(k, v);
        }
        if let Some(ids) = depends_on {
            let ids = ids
                .iter()
                .map(|id| convert::message_id(id))
                .collect::<PyResult<Vec<_>>>()?;
            m = m.depends_on(ids);
        }
        if let Some(at) = deadline {
            m = m.deadline(at);
        }
        if let Some(t) = run_timeout {
            m = m.run_timeout(convert::seconds("run_timeout", t)?);
        }
        match (replace_key, debounce) {
            (Some(key), None) => m = m.replacing(key),
            (Some(key), Some(quiet)) => m = m.debounce(key, convert::seconds("debounce", quiet)?),
            (None, Some(_)) => {
                return Err(crate::errors::InvalidInput::new_err(
                    "debounce needs a replace_key",
                ));
            }
            (None, None) => {}
        }
        Ok(Message { inner: m })
    }

    /// The message's id (chosen now, unless given).
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_string()
    }

    fn __repr__(&self) -> String {
        format!("Message(id={})", self.inner.id())
    }
}

/// A message, or anything that is a body, as a library message.
pub(crate) fn message(value: &Bound<'_, PyAny>) -> PyResult<sqlmq::Message> {
    match value.cast::<Message>() {
        Ok(m) => Ok(m.get().inner.clone()),
        Err(_) => Ok(sqlmq::Message::new(convert::body(value)?)),
    }
}

/// What a send did: the message's `id`, and whether it was a `duplicate` (its id or idempotency
/// key was sent already: nothing new was written) or `replaced` its key's waiting message (`id`
/// is that message's).
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct Sent {
    id: String,
    duplicate: bool,
    replaced: bool,
}

#[pymethods]
impl Sent {
    fn __repr__(&self) -> String {
        format!(
            "Sent(id={}, duplicate={}, replaced={})",
            self.id, self.duplicate, self.replaced
        )
    }
}

impl From<sqlmq::queue::Sent> for Sent {
    fn from(s: sqlmq::queue::Sent) -> Sent {
        Sent {
            id: s.id.to_string(),
            duplicate: s.duplicate,
            replaced: s.replaced,
        }
    }
}

/// Proof of a claim: the message's id and the fencing token of the claim. Its text, `ID:TOKEN`
/// (`str(receipt)`), is what the CLI and the HTTP API print; `Receipt.parse` reads it back.
#[pyclass(module = "sqlmq._sqlmq", frozen, eq, hash, from_py_object)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Receipt {
    pub(crate) inner: sqlmq::queue::Receipt,
}

#[pymethods]
impl Receipt {
    /// A receipt from its text, `ID:TOKEN`.
    #[staticmethod]
    fn parse(text: &str) -> PyResult<Receipt> {
        let inner = text.parse().map_err(crate::errors::to_py)?;
        Ok(Receipt { inner })
    }

    /// The message's id.
    #[getter]
    fn id(&self) -> String {
        self.inner.id.to_string()
    }

    /// The claim's fencing token.
    #[getter]
    fn token(&self) -> u64 {
        self.inner.token
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Receipt('{}')", self.inner)
    }
}

/// A receipt given as a [`Receipt`] or its text.
pub(crate) fn receipt(value: &Bound<'_, PyAny>) -> PyResult<sqlmq::queue::Receipt> {
    match value.cast::<Receipt>() {
        Ok(r) => Ok(r.get().inner),
        Err(_) => Ok(Receipt::parse(&value.extract::<String>()?)?.inner),
    }
}

/// A claimed message: its body and facts, and the [`Receipt`] to ack, nack or extend it with.
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct Delivery {
    pub(crate) inner: sqlmq::Delivery,
}

impl Delivery {
    /// The Python deliveries of a claim.
    pub(crate) fn all(claimed: Vec<sqlmq::Delivery>) -> Vec<Delivery> {
        claimed
            .into_iter()
            .map(|inner| Delivery { inner })
            .collect()
    }
}

#[pymethods]
impl Delivery {
    /// The message id.
    #[getter]
    fn id(&self) -> String {
        self.inner.id.to_string()
    }

    /// The body, as sent.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.inner.body)
    }

    /// The body as text (UTF-8).
    #[getter]
    fn text(&self) -> PyResult<String> {
        String::from_utf8(self.inner.body.clone()).map_err(|e| {
            crate::errors::InvalidInput::new_err(format!("the body is not UTF-8: {e}"))
        })
    }

    /// 1 for the first delivery, one more for each claim since.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The message's priority.
    #[getter]
    fn priority(&self) -> i16 {
        self.inner.priority
    }

    /// The ordering key, if any (a topic record's key).
    #[getter]
    fn ordering_key(&self) -> Option<String> {
        self.inner.ordering_key.clone()
    }

    /// The concurrency key, if any.
    #[getter]
    fn concurrency_key(&self) -> Option<String> {
        self.inner.concurrency_key.clone()
    }

    /// The headers given at send time.
    #[getter]
    fn headers(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        convert::headers(py, &self.inner.headers)
    }

    /// When it was sent (database clock, UTC).
    #[getter]
    fn enqueued_at(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        convert::datetime(py, self.inner.enqueued_at)
    }

    /// When the lease ends unless extended (database clock, UTC).
    #[getter]
    fn lease_expires_at(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        convert::datetime(py, self.inner.lease_expires_at)
    }

    /// The message's deadline (UTC), if it has one: settle it before.
    #[getter]
    fn deadline(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.inner
            .deadline
            .map(|at| convert::datetime(py, at))
            .transpose()
    }

    /// Seconds each attempt may run, if limited.
    #[getter]
    fn run_timeout(&self) -> Option<f64> {
        self.inner.run_timeout.map(|t| t.as_secs_f64())
    }

    /// A topic record's partition (None for a queue's message).
    #[getter]
    fn partition(&self) -> Option<u32> {
        self.inner.partition
    }

    /// A topic record's offset (None for a queue's message).
    #[getter]
    fn offset(&self) -> Option<i64> {
        self.inner.offset
    }

    /// The receipt of this claim.
    #[getter]
    fn receipt(&self) -> Receipt {
        Receipt {
            inner: self.inner.receipt(),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Delivery(id={}, attempt={}, {} bytes)",
            self.inner.id,
            self.inner.attempt,
            self.inner.body.len()
        )
    }
}

/// A queue's counts by state.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct QueueStats {
    name: String,
    paused: bool,
    ready: u64,
    scheduled: u64,
    blocked: u64,
    waiting: u64,
    in_flight: u64,
    dead: u64,
    /// Age of the oldest ready message in seconds, None when none is ready.
    oldest_ready_age: Option<f64>,
}

#[pymethods]
impl QueueStats {
    /// Messages not yet acked or dead: ready, scheduled, blocked, waiting and in flight.
    #[getter]
    fn pending(&self) -> u64 {
        self.ready + self.scheduled + self.blocked + self.waiting + self.in_flight
    }

    fn __repr__(&self) -> String {
        format!(
            "QueueStats(name={:?}, ready={}, scheduled={}, blocked={}, waiting={}, in_flight={}, dead={})",
            self.name,
            self.ready,
            self.scheduled,
            self.blocked,
            self.waiting,
            self.in_flight,
            self.dead
        )
    }
}

impl From<sqlmq::queue::QueueStats> for QueueStats {
    fn from(s: sqlmq::queue::QueueStats) -> QueueStats {
        QueueStats {
            name: s.name,
            paused: s.paused,
            ready: s.ready,
            scheduled: s.scheduled,
            blocked: s.blocked,
            waiting: s.waiting,
            in_flight: s.in_flight,
            dead: s.dead,
            oldest_ready_age: s.oldest_ready_age_ms.map(|ms| ms as f64 / 1000.0),
        }
    }
}

/// A message as stored, looked at without taking it (`Queue.browse`, `Queue.message`).
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct QueuedMessage {
    inner: sqlmq::inspect::QueuedMessage,
}

impl From<sqlmq::inspect::QueuedMessage> for QueuedMessage {
    fn from(inner: sqlmq::inspect::QueuedMessage) -> QueuedMessage {
        QueuedMessage { inner }
    }
}

#[pymethods]
impl QueuedMessage {
    /// The message id.
    #[getter]
    fn id(&self) -> String {
        self.inner.id.to_string()
    }

    /// Its state: "ready", "scheduled", "blocked", "waiting", "in_flight" or "dead".
    #[getter]
    fn state(&self) -> String {
        self.inner.state.to_string()
    }

    /// The body.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.inner.body)
    }

    /// Its priority.
    #[getter]
    fn priority(&self) -> i16 {
        self.inner.priority
    }

    /// Deliveries so far.
    #[getter]
    fn attempts(&self) -> u32 {
        self.inner.attempts
    }

    /// Its ordering key, if any.
    #[getter]
    fn ordering_key(&self) -> Option<String> {
        self.inner.ordering_key.clone()
    }

    /// The headers given at send time.
    #[getter]
    fn headers(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        convert::headers(py, &self.inner.headers)
    }

    /// When it was sent (UTC).
    #[getter]
    fn enqueued_at(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        convert::datetime(py, self.inner.enqueued_at)
    }

    /// When a scheduled message is due (UTC), else None.
    #[getter]
    fn run_at(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.inner
            .run_at
            .map(|t| convert::datetime(py, t))
            .transpose()
    }

    /// When an in-flight message's lease ends (UTC), else None.
    #[getter]
    fn lease_until(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.inner
            .lease_until
            .map(|t| convert::datetime(py, t))
            .transpose()
    }

    /// The process holding an in-flight message's lease, else None.
    #[getter]
    fn owner(&self) -> Option<String> {
        self.inner.owner.clone()
    }

    /// The errors of its failed attempts, oldest first: (attempt, error) pairs.
    #[getter]
    fn errors(&self) -> Vec<(u32, String)> {
        self.inner
            .errors
            .iter()
            .map(|e| (e.attempt, e.error.clone()))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "QueuedMessage(id={}, state={})",
            self.inner.id, self.inner.state
        )
    }
}
