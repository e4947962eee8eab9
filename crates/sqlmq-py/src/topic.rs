//! `Topic` (publish) and `Group` (a consumer group: receive, ack, nack, extend).

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::backend::{Any, AnyGroup, AnyTopic, both};
use crate::convert;
use crate::message::{Delivery, receipt};
use crate::runtime::{awaitable, block_on};

/// An append-only stream of records, in partitions with dense offsets; consumer groups read it
/// independently (`Client.create_topic`, `Client.topic`).
///
/// ```python
/// orders = client.create_topic("orders", partitions=4)
/// orders.publish(b"paid", key="customer-7")
/// billing = orders.create_group("billing")
/// for d in billing.receive(10, lease=30):
///     billing.ack(d.receipt)
/// ```
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct Topic {
    pub(crate) inner: AnyTopic,
}

/// What a publish did: the record's `id`, its `partition`, whether it was a `duplicate`.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct Published {
    id: String,
    partition: u32,
    duplicate: bool,
}

#[pymethods]
impl Published {
    fn __repr__(&self) -> String {
        format!(
            "Published(id={}, partition={}, duplicate={})",
            self.id,
            self.partition,
            if self.duplicate { "True" } else { "False" }
        )
    }
}

impl From<sqlmq::topic::Published> for Published {
    fn from(p: sqlmq::topic::Published) -> Published {
        Published {
            id: p.id.to_string(),
            partition: p.partition,
            duplicate: p.duplicate,
        }
    }
}

