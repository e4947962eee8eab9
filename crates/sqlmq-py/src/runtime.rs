//! The one tokio runtime every call of the extension runs on, and the bridge from Python's
//! threads to it.
//!
//! A synchronous call blocks its Python thread on the runtime with the GIL released
//! ([`block_on`]), so other Python threads run while it waits on the database; an `_async`
//! call hands its future to the same runtime and gives asyncio an awaitable ([`awaitable`],
//! through `pyo3-async-runtimes`). The runtime is built once, on the first call: a worker thread
//! per core, as tokio's default.

use std::future::Future;
use std::sync::OnceLock;

use pyo3::prelude::*;

use crate::errors::to_py;

/// The runtime, built on first use and shared with `pyo3-async-runtimes`.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let mut fresh = false;
    let runtime = RUNTIME.get_or_init(|| {
        fresh = true;
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("sqlmq")
            .build()
            .expect("a tokio runtime")
    });
    if fresh {
        // Its futures (the `_async` calls) run here too, not on a runtime of its own.
        let _ = pyo3_async_runtimes::tokio::init_with_runtime(runtime);
    }
    runtime
}

/// Run `future` to its end on the runtime, the GIL released meanwhile; a library error becomes
/// the matching Python exception.
pub(crate) fn block_on<T, F>(py: Python<'_>, future: F) -> PyResult<T>
where
    F: Future<Output = sqlmq::Result<T>> + Send,
    T: Send,
{
    let runtime = runtime();
    py.detach(|| runtime.block_on(future)).map_err(to_py)
}

/// `future` as an asyncio awaitable, run on the runtime; its value is converted to Python when
/// it is ready.
pub(crate) fn awaitable<'py, T, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = sqlmq::Result<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    runtime();
    pyo3_async_runtimes::tokio::future_into_py(py, async move { future.await.map_err(to_py) })
}
