//! Recurring schedules from Python: each fire time sends one message (or publishes one record),
//! whatever the number of processes firing them.

use std::collections::BTreeMap;

use pyo3::prelude::*;

use crate::backend::{AnyClient, both};
use crate::convert;
use crate::errors::InvalidInput;
use crate::runtime::block_on;

/// A schedule as stored: its `name`, whether it is `paused`, its `next_fire` and `last_fired`
/// times (UTC datetimes, or None) and how many times it `fired`.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct Schedule {
    name: String,
    paused: bool,
    next_fire: Option<Py<PyAny>>,
    last_fired: Option<Py<PyAny>>,
    fired: u64,
}

impl Schedule {
    fn of(py: Python<'_>, s: sqlmq::schedule::Schedule) -> PyResult<Schedule> {
        let time =
            |t: Option<std::time::SystemTime>| t.map(|t| convert::datetime(py, t)).transpose();
        Ok(Schedule {
            name: s.name,
            paused: s.paused,
            next_fire: time(s.next_fire)?,
            last_fired: time(s.last_fired)?,
            fired: s.fired,
        })
    }
}

#[pymethods]
impl Schedule {
    fn __repr__(&self) -> String {
        format!("Schedule({:?}, fired {})", self.name, self.fired)
    }
}

/// What `Client.create_schedule` is given.
pub(crate) struct Spec {
    pub queue: Option<String>,
    pub topic: Option<String>,
    pub every: Option<f64>,
    pub cron: Option<String>,
    pub tz: String,
    pub body: Vec<u8>,
    pub key: Option<String>,
    pub priority: i16,
    pub headers: BTreeMap<String, String>,
}

/// Create (or replace) the schedule `name` of `spec`.
pub(crate) fn create(
    py: Python<'_>,
    client: &AnyClient,
    name: &str,
    spec: Spec,
) -> PyResult<Schedule> {
    let timing = match (spec.every, spec.cron) {
        (Some(secs), None) => sqlmq::schedule::Timing::Every(convert::seconds("every", secs)?),
        (None, Some(expr)) => sqlmq::schedule::Timing::cron(expr, spec.tz),
        _ => {
            return Err(InvalidInput::new_err(
                "give every (seconds) or cron, one of them",
            ));
        }
    };
    let target = match (spec.queue, spec.topic) {
        (Some(q), None) => sqlmq::schedule::ScheduleTarget::Queue(q),
        (None, Some(t)) => sqlmq::schedule::ScheduleTarget::Topic(t),
        _ => return Err(InvalidInput::new_err("give queue or topic, one of them")),
    };
    let mut config = sqlmq::schedule::ScheduleConfig::new(timing, target)
        .body(spec.body)
        .priority(spec.priority);
    if let Some(key) = spec.key {
        config = config.key(key);
    }
    for (k, v) in spec.headers {
        config = config.header(k, v);
    }
    let stored = block_on(py, async {
        both!(client, c => c.create_schedule(name, config).await)
    })?;
    Schedule::of(py, stored)
}

/// Every schedule.
pub(crate) fn all(py: Python<'_>, client: &AnyClient) -> PyResult<Vec<Schedule>> {
    let all = block_on(py, async { both!(client, c => c.schedules().await) })?;
    all.into_iter().map(|s| Schedule::of(py, s)).collect()
}

/// Delete the schedule `name`.
pub(crate) fn delete(py: Python<'_>, client: &AnyClient, name: &str) -> PyResult<()> {
    block_on(py, async {
        both!(client, c => c.delete_schedule(name).await)
    })
}
