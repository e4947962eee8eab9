//! [`FairnessKey`]: a fair queue's key as `Queue.fairness_keys` lists it.

use pyo3::prelude::*;

/// A fairness key of a fair queue: its weight, what it has waiting and in flight, and its
/// counters (their rates are the key's arrival and completion rates).
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct FairnessKey {
    key: String,
    weight: u32,
    ready: u64,
    in_flight: u64,
    /// Age of the oldest ready message in seconds (0 when none).
    oldest_ready_age: f64,
    arrived: u64,
    settled: u64,
}

#[pymethods]
impl FairnessKey {
    fn __repr__(&self) -> String {
        format!(
            "FairnessKey(key={:?}, weight={}, ready={}, in_flight={}, arrived={}, settled={})",
            self.key, self.weight, self.ready, self.in_flight, self.arrived, self.settled
        )
    }
}

impl From<sqlmq::queue::FairnessKey> for FairnessKey {
    fn from(k: sqlmq::queue::FairnessKey) -> FairnessKey {
        FairnessKey {
            key: k.key,
            weight: k.weight,
            ready: k.ready,
            in_flight: k.in_flight,
            oldest_ready_age: k.oldest_ready_ms as f64 / 1000.0,
            arrived: k.arrived,
            settled: k.settled,
        }
    }
}
