//! The worker runtime with Python handlers: the library's `Worker` claims, extends leases,
//! retries, backs off, dead-letters and shuts down gracefully; a Python function handles each
//! message.
//!
//! A plain function runs on a thread of the source's [`Lane`], holding the GIL only while
//! Python runs (the database waits of the runtime never hold it); a coroutine function runs on
//! the asyncio loop of the thread that called `run`. What the handler returns (or raises) is the
//! message's outcome: `None` acks it; `Retry`, `Snooze` and `DeadLetter` do what they say; an
//! exception is a failed attempt, retried on the queue's backoff, its text in the message's
//! error history.
//!
//! `start_worker` starts the runtime's worker and returns a [`RunningWorker`]; the package's
//! `Worker.run` waits on it in short steps, so that Python's own signal handlers (SIGTERM,
//! Ctrl-C) run in between and stop it gracefully.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::backend::AnyClient;
use crate::client::Client;
use crate::context::JobContext;
use crate::convert;
use crate::errors::{InvalidInput, to_py};
use crate::lane::Lane;
use crate::message::Delivery;
use crate::outcome::outcome_of;
use crate::runtime::runtime;

/// A Python handler: the callable, and whether it is a coroutine function. A callable of
/// `None` is no Python at all — the runtime's own no-op handler, the baseline the benchmark
/// (`bench/bench.py`) compares a Python handler's cost with.
struct PyHandler {
    callable: Arc<Py<PyAny>>,
    noop: bool,
    /// The threads plain handlers run on.
    lane: Arc<Lane>,
    is_async: bool,
    /// The asyncio loop (and context) coroutines run on.
    locals: Option<pyo3_async_runtimes::TaskLocals>,
}

impl<B: sqlmq::Backend> sqlmq::worker::Handler<sqlmq::Delivery, B> for PyHandler
where
    JobContext: From<sqlmq::JobContext<B>>,
{
    type Error = String;

    async fn handle(
        &self,
        delivery: sqlmq::Delivery,
        ctx: sqlmq::JobContext<B>,
    ) -> Result<sqlmq::Outcome, String> {
        if self.noop {
            return Ok(sqlmq::Outcome::Done);
        }
        let callable = Arc::clone(&self.callable);
        let ctx = JobContext::from(ctx);
        if !self.is_async {
            let called = self.lane.call(move |py| {
                let args = (Delivery { inner: delivery }, ctx);
                match callable.call1(py, args) {
                    Ok(answer) => outcome_of(answer.bind(py)),
                    Err(e) => Err(exception_text(py, &e)),
                }
            });
            return called
                .await
                .unwrap_or_else(|| Err("the handler's threads are gone".to_owned()));
        }
        let locals = self.locals.clone().expect("async handlers have their loop");
        let awaited = Python::attach(|py| {
            let args = (Delivery { inner: delivery }, ctx);
            let coroutine = callable
                .call1(py, args)
                .map_err(|e| exception_text(py, &e))?;
            pyo3_async_runtimes::into_future_with_locals(&locals, coroutine.into_bound(py))
                .map_err(|e| exception_text(py, &e))
        })?;
        match awaited.await {
            Ok(answer) => Python::attach(|py| outcome_of(answer.bind(py))),
            Err(e) => Err(Python::attach(|py| exception_text(py, &e))),
        }
    }
}

/// An exception as the error history records it: its type and message, then the traceback.
fn exception_text(py: Python<'_>, e: &PyErr) -> String {
    let head = e.to_string();
    let traceback = e
        .traceback(py)
        .and_then(|tb| tb.format().ok())
        .unwrap_or_default();
    if traceback.is_empty() {
        head
    } else {
        format!("{head}\n{traceback}")
    }
}

/// One source of a worker: its name (`queue`, or `topic/group`), its handler, whether that is
/// a coroutine function, and its own concurrency.
type SourceSpec = (String, Py<PyAny>, bool, Option<usize>);

/// How a worker runs (seconds as numbers): the keys of a dict.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct Settings {
    concurrency: usize,
    lease: f64,
    timeout: f64,
    max_batch: Option<usize>,
    shutdown_grace: f64,
    poll_floor: f64,
    poll_ceiling: f64,
    stop_when_drained: bool,
    max_messages: Option<u64>,
}

/// A worker started by `start_worker`.
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct RunningWorker {
    stop: CancellationToken,
    kill: CancellationToken,
    task: Mutex<Option<JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>>>>,
}

#[pymethods]
impl RunningWorker {
    /// Stop claiming; running handlers finish within the grace period.
    fn stop(&self) {
        self.stop.cancel();
    }

    /// End the grace period now: handlers still running are stopped, their messages released.
    fn kill(&self) {
        self.stop.cancel();
        self.kill.cancel();
    }

