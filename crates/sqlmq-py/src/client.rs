//! `Client`: a connection pool to one database, and the queues, topics, schedules and batches
//! in it.

use std::time::Duration;

use pyo3::prelude::*;

use crate::backend::{Any, AnyClient, both, is_sqlite};
use crate::convert;
use crate::flow;
use crate::message::QueueStats;
use crate::queue::Queue;
use crate::runtime::block_on;
use crate::schedule::{self, Schedule};
use crate::topic::Topic;

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
    /// leased at once; `concurrency_limit`: most in flight per concurrency key; `fair`: hand
    /// out messages across fairness keys by weight instead of first in, first out.
    #[pyo3(signature = (name, *, max_attempts=None, backoff=None, dedup_window=None,
        max_in_flight=None, concurrency_limit=None, fair=false))]
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
        fair: bool,
    ) -> PyResult<Queue> {
        let mut config = sqlmq::QueueConfig::default()
            .max_in_flight(max_in_flight)
            .concurrency_limit(concurrency_limit)
            .fair(fair);
        if let Some(n) = max_attempts {
            config = config.max_attempts(n);
        }
        if let Some(steps) = backoff {
            let steps = steps
                .into_iter()
                .map(|s| convert::seconds("a backoff step", s))
                .collect::<PyResult<Vec<Duration>>>()?;
            config = config.backoff(sqlmq::queue::Backoff::Ladder(steps));
        }
        if let Some(secs) = dedup_window {
            config = config.dedup_window(convert::seconds("dedup_window", secs)?);
        }
        let inner = block_on(py, async {
            Ok(both!(&self.inner, c => {
                let q = c.create_queue(name, config).await?;
                q.any()
            }))
        })?;
        Ok(Queue { inner })
    }

    /// The queue `name`; `UnknownQueue` when there is none.
    fn queue(&self, py: Python<'_>, name: &str) -> PyResult<Queue> {
        let inner = block_on(py, async {
            Ok(both!(&self.inner, c => c.queue(name).await?.any()))
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

    /// Create the topic `name` (`partitions` of them; `retention`: seconds a record is kept,
    /// None for ever) and return it.
    #[pyo3(signature = (name, *, partitions=1, retention=None))]
    fn create_topic(
        &self,
        py: Python<'_>,
        name: &str,
        partitions: u32,
        retention: Option<f64>,
    ) -> PyResult<Topic> {
        let mut config = sqlmq::TopicConfig::default().partitions(partitions);
        if let Some(secs) = retention {
            config = config.retention(convert::seconds("retention", secs)?);
        }
        let inner = block_on(py, async {
            Ok(both!(&self.inner, c => c.create_topic(name, config).await?.any()))
        })?;
        Ok(Topic { inner })
    }

    /// The topic `name`; `UnknownTopic` when there is none.
    fn topic(&self, py: Python<'_>, name: &str) -> PyResult<Topic> {
        let inner = block_on(py, async {
            Ok(both!(&self.inner, c => c.topic(name).await?.any()))
        })?;
        Ok(Topic { inner })
    }

    /// Create (or replace) the recurring schedule `name`: every `every` seconds, or on the
    /// `cron` expression (5 fields, or 6 with seconds first) in time zone `tz`; each fire time
    /// sends `body` to `queue` (with `key` as its ordering key, `priority`, `headers`) or
    /// publishes it to `topic` (with `key` as its key) — once, whatever the number of processes
    /// firing schedules (every worker does).
    #[pyo3(signature = (name, *, queue=None, topic=None, every=None, cron=None, tz="UTC",
        body=None, key=None, priority=0, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_schedule(
        &self,
        py: Python<'_>,
        name: &str,
        queue: Option<String>,
        topic: Option<String>,
        every: Option<f64>,
        cron: Option<String>,
        tz: &str,
        body: Option<&Bound<'_, PyAny>>,
        key: Option<String>,
        priority: i16,
        headers: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Schedule> {
        let spec = schedule::Spec {
            queue,
            topic,
            every,
            cron,
            tz: tz.to_owned(),
            body: body.map(convert::body).transpose()?.unwrap_or_default(),
            key,
            priority,
            headers: headers.unwrap_or_default(),
        };
        schedule::create(py, &self.inner, name, spec)
    }

    /// Every schedule.
    fn schedules(&self, py: Python<'_>) -> PyResult<Vec<Schedule>> {
        schedule::all(py, &self.inner)
    }

    /// Delete the schedule `name`.
    fn delete_schedule(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        schedule::delete(py, &self.inner, name)
    }

    /// Send `members` (messages or bodies) to `queue` as one batch, in one transaction; each
    /// callback, a `(queue, body)` pair, is sent once when the batch finishes: `on_success`
    /// when every member was acked, `on_failure` when one or more was not, `on_complete`
    /// either way.
    #[pyo3(signature = (queue, members, *, on_success=None, on_failure=None, on_complete=None))]
    fn create_batch(
        &self,
        py: Python<'_>,
        queue: &str,
        members: Vec<Bound<'_, PyAny>>,
        on_success: Option<(String, Bound<'_, PyAny>)>,
        on_failure: Option<(String, Bound<'_, PyAny>)>,
        on_complete: Option<(String, Bound<'_, PyAny>)>,
    ) -> PyResult<flow::BatchCreated> {
        flow::create(
            py,
            &self.inner,
            queue,
            members,
            on_success,
            on_failure,
            on_complete,
        )
    }

    /// The batch `id`'s progress; `BatchNotFound` when there is none.
    fn batch(&self, py: Python<'_>, id: &str) -> PyResult<flow::BatchStatus> {
        flow::status(py, &self.inner, id)
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
