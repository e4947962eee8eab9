//! Notifications: the MySQL answer to LISTEN/NOTIFY. One follower per client reads the
//! database's commits (`store/follow.rs`: MySQL's binary log, SQLite's WAL file) and wakes
//! this process's waiting consumers of exactly what changed, so that its probers can fall back
//! to a slow pace ([`NOTIFIED_CEILING`]) while notifications are live.
//!
//! The follower starts with the first prober (a worker, a long poll) and runs until the client
//! is dropped. Notifications are hints: a woken consumer claims in its own transaction and
//! finds what is there, so a late, lost or doubled notification costs latency or one empty
//! claim, never a message. When the server cannot be followed (no binary log, statement
//! format, a missing grant), one log line says why, [`Client::notifications`] says it too, and
//! the probers keep their usual pace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Client, Inner, Subject};
use crate::store::Backend;
use crate::store::SqlStore;
use crate::store::follow::{Change, FollowEnd, Followed};

/// The probers' longest pause while notifications are live: they then only find what no
/// commit announces (leases running out, retries of consumer groups coming due) and cover a
/// lost notification; delayed messages of queues are announced with their time. A third of a
/// statement a second per prober.
pub const NOTIFIED_CEILING: Duration = Duration::from_secs(3);

/// How long a prober waits after a notification before it probes: the server may announce a
/// commit a moment before it is visible to other transactions (MySQL writes the binary log
/// first), so a consumer woken at once can find nothing; the probe a moment later finds it.
const SETTLE: Duration = Duration::from_millis(5);

/// How long before a follower that was refused (no binary log, a missing grant) tries again.
const OFF_RETRY: Duration = Duration::from_secs(60);
/// The longest pause before a follower that lost its stream reconnects.
const LOST_RETRY_MAX: Duration = Duration::from_secs(30);

/// Whether this client's waiting consumers are woken by the database's commits.
///
/// ```
/// let status = sqlmq::client::NotificationStatus::Off("binlog_format is MIXED".into());
/// assert!(!status.is_live());
/// assert_eq!(status.to_string(), "off: binlog_format is MIXED");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotificationStatus {
    /// Turned off with [`ClientBuilder::notifications`](crate::client::ClientBuilder::notifications),
    /// or the client was made from a pool (no URL to follow with).
    Disabled(String),
    /// Nothing has waited yet: the follower starts with the first waiting consumer.
    NotStarted,
    /// Connecting to the database's change stream.
    Starting,
    /// Following: waiting consumers wake on commits; probes are slow.
    Live,
    /// The database cannot be followed as it is set up (the text says what to change);
    /// waiting consumers poll. Tried again every minute.
    Off(String),
    /// The stream was lost (the text says how); reconnecting, polling meanwhile.
    Reconnecting(String),
}

impl NotificationStatus {
    /// Whether waiting consumers are woken by commits right now.
    ///
    /// ```
    /// assert!(sqlmq::client::NotificationStatus::Live.is_live());
    /// ```
    pub fn is_live(&self) -> bool {
        matches!(self, NotificationStatus::Live)
    }
}

impl std::fmt::Display for NotificationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotificationStatus::Disabled(why) => write!(f, "disabled: {why}"),
            NotificationStatus::NotStarted => f.write_str("not started"),
            NotificationStatus::Starting => f.write_str("starting"),
            NotificationStatus::Live => f.write_str("live"),
            NotificationStatus::Off(why) => write!(f, "off: {why}"),
            NotificationStatus::Reconnecting(why) => write!(f, "reconnecting: {why}"),
        }
    }
}

/// A client's follower: its state and the news it passes to the probers.
pub(crate) struct Notifications {
    /// The URL to follow with; `None` with the reason when disabled.
    url: Result<String, String>,
    started: AtomicBool,
    status: Mutex<NotificationStatus>,
    /// Every change, for the probers (which probe what concerns them a moment later).
    news: broadcast::Sender<Change>,
    /// Cancelled when the client is dropped.
    stop: CancellationToken,
}

impl Notifications {
    /// Notifications following `url`, or disabled for the reason given.
    pub(crate) fn new(url: Result<String, String>) -> Notifications {
        let status = match &url {
            Ok(_) => NotificationStatus::NotStarted,
            Err(why) => NotificationStatus::Disabled(why.clone()),
        };
        Notifications {
            url,
            started: AtomicBool::new(false),
            status: Mutex::new(status),
            news: broadcast::channel(1024).0,
            stop: CancellationToken::new(),
        }
    }

    /// The probers' ceiling: `ceiling`, or [`NOTIFIED_CEILING`] if longer while live.
    pub(crate) fn ceiling(&self, ceiling: Duration) -> Duration {
        if self.status.lock().expect("poisoned").is_live() {
            ceiling.max(NOTIFIED_CEILING)
        } else {
            ceiling
        }
    }

    /// A receiver of the follower's news, for one prober.
    pub(crate) fn subscribe(&self) -> News {
        News {
            rx: self.news.subscribe(),
            dues: BinaryHeap::new(),
        }
    }

    fn set(&self, status: NotificationStatus) {
        let mut current = self.status.lock().expect("poisoned");
        if *current != status {
            match &status {
                NotificationStatus::Live => {
                    tracing::info!("notifications live: waiting consumers wake on commits")
                }
                NotificationStatus::Off(why) => tracing::warn!(
                    "notifications off ({why}); waiting consumers poll the database instead"
                ),
                NotificationStatus::Reconnecting(why) => {
                    tracing::warn!("notifications lost ({why}); reconnecting, polling meanwhile")
                }
                _ => {}
            }
            *current = status;
        }
    }

    /// Stop the follower (the client is being dropped).
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }
}