    /// Wait up to `timeout` seconds (None: until it stops) for the worker to stop; its report
    /// (a dict of counts) once it has, None while it runs. A worker that stopped on an error
    /// raises it.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        let timeout = timeout
            .map(|t| convert::seconds("timeout", t))
            .transpose()?;
        let mut slot = self.task.lock().expect("poisoned");
        let Some(task) = slot.as_mut() else {
            return Err(InvalidInput::new_err(
                "the worker's report was taken already",
            ));
        };
        let done = py.detach(|| {
            runtime().block_on(async {
                match timeout {
                    None => Some(task.await),
                    Some(t) => tokio::time::timeout(t, task).await.ok(),
                }
            })
        });
        let Some(joined) = done else {
            return Ok(None);
        };
        *slot = None;
        let report = joined
            .map_err(|e| crate::errors::Error::new_err(format!("the worker task failed: {e}")))?
            .map_err(to_py)?;
        Ok(Some(report_dict(py, &report)?))
    }
}

/// A report as a dict: acked, retried, snoozed, dead_lettered, released, lease_lost, unsettled.
fn report_dict(py: Python<'_>, r: &sqlmq::worker::WorkerReport) -> PyResult<Py<PyAny>> {
    let d = pyo3::types::PyDict::new(py);
    d.set_item("acked", r.acked)?;
    d.set_item("retried", r.retried)?;
    d.set_item("snoozed", r.snoozed)?;
    d.set_item("dead_lettered", r.dead_lettered)?;
    d.set_item("released", r.released)?;
    d.set_item("lease_lost", r.lease_lost)?;
    d.set_item("unsettled", r.unsettled)?;
    Ok(d.into_any().unbind())
}

/// Start a worker on `client` for `sources`. Coroutine handlers run on `event_loop` (the
/// asyncio loop of the thread that will wait for the worker), which must be given when any
/// handler is one.
#[pyfunction]
#[pyo3(signature = (client, sources, settings, event_loop=None))]
pub(crate) fn start_worker(
    py: Python<'_>,
    client: &Client,
    sources: Vec<SourceSpec>,
    settings: Settings,
    event_loop: Option<Bound<'_, PyAny>>,
) -> PyResult<RunningWorker> {
    if sources.is_empty() {
        return Err(InvalidInput::new_err(
            "a worker needs at least one queue or group",
        ));
    }
    let locals = match event_loop {
        Some(event_loop) => {
            Some(pyo3_async_runtimes::TaskLocals::new(event_loop).copy_context(py)?)
        }
        None => None,
    };
    if sources.iter().any(|s| s.2) && locals.is_none() {
        return Err(InvalidInput::new_err(
            "coroutine handlers need the asyncio loop to run on: use Worker.run_async",
        ));
    }
    let mut named = Vec::with_capacity(sources.len());
    for (name, callable, is_async, concurrency) in sources {
        // As many threads as the source has slots: each may block in its handler.
        let threads = if is_async {
            0
        } else {
            concurrency.unwrap_or(settings.concurrency)
        };
        let lane = Lane::new(threads)
            .map_err(|e| crate::errors::Error::new_err(format!("cannot start threads: {e}")))?;
        let source: sqlmq::source::SourceName = name.parse().map_err(to_py)?;
        let handler = PyHandler {
            lane: Arc::new(lane),
            noop: callable.is_none(py),
            callable: Arc::new(callable),
            is_async,
            locals: locals.clone(),
        };
        named.push((source, handler, concurrency));
    }
    let stop = CancellationToken::new();
    let kill = CancellationToken::new();
    let task = match &client.inner {
        AnyClient::MySql(c) => spawn(c, named, &settings, &stop, &kill)?,
        AnyClient::Sqlite(c) => spawn(c, named, &settings, &stop, &kill)?,
    };
    Ok(RunningWorker {
        stop,
        kill,
        task: Mutex::new(Some(task)),
    })
}

/// Build the library's worker for `sources` with `settings` and spawn it on the runtime.
fn spawn<B: sqlmq::Backend>(
    client: &sqlmq::Client<B>,
    sources: Vec<(sqlmq::source::SourceName, PyHandler, Option<usize>)>,
    settings: &Settings,
    stop: &CancellationToken,
    kill: &CancellationToken,
) -> PyResult<JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>>>
where
    JobContext: From<sqlmq::JobContext<B>>,
{
    let secs = |what: &str, s: f64| convert::seconds(what, s);
    let mut builder = sqlmq::Worker::builder(client);
    for (source, handler, concurrency) in sources {
        if let Some(n) = concurrency {
            builder = builder.queue_concurrency(&source.to_string(), n);
        }
        builder = builder.source_raw(source, handler);
    }
    builder = builder
        .concurrency(settings.concurrency)
        .lease(secs("lease", settings.lease)?)
        .timeout(secs("timeout", settings.timeout)?)
        .shutdown_grace(secs("shutdown_grace", settings.shutdown_grace)?)
        .poll_interval(
            secs("poll_floor", settings.poll_floor)?,
            secs("poll_ceiling", settings.poll_ceiling)?,
        )
        .kill_on(kill.clone());
    if let Some(n) = settings.max_batch {
        builder = builder.max_batch(n);
    }
    if settings.stop_when_drained {
        builder = builder.stop_when_drained();
    }
    if let Some(n) = settings.max_messages {
        builder = builder.max_messages(n);
    }
    let stop = stop.clone();
    Ok(runtime().spawn(async move { builder.run(stop).await }))
}
