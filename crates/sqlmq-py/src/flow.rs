//! Batches from Python: members sent together, and callbacks sent once, by the ack that
//! finishes the batch.

use pyo3::prelude::*;

use crate::backend::{AnyClient, both};
use crate::message::message;
use crate::runtime::block_on;

/// A created batch: its `id` and its `members`' message ids.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct BatchCreated {
    id: String,
    members: Vec<String>,
}

/// A batch's progress: `state` ("open", "sealed", "finished") and its members' counts.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct BatchStatus {
    id: String,
    state: &'static str,
    members: u64,
    pending: u64,
    succeeded: u64,
    dead: u64,
    cancelled: u64,
}

/// A callback: `(queue, body)`.
type Callback<'py> = Option<(String, Bound<'py, PyAny>)>;

/// Create a batch of `members` (messages or bodies) on `queue`, with its callbacks.
pub(crate) fn create(
    py: Python<'_>,
    client: &AnyClient,
    queue: &str,
    members: Vec<Bound<'_, PyAny>>,
    on_success: Callback<'_>,
    on_failure: Callback<'_>,
    on_complete: Callback<'_>,
) -> PyResult<BatchCreated> {
    let mut batch = sqlmq::flow::Batch::new();
    for m in &members {
        batch = batch.add(queue, message(m)?);
    }
    if let Some((q, body)) = on_success {
        batch = batch.on_success(q, message(&body)?);
    }
    if let Some((q, body)) = on_failure {
        batch = batch.on_failure(q, message(&body)?);
    }
    if let Some((q, body)) = on_complete {
        batch = batch.on_complete(q, message(&body)?);
    }
    let created = block_on(py, async {
        both!(client, c => c.create_batch(batch).await)
    })?;
    Ok(BatchCreated {
        id: created.id.to_string(),
        members: created.members.iter().map(ToString::to_string).collect(),
    })
}

/// The batch `id`'s progress.
pub(crate) fn status(py: Python<'_>, client: &AnyClient, id: &str) -> PyResult<BatchStatus> {
    let id: sqlmq::flow::BatchId = id.parse().map_err(crate::errors::to_py)?;
    let s = block_on(py, async { both!(client, c => c.batch(id).await) })?;
    Ok(BatchStatus {
        id: s.id.to_string(),
        state: match s.state {
            sqlmq::flow::BatchState::Open => "open",
            sqlmq::flow::BatchState::Sealed => "sealed",
            _ => "finished",
        },
        members: s.members,
        pending: s.pending,
        succeeded: s.succeeded,
        dead: s.dead,
        cancelled: s.cancelled,
    })
}