/// One prober's view of the follower's news.
pub(crate) struct News {
    rx: broadcast::Receiver<Change>,
    /// When delayed messages of this prober's sources come due, earliest first.
    dues: BinaryHeap<Reverse<Instant>>,
}

impl News {
    /// Sleep `delay`, but only until [`SETTLE`] after news that `concerns` accepts (or news
    /// missed because this prober fell behind), or after a delayed message of a source it
    /// concerns comes due.
    pub(crate) async fn sleep(&mut self, delay: Duration, concerns: impl Fn(Change) -> bool) {
        let now = Instant::now();
        while self.dues.peek().is_some_and(|Reverse(at)| *at <= now) {
            self.dues.pop();
        }
        let mut deadline = now + delay;
        if let Some(Reverse(at)) = self.dues.peek() {
            deadline = deadline.min(*at + SETTLE);
        }
        let mut open = true;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                news = self.rx.recv(), if open => match news {
                    Ok(change) if !concerns(change) => {}
                    Ok(Change::Due { at_us, .. }) => {
                        let at = local_instant(at_us);
                        self.dues.push(Reverse(at));
                        deadline = deadline.min(at + SETTLE);
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        deadline = deadline.min(Instant::now() + SETTLE);
                    }
                    Err(broadcast::error::RecvError::Closed) => open = false,
                },
            }
        }
    }
}

/// The local instant of `at_us`, a time of the database's clock (microseconds since the Unix
/// epoch), read with this machine's clock. Only a hint: a clock that differs from the
/// database's makes the probe look early (it finds nothing yet) or late (the slow probe finds
/// it), never wrong.
fn local_instant(at_us: i64) -> Instant {
    let now_us = crate::domain::micros_of_time(std::time::SystemTime::now());
    Instant::now() + Duration::from_micros(at_us.saturating_sub(now_us).max(0) as u64)
}

impl<B: Backend> Client<B> {
    /// Whether this client's waiting consumers (workers, [`receive_wait`](crate::Queue::receive_wait))
    /// are woken by the database's commits, and if not, why.
    ///
    /// On MySQL/MariaDB this needs the binary log in row format and a grant to read it (see
    /// `sqlmq grants`); on SQLite it needs file notifications from the operating system.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) {
    /// println!("notifications: {}", client.notifications());
    /// # }
    /// ```
    pub fn notifications(&self) -> NotificationStatus {
        self.inner
            .wake
            .notifications
            .status
            .lock()
            .expect("poisoned")
            .clone()
    }

    /// Start following the database's commits now rather than with the first waiting
    /// consumer (a server that reports [`Client::notifications`] from its start). Needs a
    /// Tokio runtime; does nothing if the follower runs or notifications are disabled.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) {
    /// client.start_notifications();
    /// # }
    /// ```
    pub fn start_notifications(&self) {
        self.ensure_follower();
    }

    /// Start the follower unless it runs (or notifications are disabled).
    pub(crate) fn ensure_follower(&self) {
        let notes = &self.inner.wake.notifications;
        let Ok(url) = notes.url.clone() else { return };
        if notes.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            notes.started.store(false, Ordering::Release);
            return;
        };
        notes.set(NotificationStatus::Starting);
        let weak = std::sync::Arc::downgrade(&self.inner);
        let store = self.inner.db.store.clone();
        let stop = notes.stop.clone();
        runtime.spawn(async move {
            tokio::select! {
                _ = follow(weak, store, url) => {}
                _ = stop.cancelled() => {}
            }
        });
    }
}

/// Follow the database until the client is gone, reconnecting after losses.
async fn follow<B: Backend>(weak: Weak<Inner<B>>, store: SqlStore<B>, url: String) {
    let mut lost_retry = Duration::from_secs(1);
    loop {
        let report = |followed: Followed| {
            let Some(inner) = weak.upgrade() else { return };
            let client = Client { inner };
            let notes = &client.inner.wake.notifications;
            match followed {
                Followed::Live => {
                    notes.set(NotificationStatus::Live);
                    // What committed before the follower caught up: probe everything once.
                    client.notify_all_cancels();
                    let _ = notes.news.send(Change::Any);
                }
                Followed::Change(change) => {
                    match change {
                        Change::Queue(id) => client.notify_local(Subject::Queue(id)),
                        Change::Topic(id) => client.notify_local(Subject::Topic(id)),
                        Change::Cancel(id) => client.notify_cancel(id),
                        Change::Any => client.notify_all_cancels(),
                        // For the probers, which look when it comes due.
                        Change::Due { .. } => {}
                    }
                    let _ = notes.news.send(change);
                }
            }
        };
        let started = Instant::now();
        // The pool, for the follower's checks; not kept, so the client can still go away.
        let Some(pool) = weak.upgrade().map(|inner| inner.db.pool.clone()) else {
            return;
        };
        let end = B::follow(&store, &pool, &url, &report).await;
        drop(pool);
        let Some(inner) = weak.upgrade() else { return };
        let pause = match end {
            FollowEnd::Off(why) => {
                inner.wake.notifications.set(NotificationStatus::Off(why));
                OFF_RETRY
            }
            FollowEnd::Lost(why) => {
                inner
                    .wake
                    .notifications
                    .set(NotificationStatus::Reconnecting(why));
                if started.elapsed() > LOST_RETRY_MAX {
                    lost_retry = Duration::from_secs(1);
                }
                let pause = lost_retry;
                lost_retry = (lost_retry * 2).min(LOST_RETRY_MAX);
                pause
            }
        };
        // Watchers of cancels that wait on notifications (reading on their own only every
        // `NOTIFIED_CEILING`) go back to reading on their own at once: what was cancelled while
        // the stream was down is not announced again before it is back.
        Client { inner }.notify_all_cancels();
        tokio::time::sleep(pause).await;
    }
}
