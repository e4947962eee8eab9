//! Broadcast long polls: a member's `poll` with `wait_ms` returns as soon as a record comes.
//! (Queue and cluster-group receives wait in the library's `receive_wait`, which shares one
//! probe among all waiting requests.)
//!
//! Neither MySQL nor SQLite has LISTEN/NOTIFY, so a waiting member is woken two ways: at once
//! by a publish through this server (an in-process [`Notify`] per topic, fired after the
//! commit), and otherwise by polling its reader, starting at [`POLL_FLOOR`] and doubling to
//! [`POLL_CEILING`] by default (`ServeConfig::poll_interval`; a read that finds nothing locks
//! nothing).
//!
//! A request whose connection closes is dropped by the HTTP server between two polls: its
//! wait simply ends, and since claims happen only inside `receive`, nothing is claimed for it.
//! On shutdown every wait ends at once with an empty answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// First wait between polls of an empty queue.
pub const POLL_FLOOR: Duration = Duration::from_millis(10);
/// Longest wait between polls: the latency of a wakeup from outside this server.
pub const POLL_CEILING: Duration = Duration::from_millis(60);

/// In-process wakeups by subject (`q:NAME` for queues, `t:NAME` for topics).
#[derive(Default)]
pub(crate) struct Wakeups {
    map: Mutex<HashMap<String, Arc<Notify>>>,
}

impl Wakeups {
    pub fn get(&self, subject: &str) -> Arc<Notify> {
        let mut map = self.map.lock().expect("poisoned");
        map.entry(subject.to_owned()).or_default().clone()
    }

    /// Wake every request waiting on `subject`.
    pub fn wake(&self, subject: &str) {
        if let Some(n) = self.map.lock().expect("poisoned").get(subject) {
            n.notify_waiters();
        }
    }
}

/// Call `attempt` until it returns a non-empty list, `wait` has passed, or `shutdown` fires.
///
/// The `Notified` future is armed before each attempt, so a wakeup fired while the attempt
/// runs is not lost.
pub(crate) async fn wait_for<T, F, Fut, E>(
    notify: Arc<Notify>,
    wait: Duration,
    (floor, ceiling): (Duration, Duration),
    shutdown: &CancellationToken,
    mut attempt: F,
) -> Result<Vec<T>, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<T>, E>>,
{
    let deadline = Instant::now() + wait;
    let mut pause = floor;
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let found = attempt().await?;
        let now = Instant::now();
        if !found.is_empty() || now >= deadline || shutdown.is_cancelled() {
            return Ok(found);
        }
        let sleep_until = (now + pause).min(deadline);
        tokio::select! {
            _ = notified => pause = floor,
            _ = tokio::time::sleep_until(sleep_until) => pause = (pause * 2).min(ceiling),
            _ = shutdown.cancelled() => return Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn returns_at_the_deadline_when_nothing_comes() {
        let calls = AtomicUsize::new(0);
        let start = Instant::now();
        let got: Result<Vec<u8>, ()> = wait_for(
            Arc::default(),
            Duration::from_secs(2),
            (POLL_FLOOR, POLL_CEILING),
            &CancellationToken::new(),
            || {
                calls.fetch_add(1, Ordering::Relaxed);
                async { Ok(vec![]) }
            },
        )
        .await;
        assert!(got.unwrap().is_empty());
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        // Backed off: about one poll per ceiling, far fewer than one per floor interval.
        let n = calls.load(Ordering::Relaxed) as u128;
        let per_ceiling = 2_000 / POLL_CEILING.as_millis();
        assert!(n > 3 && n < per_ceiling + 10, "{n} polls");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wakeup_ends_the_pause_at_once() {
        let notify = Arc::new(Notify::new());
        let ready = Arc::new(AtomicUsize::new(0));
        let (n2, r2) = (notify.clone(), ready.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            r2.store(1, Ordering::Relaxed);
            n2.notify_waiters();
        });
        let start = Instant::now();
        let got: Result<Vec<usize>, ()> = wait_for(
            notify,
            Duration::from_secs(20),
            (POLL_FLOOR, POLL_CEILING),
            &CancellationToken::new(),
            || {
                let v = ready.load(Ordering::Relaxed);
                async move { Ok(if v > 0 { vec![v] } else { vec![] }) }
            },
        )
        .await;
        assert_eq!(got.unwrap(), vec![1]);
        assert!(start.elapsed() < Duration::from_millis(5_010));
    }
}
