//! [`ServeConfig`]: where to listen, the tokens, and the server's limits, with their defaults.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;

/// Default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default interval of the background task that reads the database gauges (`/metrics`,
/// dashboard charts): a scrape never waits on the database.
pub const DEFAULT_METRICS_REFRESH: Duration = Duration::from_secs(10);
/// Longest long poll a client may ask for (`wait_ms`).
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// Default largest request body: room for a batch of sixteen 1 MiB messages in base64.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// How long the dashboard's charts look back.
pub const HISTORY_WINDOW: Duration = Duration::from_secs(3600);

/// How `sqlmq serve` runs.
///
/// ```
/// use std::time::Duration;
/// let config = sqlmq_serve::ServeConfig::default()
///     .listen("127.0.0.1:0".parse().unwrap())
///     .token("s3cret")
///     .read_token("look-only")
///     .metrics_refresh(Duration::from_secs(5));
/// assert!(config.auth_enabled());
/// ```
#[derive(Clone)]
pub struct ServeConfig {
    pub(crate) listen: SocketAddr,
    pub(crate) token: Option<String>,
    pub(crate) read_token: Option<String>,
    pub(crate) metrics_refresh: Duration,
    pub(crate) max_wait: Duration,
    pub(crate) poll: (Duration, Duration),
    pub(crate) max_body_bytes: usize,
    pub(crate) prometheus: Option<PrometheusHandle>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: DEFAULT_LISTEN.parse().expect("valid default address"),
            token: None,
            read_token: None,
            metrics_refresh: DEFAULT_METRICS_REFRESH,
            max_wait: MAX_WAIT,
            poll: (crate::POLL_FLOOR, crate::POLL_CEILING),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            prometheus: None,
        }
    }
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the tokens.
        f.debug_struct("ServeConfig")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("read_token", &self.read_token.as_ref().map(|_| "***"))
            .field("metrics_refresh", &self.metrics_refresh)
            .field("max_wait", &self.max_wait)
            .field("poll", &self.poll)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl ServeConfig {
    /// Address to listen on (default `127.0.0.1:8080`; port 0 picks a free port). Without a
    /// token only loopback addresses are accepted.
    ///
    /// ```
    /// let c = sqlmq_serve::ServeConfig::default().listen("127.0.0.1:9000".parse().unwrap());
    /// # let _ = c;
    /// ```
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// The full-access bearer token (reads and writes).
    ///
    /// ```
    /// let c = sqlmq_serve::ServeConfig::default().token("s3cret");
    /// # let _ = c;
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The read-only bearer token: GET requests, and the dashboard without its actions.
    ///
    /// ```
    /// let c = sqlmq_serve::ServeConfig::default().read_token("look-only");
    /// # let _ = c;
    /// ```
    pub fn read_token(mut self, token: impl Into<String>) -> Self {
        self.read_token = Some(token.into());
        self
    }

    /// Interval of the database gauges' refresh (default 10 s).
    ///
    /// ```
    /// let c = sqlmq_serve::ServeConfig::default().metrics_refresh(std::time::Duration::from_secs(30));
    /// # let _ = c;
    /// ```
    pub fn metrics_refresh(mut self, every: Duration) -> Self {
        self.metrics_refresh = every.max(Duration::from_millis(50));
        self
    }

    /// Cap on long polls (default and most: 20 s). A request asking for more waits this long.
    ///
    /// ```
    /// let c = sqlmq_serve::ServeConfig::default().max_wait(std::time::Duration::from_secs(5));
    /// # let _ = c;
    /// ```
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.max_wait = wait.min(MAX_WAIT);
        self
    }

    /// How often the database is looked at while long polls wait and no send or publish
    /// through this server wakes them: first after `floor`, doubling up to `ceiling` (defaults
    /// 10 ms and 60 ms; the ceiling bounds the latency of a message sent by another process).
    /// Every waiting receive of the server shares one probe per pause, one statement for all
    /// queues (and one for all cluster groups), however many requests wait; a broadcast
    /// member's poll looks on its own. `floor` is at least 1 ms and `ceiling` at least `floor`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = sqlmq_serve::ServeConfig::default()
    ///     .poll_interval(Duration::from_millis(50), Duration::from_secs(1));
    /// # let _ = c;
    /// ```
    pub fn poll_interval(mut self, floor: Duration, ceiling: Duration) -> Self {
        let floor = floor.max(Duration::from_millis(1));
        self.poll = (floor, ceiling.max(floor));
        self
    }

    /// Largest accepted request body in bytes (default 32 MiB); larger ones get 413.
    ///
    /// ```
    /// let c = sqlmq_serve::ServeConfig::default().max_body_bytes(4 << 20);
    /// # let _ = c;
    /// ```
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The Prometheus recorder's handle, whose rendering (the library's counters and
    /// histograms) `/metrics` serves before the database gauges. Without it, `/metrics` has the
    /// database gauges only. See [`install_prometheus_recorder`](crate::install_prometheus_recorder).
    ///
    /// ```no_run
    /// let handle = sqlmq_serve::install_prometheus_recorder();
    /// let c = sqlmq_serve::ServeConfig::default().prometheus(handle);
    /// # let _ = c;
    /// ```
    pub fn prometheus(mut self, handle: PrometheusHandle) -> Self {
        self.prometheus = Some(handle);
        self
    }

    /// Whether requests must carry a token (one of the tokens is set).
    ///
    /// ```
    /// assert!(!sqlmq_serve::ServeConfig::default().auth_enabled());
    /// ```
    pub fn auth_enabled(&self) -> bool {
        self.token.is_some() || self.read_token.is_some()
    }

    /// Refuse what cannot be served safely: no token on a non-loopback address, empty tokens,
    /// or the same token for both levels.
    pub(crate) fn check(&self) -> Result<(), crate::ServeError> {
        use crate::ServeError::*;
        if [&self.token, &self.read_token]
            .iter()
            .any(|t| t.as_deref().is_some_and(|t| t.trim().is_empty()))
        {
            return Err(InvalidConfig("a token must not be empty".into()));
        }
        if self.token.is_some() && self.token == self.read_token {
            return Err(InvalidConfig(
                "the read-only token must differ from the full-access token".into(),
            ));
        }
        if !self.auth_enabled() && !self.listen.ip().is_loopback() {
            return Err(NonLoopbackWithoutToken(self.listen));
        }
        Ok(())
    }
}
