//! Cancels of running messages reaching their handlers: one watcher per queue of a worker.
//!
//! A cancel moves the message's lease into `cancels` (`store/body/running.rs`). While any
//! handler of the queue runs past its first poll, the watcher reads the queue's cancels — an
//! index range that is empty nearly always — when this process cancelled one, when the follower
//! of the database's commits saw a cancel (MySQL: a row inserted into `cancels`; SQLite: any
//! commit), and otherwise every [`CANCEL_POLL`] — or, while notifications are live, every
//! [`NOTIFIED_CEILING`], which only covers a lost notification. It fires the cancellation token
//! of each running job it names (same message, same fencing token). Idle, it reads nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::Subject;
use crate::client::notifications::NOTIFIED_CEILING;
use crate::domain::{MessageId, Receipt};
use crate::queue::Queue;
use crate::store::Backend;

/// How often the cancels of a queue with running handlers are read while notifications are not
/// live: another process's cancel reaches its handler within about this much.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(250);
/// How often an idle watcher looks whether its worker is gone.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The running jobs of one queue whose cancels are watched.
#[derive(Default)]
pub(crate) struct CancelWatch {
    running: Mutex<HashMap<MessageId, (u64, CancellationToken)>>,
    /// A job registered: an idle watcher starts reading.
    registered: Notify,
}

/// A job's registration, ended when dropped.
pub(crate) struct Watched<'a> {
    watch: &'a CancelWatch,
    id: MessageId,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        self.watch
            .running
            .lock()
            .expect("poisoned")
            .remove(&self.id);
    }
}

impl CancelWatch {
    /// Start watching `queue`'s cancels for the jobs registered; the watcher ends with the
    /// last `Arc` of the watch.
    pub(crate) fn start<B: Backend>(queue: Queue<B>) -> Arc<CancelWatch> {
        let watch = Arc::new(CancelWatch::default());
        tokio::spawn(run(queue, Arc::downgrade(&watch)));
        watch
    }

    /// Fire `token` when `receipt`'s message is cancelled, until the returned guard drops.
    pub(crate) fn register(&self, receipt: Receipt, token: CancellationToken) -> Watched<'_> {
        self.running
            .lock()
            .expect("poisoned")
            .insert(receipt.id, (receipt.token, token));
        self.registered.notify_one();
        Watched {
            watch: self,
            id: receipt.id,
        }
    }

    fn idle(&self) -> bool {
        self.running.lock().expect("poisoned").is_empty()
    }

    /// Fire the tokens of the running jobs among `cancelled`.
    fn fire(&self, cancelled: &[Receipt]) {
        let running = self.running.lock().expect("poisoned");
        for r in cancelled {
            if let Some((token, cancel)) = running.get(&r.id)
                && *token == r.token
            {
                cancel.cancel();
            }
        }
    }
}

async fn run<B: Backend>(queue: Queue<B>, watch: Weak<CancelWatch>) {
    let local = queue.client().wakeup(Subject::Cancels(queue.id()));
    loop {
        let Some(w) = watch.upgrade() else { return };
        if w.idle() {
            // Held for at most IDLE_CHECK: a worker gone meanwhile ends this at the next turn.
            let _ = tokio::time::timeout(IDLE_CHECK, w.registered.notified()).await;
            continue;
        }
        drop(w);
        // Listening before the read: a local cancel committed while it runs is not missed.
        let woken = local.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        match queue.cancelled_receipts().await {
            Ok(cancelled) if !cancelled.is_empty() => match watch.upgrade() {
                Some(w) => w.fire(&cancelled),
                None => return,
            },
            Ok(_) => {}
            Err(e) => tracing::debug!(queue = queue.name(), "reading cancels: {e}"),
        }
        let pause = if queue.client().notifications().is_live() {
            NOTIFIED_CEILING
        } else {
            CANCEL_POLL
        };
        let _ = tokio::time::timeout(pause, woken).await;
    }
}
