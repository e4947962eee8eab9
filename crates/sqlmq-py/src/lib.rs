//! `sqlmq._sqlmq`: the Rust library as a Python extension module; the package `sqlmq`
//! (`python/sqlmq`) re-exports it beside what is easier written in Python.
//!
//! One engine, not a second implementation: every call goes to the library on one tokio
//! runtime, with the GIL released while it waits (`runtime.rs`).
//!
//! | file | what |
//! |---|---|
//! | `lib.rs` | the module: its classes and exceptions |
//! | `runtime.rs` | the tokio runtime; blocking calls with the GIL released; awaitables |
//! | `backend.rs` | one Python class over both backends (an enum of the two, `both!`) |
//! | `client.rs` | `Client`: connect, migrate, queues |
//! | `queue.rs` | `Queue`: send, receive, ack, nack, extend, stats, dead letters |
//! | `message.rs` | `Message`, `Sent`, `Delivery`, `Receipt`, `QueueStats`, `QueuedMessage` |
//! | `fairness.rs` | `FairnessKey`: a fair queue's key, its backlog and counters |
//! | `topic.rs` | `Topic` (publish), `Group` (a consumer group: receive, ack, nack, extend) |
//! | `schedule.rs` | recurring schedules: `Client.create_schedule`, `Schedule` |
//! | `flow.rs` | batches with callbacks: `Client.create_batch`, `Client.batch` |
//! | `convert.rs` | bodies, durations, times, ids, headers between Python and Rust |
//! | `worker.rs` | the worker runtime with Python handlers: `start_worker`, `RunningWorker` |
//! | `lane.rs` | the threads plain handlers run on, each keeping the GIL while calls wait |
//! | `context.rs` | `JobContext`: a handler's message, receipt and lease |
//! | `outcome.rs` | `Retry`, `Snooze`, `DeadLetter`, `Settled`: what a handler returns |
//! | `errors.rs` | the exception classes and how library errors map to them |

mod backend;
mod client;
mod context;
mod convert;
mod errors;
mod fairness;
mod flow;
mod lane;
mod message;
mod outcome;
mod queue;
mod runtime;
mod schedule;
mod topic;
mod worker;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _sqlmq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<queue::Queue>()?;
    m.add_class::<message::Message>()?;
    m.add_class::<message::Sent>()?;
    m.add_class::<message::Delivery>()?;
    m.add_class::<message::Receipt>()?;
    m.add_class::<message::QueueStats>()?;
    m.add_class::<fairness::FairnessKey>()?;
    m.add_class::<message::QueuedMessage>()?;
    m.add_class::<topic::Topic>()?;
    m.add_class::<topic::Group>()?;
    m.add_class::<topic::Published>()?;
    m.add_class::<schedule::Schedule>()?;
    m.add_class::<flow::BatchCreated>()?;
    m.add_class::<flow::BatchStatus>()?;
    m.add_class::<context::JobContext>()?;
    m.add_class::<outcome::Retry>()?;
    m.add_class::<outcome::Snooze>()?;
    m.add_class::<outcome::DeadLetter>()?;
    m.add_class::<outcome::Settled>()?;
    m.add_class::<worker::RunningWorker>()?;
    m.add_function(wrap_pyfunction!(worker::start_worker, m)?)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
