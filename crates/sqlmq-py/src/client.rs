//! `Client`: a connection pool to one database, and the queues in it.

use std::time::Duration;

use pyo3::prelude::*;

use crate::backend::{AnyClient, AnyQueue, both, is_sqlite};
use crate::convert;
use crate::message::QueueStats;
use crate::queue::Queue;
use crate::runtime::block_on;

/// A pool of connections to one database: MySQL/MariaDB (`mysql://user:password@host/db`) or
/// SQLite (`sqlite://path/file.db`, created when missing; `sqlite::memory:`). Cheap to share
/// between threads; make one per process.
///
/// ```python
/// client = sqlmq.Client.connect("sqlite://jobs.db")
/// client.migrate()
/// emails = client.create_queue("emails")
/// ```
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct Client {
    pub(crate) inner: AnyClient,
}

#[pymethods]
impl Client {
    /// Connect to the database `url` names. `table_prefix`: the prefix of sqlmq's tables
    /// (default `sqlmq_`); `max_connections`: the pool's size; `max_payload_bytes`: the largest
    /// body accepted (default 1 MiB); `connect_timeout`: seconds to wait for a connection.
    #[staticmethod]
    #[pyo3(signature = (url, *, table_prefix=None, max_connections=None, max_payload_bytes=None,
        connect_timeout=None))]
    fn connect(
        py: Python<'_>,
        url: &str,
        table_prefix: Option<String>,
        max_connections: Option<u32>,
        max_payload_bytes: Option<usize>,
        connect_timeout: Option<f64>,
    ) -> PyResult<Client> {
        let mut builder = sqlmq::Client::builder();
        if let Some(prefix) = table_prefix {
            builder = builder.table_prefix(prefix);
        }
        if let Some(n) = max_connections {
            builder = builder.max_connections(n);
        }
        if let Some(n) = max_payload_bytes {
            builder = builder.max_payload_bytes(n);
        }
        if let Some(secs) = connect_timeout {
            builder = builder.connect_timeout(convert::seconds("connect_timeout", secs)?);
        }
        let inner = if is_sqlite(url) {
            AnyClient::Sqlite(block_on(py, builder.open::<sqlmq::Sqlite>(url))?)
        } else {
            AnyClient::MySql(block_on(py, builder.open::<sqlmq::MySql>(url))?)
        };
        Ok(Client { inner })
    }

    /// Create sqlmq's tables, or upgrade them to this version's schema (as `sqlmq migrate`;
    /// on MySQL the user needs the rights to create tables).
    fn migrate(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, async {
            both!(&self.inner, c => c.migrate().await.map(|_| ()))
        })
    }

    /// Create the queue `name` (or update its settings) and return it. `max_attempts`: attempts
    /// before a message becomes a dead letter (default 25); `backoff`: seconds to wait after
    /// each failed attempt, the last repeating (default: exponential from 1 s to an hour);
    /// `dedup_window`: seconds an idempotency key is remembered; `max_in_flight`: most messages
    /// leased at once; `concurrency_limit`: most in flight per concurrency key.
    #[pyo3(signature = (name, *, max_attempts=None, backoff=None, dedup_window=None,
        max_in_flight=None, concurrency_limit=None))]
    // A Python signature of keyword arguments: each is one.
    #[allow(clippy::too_many_arguments)]
    fn create_queue(
        &self,
        py: Python<'_>,
        name: &str,
        max_attempts: Option<u32>,
        backoff: Option<Vec<f64>>,
        dedup_window: Option<f64>,
        max_in_flight: Option<u32>,
        concurrency_limit: Option<u32>,
    ) -> PyResult<Queue> {
        let mut config = sqlmq::QueueConfig::default()
            .max_in_flight(max_in_flight)
            .concurrency_limit(concurrency_limit);
        if let Some(n) = max_attempts {
            config = config.max_attempts(n);
        }
        if let Some(steps) = backoff {
            let steps = steps
                .into_iter()
                .map(|s| convert::seconds("a backoff step", s))
                .collect::<PyResult<Vec<Duration>>>()?;
            config = config.backoff(sqlmq::Backoff::Ladder(steps));
        }
        if let Some(secs) = dedup_window {
            config = config.dedup_window(convert::seconds("dedup_window", secs)?);
        }
        let inner = block_on(py, async {
            Ok(both!(&self.inner, c => {
                let q = c.create_queue(name, config).await?;
                queue_of(q)
            }))
        })?;
        Ok(Queue { inner })
    }

    /// The queue `name`; `UnknownQueue` when there is none.
    fn queue(&self, py: Python<'_>, name: &str) -> PyResult<Queue> {
        let inner = block_on(py, async {
            Ok(both!(&self.inner, c => queue_of(c.queue(name).await?)))
        })?;
        Ok(Queue { inner })
    }

    /// Every queue's counts by state.
    fn queues(&self, py: Python<'_>) -> PyResult<Vec<QueueStats>> {
        let all = block_on(py, async { both!(&self.inner, c => c.queue_stats().await) })?;
        Ok(all.into_iter().map(QueueStats::from).collect())
    }

    /// Delete the queue `name` with every message in it.
    fn delete_queue(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        block_on(py, async {
            both!(&self.inner, c => c.delete_queue(name).await)
        })
    }

    /// Which backend the client is on: "mysql" or "sqlite".
    #[getter]
    fn backend(&self) -> &'static str {
        match self.inner {
            AnyClient::MySql(_) => "mysql",
            AnyClient::Sqlite(_) => "sqlite",
        }
    }

    /// Close the pool (waits for the connections in use to come back).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, async {
            both!(&self.inner, c => c.pool().close().await);
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!("Client({})", self.backend())
    }
}

/// A library queue of either backend as an [`AnyQueue`].
pub(crate) trait QueueOf {
    fn any(self) -> AnyQueue;
}

impl QueueOf for sqlmq::Queue<sqlmq::MySql> {
    fn any(self) -> AnyQueue {
        AnyQueue::MySql(self)
    }
}

impl QueueOf for sqlmq::Queue<sqlmq::Sqlite> {
    fn any(self) -> AnyQueue {
        AnyQueue::Sqlite(self)
    }
}

fn queue_of(q: impl QueueOf) -> AnyQueue {
    q.any()
}
