//! [`AppState`]: what every handler shares — the library client, the tokens, the long-poll
//! wakeups, the broadcast readers, and the latest database snapshot with its history.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use sqlmq::{Backend, DefaultBackend};
use tokio_util::sync::CancellationToken;

use crate::auth::Tokens;
use crate::config::ServeConfig;
use crate::handles::Handles;
use crate::history::History;
use crate::longpoll::Wakeups;
use crate::snapshot::Snapshot;

/// A broadcast member's reader, kept between its HTTP polls (its position lives in memory
/// until it checkpoints).
pub(crate) type SharedReader<B> = Arc<tokio::sync::Mutex<sqlmq::topic::BroadcastReader<B>>>;

/// Broadcast readers by (topic, group, member), with when each was last used.
pub(crate) type Readers<B> = HashMap<(String, String, String), (Instant, SharedReader<B>)>;

/// Shared by every handler: the library's `Client<B>` for backend `B` (MySQL by default), its
/// cached handles, and the server's own state. Cheap to clone.
///
/// ```no_run
/// async fn refresh<B: sqlmq::Backend>(server: &sqlmq_serve::Server<B>) {
///     let state: sqlmq_serve::AppState<B> = server.state().clone();
///     state.refresh_gauges().await; // read the database gauges now
/// }
/// ```
pub struct AppState<B: Backend = DefaultBackend> {
    pub(crate) inner: Arc<Inner<B>>,
}

// Not derived: a derive would require `B: Clone`, and a backend is a marker type.
impl<B: Backend> Clone for AppState<B> {
    fn clone(&self) -> Self {
        AppState {
            inner: self.inner.clone(),
        }
    }
}

/// The state behind [`AppState`] (its fields are private to the crate).
#[doc(hidden)]
pub struct Inner<B: Backend> {
    pub(crate) client: sqlmq::Client<B>,
    pub(crate) tokens: Tokens,
    pub(crate) max_wait: Duration,
    /// Long polls' first and longest pause between polls.
    pub(crate) poll: (Duration, Duration),
    pub(crate) metrics_refresh: Duration,
    pub(crate) prometheus: Option<metrics_exporter_prometheus::PrometheusHandle>,
    pub(crate) wakeups: Wakeups,
    /// Queue, topic and group handles, cached briefly.
    pub(crate) handles: Handles<B>,
    /// Cancelled when the server shuts down: long polls return at once (empty).
    pub(crate) shutdown: CancellationToken,
    /// Broadcast readers by (topic, group, member), with when each was last used.
    pub(crate) readers: tokio::sync::Mutex<Readers<B>>,
    /// The latest database snapshot (gauges, dashboard), replaced by the refresher.
    pub(crate) snapshot: RwLock<Arc<Snapshot>>,
    /// Rolling samples for the dashboard's charts.
    pub(crate) history: Mutex<History>,
    /// Messages sent and acked through this server, per queue (throughput charts).
    pub(crate) traffic: Mutex<HashMap<String, Traffic>>,
}

/// Counts of what went through this server for one queue (or `topic/group`).
///
/// ```
/// let t = sqlmq_serve::Traffic::default();
/// assert_eq!((t.sent, t.acked), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Messages sent (or records published).
    pub sent: u64,
    /// Messages (or records) acked.
    pub acked: u64,
}

impl<B: Backend> std::ops::Deref for AppState<B> {
    type Target = Inner<B>;
    fn deref(&self) -> &Inner<B> {
        &self.inner
    }
}

impl<B: Backend> AppState<B> {
    /// Read the database gauges now instead of waiting for the next background refresh.
    ///
    /// ```no_run
    /// # async fn f(s: sqlmq_serve::Server) { s.state().refresh_gauges().await; }
    /// ```
    pub async fn refresh_gauges(&self) {
        crate::snapshot::refresh(self).await
    }

    pub(crate) fn new(client: sqlmq::Client<B>, config: &ServeConfig) -> AppState<B> {
        client.set_probe_interval(config.poll.0, config.poll.1);
        client.start_notifications();
        AppState {
            inner: Arc::new(Inner {
                client,
                tokens: Tokens {
                    full: config.token.clone(),
                    read: config.read_token.clone(),
                },
                max_wait: config.max_wait,
                poll: config.poll,
                metrics_refresh: config.metrics_refresh,
                prometheus: config.prometheus.clone(),
                wakeups: Wakeups::default(),
                handles: Handles::default(),
                shutdown: CancellationToken::new(),
                readers: tokio::sync::Mutex::default(),
                snapshot: RwLock::new(Arc::new(Snapshot::default())),
                history: Mutex::default(),
                traffic: Mutex::default(),
            }),
        }
    }

    /// The latest snapshot.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().expect("poisoned").clone()
    }

    /// Count traffic through this server for `subject`.
    pub(crate) fn count(&self, subject: &str, sent: u64, acked: u64) {
        let mut map = self.traffic.lock().expect("poisoned");
        let t = map.entry(subject.to_owned()).or_default();
        t.sent += sent;
        t.acked += acked;
    }
}
