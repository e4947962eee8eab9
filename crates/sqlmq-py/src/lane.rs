//! The threads that run a worker's plain (not `async`) Python handlers.
//!
//! A handler call needs a thread that may block (a handler may wait on I/O for seconds) and
//! the GIL. Taking a thread of the runtime's blocking pool and the GIL anew for every message
//! cost two thread switches and a GIL handoff per message: on two cores a no-op Python worker ran
//! at 0.55–0.63× of the runtime's own no-op handler with 8 slots (docs/BENCHMARKS.md, "Python").
//! A lane is a few threads of its own, each holding the GIL from one call to the next while
//! calls are waiting, and letting it go only to wait for more: calls that arrive together run
//! back to back under one acquisition, while a handler that blocks in I/O (which releases the
//! GIL) lets another thread of the lane run the next call meanwhile.

use pyo3::prelude::*;

/// One call to run with the GIL.
type Job = Box<dyn FnOnce(Python<'_>) + Send>;

/// A lane of `threads` threads; they end when the lane is dropped.
pub(crate) struct Lane {
    jobs: crossbeam_channel::Sender<Job>,
}

impl Lane {
    /// A lane of `threads` threads (at least one).
    pub(crate) fn new(threads: usize) -> std::io::Result<Lane> {
        let (jobs, waiting) = crossbeam_channel::unbounded::<Job>();
        for _ in 0..threads.max(1) {
            let waiting = waiting.clone();
            std::thread::Builder::new()
                .name("sqlmq-python".into())
                .spawn(move || run(&waiting))?;
        }
        Ok(Lane { jobs })
    }

    /// Run `f` with the GIL on a thread of the lane; its value, or `None` when the lane's
    /// threads are gone.
    pub(crate) async fn call<T, F>(&self, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(Python<'_>) -> T + Send + 'static,
    {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |py| {
            let _ = answer.send(f(py));
        });
        self.jobs.send(job).ok()?;
        answered.await.ok()
    }
}

/// A lane's thread: wait for a call with the GIL released; then run it, and every call waiting
/// after it, before letting the GIL go again.
fn run(waiting: &crossbeam_channel::Receiver<Job>) {
    Python::attach(|py| {
        while let Some(job) = py.detach(|| waiting.recv().ok()) {
            job(py);
            while let Ok(job) = waiting.try_recv() {
                job(py);
            }
        }
    });
}