/// A record of `body` with its key (the partition's choice) and headers.
fn record(
    body: &Bound<'_, PyAny>,
    key: Option<String>,
    headers: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<sqlmq::Record> {
    let mut r = sqlmq::Record::new(convert::body(body)?);
    if let Some(key) = key {
        r = r.key(key);
    }
    for (k, v) in headers.unwrap_or_default() {
        r = r.header(k, v);
    }
    Ok(r)
}

/// Where a new group starts: "earliest", "latest", or an offset.
fn start_at(start: &Bound<'_, PyAny>) -> PyResult<sqlmq::topic::StartAt> {
    if let Ok(offset) = start.extract::<i64>() {
        return Ok(sqlmq::topic::StartAt::Offset(offset));
    }
    match start.extract::<String>()?.as_str() {
        "earliest" => Ok(sqlmq::topic::StartAt::Earliest),
        "latest" => Ok(sqlmq::topic::StartAt::Latest),
        other => Err(crate::errors::InvalidInput::new_err(format!(
            "start is \"earliest\", \"latest\" or an offset, not {other:?}"
        ))),
    }
}

#[pymethods]
impl Topic {
    /// The topic's name.
    #[getter]
    fn name(&self) -> String {
        both!(topic &self.inner, t => t.name().to_owned())
    }

    /// Its number of partitions.
    #[getter]
    fn partitions(&self) -> u32 {
        both!(topic &self.inner, t => t.config().partitions)
    }

    /// Publish one record (`body` bytes or str; `key` picks its partition and is what
    /// consumers see as its key); durable when this returns.
    #[pyo3(signature = (body, *, key=None, headers=None))]
    fn publish(
        &self,
        py: Python<'_>,
        body: &Bound<'_, PyAny>,
        key: Option<String>,
        headers: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Published> {
        let r = record(body, key, headers)?;
        let published = block_on(py, async {
            both!(topic &self.inner, t => t.publish(r).await)
        })?;
        Ok(published.into())
    }

    /// `publish`, awaitable.
    #[pyo3(signature = (body, *, key=None, headers=None))]
    fn publish_async<'py>(
        &self,
        py: Python<'py>,
        body: &Bound<'_, PyAny>,
        key: Option<String>,
        headers: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = record(body, key, headers)?;
        let t = self.inner.clone();
        awaitable(py, async move {
            let published = both!(topic t, t => t.publish(r).await)?;
            Ok(Published::from(published))
        })
    }

    /// Publish records in one transaction: `(body, key)` pairs, or bodies (no key).
    fn publish_batch(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyList>,
    ) -> PyResult<Vec<Published>> {
        let mut rs = Vec::with_capacity(records.len());
        for item in records.iter() {
            let r = match item.extract::<(Bound<'_, PyAny>, Option<String>)>() {
                Ok((body, key)) => record(&body, key, None)?,
                Err(_) => record(&item, None, None)?,
            };
            rs.push(r);
        }
        let published = block_on(py, async {
            both!(topic &self.inner, t => t.publish_batch(rs).await)
        })?;
        Ok(published.into_iter().map(Published::from).collect())
    }

    /// Create the consumer group `name` starting at `start` ("earliest", "latest" or an
    /// offset) — cluster mode: each record to one member, acked, retried, dead-lettered — and
    /// return it. `max_attempts`: attempts before a record becomes a group's dead letter.
    #[pyo3(signature = (name, *, start=None, max_attempts=None))]
    fn create_group(
        &self,
        py: Python<'_>,
        name: &str,
        start: Option<&Bound<'_, PyAny>>,
        max_attempts: Option<u32>,
    ) -> PyResult<Group> {
        let start = match start {
            Some(s) => start_at(s)?,
            None => sqlmq::topic::StartAt::Earliest,
        };
        let mut config = sqlmq::GroupConfig::default();
        if let Some(n) = max_attempts {
            config = config.max_attempts(n);
        }
        let inner = block_on(py, async {
            Ok(both!(topic &self.inner, t => t.create_group(name, config, start).await?.any()))
        })?;
        Ok(Group { inner })
    }

    /// The consumer group `name`; `UnknownGroup` when there is none.
    fn group(&self, py: Python<'_>, name: &str) -> PyResult<Group> {
        let inner = block_on(py, async {
            Ok(both!(topic &self.inner, t => t.group(name).await?.any()))
        })?;
        Ok(Group { inner })
    }

    fn __repr__(&self) -> String {
        format!("Topic({:?})", self.name())
    }
}

/// A cluster consumer group of a topic: each record to one consumer, under a lease, acked,
/// retried on the group's ladder, dead-lettered (`Topic.create_group`, `Topic.group`).
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct Group {
    pub(crate) inner: AnyGroup,
}

#[pymethods]
impl Group {
    /// `topic/group`.
    #[getter]
    fn name(&self) -> String {
        both!(group &self.inner, g => format!("{}/{}", g.topic().name(), g.name()))
    }

    /// Claim up to `n` records (in offset order per partition), each leased for `lease` seconds.
    #[pyo3(signature = (n=1, lease=30.0))]
    fn receive(&self, py: Python<'_>, n: usize, lease: f64) -> PyResult<Vec<Delivery>> {
        let lease = convert::seconds("lease", lease)?;
        let got = block_on(py, async {
            both!(group &self.inner, g => g.receive(n, lease).await)
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
        let g = self.inner.clone();
        awaitable(py, async move {
            let got = both!(group g, g => g.receive(n, lease).await)?;
            Ok(Delivery::all(got))
        })
    }

    /// Ack a record's claim. `LeaseLost` when the lease ended or was taken over.
    fn ack(&self, py: Python<'_>, receipt: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = crate::message::receipt(receipt)?;
        block_on(py, async { both!(group &self.inner, g => g.ack(r).await) })
    }

    /// `ack`, awaitable.
    fn ack_async<'py>(
        &self,
        py: Python<'py>,
        receipt: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let r = crate::message::receipt(receipt)?;
        let g = self.inner.clone();
        awaitable(py, async move { both!(group g, g => g.ack(r).await) })
    }

    /// A failed attempt: the record comes back after `retry_in` seconds (the group's ladder
    /// when None) or becomes the group's dead letter; returns "retried" or "dead".
    #[pyo3(signature = (receipt, error="", retry_in=None))]
    fn nack(
        &self,
        py: Python<'_>,
        receipt: &Bound<'_, PyAny>,
        error: &str,
        retry_in: Option<f64>,
    ) -> PyResult<&'static str> {
        let r = self::receipt(receipt)?;
        let retry_in = retry_in
            .map(|s| convert::seconds("retry_in", s))
            .transpose()?;
        let outcome = block_on(py, async {
            both!(group &self.inner, g => g.nack(r, retry_in, error).await)
        })?;
        Ok(match outcome {
            sqlmq::queue::NackOutcome::DeadLettered => "dead",
            _ => "retried",
        })
    }

    /// Push the lease's end to `lease` seconds from now.
    #[pyo3(signature = (receipt, lease=30.0))]
    fn extend(&self, py: Python<'_>, receipt: &Bound<'_, PyAny>, lease: f64) -> PyResult<()> {
        let r = self::receipt(receipt)?;
        let lease = convert::seconds("lease", lease)?;
        block_on(py, async {
            both!(group &self.inner, g => g.extend(r, lease).await)
        })
    }

    fn __repr__(&self) -> String {
        format!("Group({:?})", self.name())
    }
}
