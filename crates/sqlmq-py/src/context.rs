//! `JobContext`: what a handler knows of the message it handles, and what it may do to its
//! lease.

use pyo3::prelude::*;

use crate::convert;
use crate::message::Receipt;
use crate::runtime::{awaitable, block_on};

/// A handler's context of either backend.
#[derive(Clone)]
enum AnyContext {
    MySql(sqlmq::JobContext<sqlmq::MySql>),
    Sqlite(sqlmq::JobContext<sqlmq::Sqlite>),
}

/// Run `$body` with `$c` bound to the library's context inside an [`AnyContext`].
macro_rules! ctx {
    ($any:expr, $c:ident => $body:expr) => {
        match $any {
            AnyContext::MySql($c) => $body,
            AnyContext::Sqlite($c) => $body,
        }
    };
}

/// The context of the message a handler runs for: its attempt, receipt and source, and its
/// lease.
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct JobContext {
    inner: AnyContext,
}

impl From<sqlmq::JobContext<sqlmq::MySql>> for JobContext {
    fn from(c: sqlmq::JobContext<sqlmq::MySql>) -> JobContext {
        JobContext {
            inner: AnyContext::MySql(c),
        }
    }
}

impl From<sqlmq::JobContext<sqlmq::Sqlite>> for JobContext {
    fn from(c: sqlmq::JobContext<sqlmq::Sqlite>) -> JobContext {
        JobContext {
            inner: AnyContext::Sqlite(c),
        }
    }
}

#[pymethods]
impl JobContext {
    /// 1 for the first delivery, one more for each claim since.
    #[getter]
    fn attempt(&self) -> u32 {
        ctx!(&self.inner, c => c.attempt())
    }

    /// The receipt of this claim (for the SQL contract's ack in your own transaction).
    #[getter]
    fn receipt(&self) -> Receipt {
        Receipt {
            inner: ctx!(&self.inner, c => c.receipt()),
        }
    }

    /// The queue's name, or `topic/group`.
    #[getter]
    fn source(&self) -> String {
        ctx!(&self.inner, c => c.source_name())
    }

    /// Whether the lease was found lost while the handler ran: its result will be discarded.
    #[getter]
    fn lease_lost(&self) -> bool {
        ctx!(&self.inner, c => c.lease_lost())
    }

    /// Push the lease's end to `lease` seconds from now (the worker also extends it every third
    /// of the lease while the handler runs). `LeaseLost` when it already ended.
    fn extend(&self, py: Python<'_>, lease: f64) -> PyResult<()> {
        let lease = convert::seconds("lease", lease)?;
        block_on(py, async { ctx!(&self.inner, c => c.extend(lease).await) })
    }

    /// `extend`, awaitable.
    fn extend_async<'py>(&self, py: Python<'py>, lease: f64) -> PyResult<Bound<'py, PyAny>> {
        let lease = convert::seconds("lease", lease)?;
        let inner = self.inner.clone();
        awaitable(py, async move { ctx!(&inner, c => c.extend(lease).await) })
    }

    /// Whether the message was cancelled (`Queue.cancel`, `sqlmq cancel`, the dashboard) or its
    /// deadline or run timeout came while the handler runs: stop, and return anything — the
    /// worker removes (or dead-letters) the message; its ack no longer counts.
    #[getter]
    fn cancelled(&self) -> bool {
        ctx!(&self.inner, c => c.is_cancelled())
    }

    /// When this attempt will be stopped (UTC): the earlier of its message's deadline and its
    /// claim plus its run timeout; None without either.
    #[getter]
    fn deadline(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        ctx!(&self.inner, c => c.deadline())
            .map(|at| convert::datetime(py, at))
            .transpose()
    }

    /// Report how far the handler got: any JSON value (at most 4 KiB once encoded), shown by
    /// `sqlmq show`, the API and the dashboard while the message is in flight. Never waits for
    /// the database: written in the background at most once a second.
    fn progress(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let text: String = py
            .import("json")?
            .call_method1("dumps", (value,))?
            .extract()?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| crate::errors::InvalidInput::new_err(format!("progress: {e}")))?;
        let inner = self.inner.clone();
        block_on(
            py,
            async move { ctx!(&inner, c => c.progress(value).await) },
        )
    }

    fn __repr__(&self) -> String {
        format!("JobContext({}, attempt {})", self.source(), self.attempt())
    }
}
