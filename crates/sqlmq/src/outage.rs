//! [`Outage`]: a process waiting for its database — unreachable, at its connection limit, or
//! out of space — told once when it starts and once when it ends, not once per failed call.
//!
//! Long-running processes (the worker runtime, `sqlmq consume`, `subscribe`, `serve`) never
//! exit on these conditions: each is a moment's condition of the server, and a process that
//! exits makes its supervisor's restart loop hold the server at its limit. They retry with
//! backoff and report here; every [`Client`](crate::Client) has one ([`Client::outage`]).
//!
//! An outage ends at the first success at least [`Outage::SETTLE`] after its last failure:
//! at a connection limit, connections already pooled keep working while new ones are refused,
//! so successes and failures interleave, and ending at the first success would log the
//! outage again and again.
//!
//! [`Client::outage`]: crate::Client::outage

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use rand::RngExt;
use tokio_util::sync::CancellationToken;

use crate::domain::{Error, ErrorClass, Result};

/// Longest wait between two attempts while waiting out an outage: short enough that a process
/// is back at work within a few seconds of the server's return.
const MAX_PAUSE: Duration = Duration::from_millis(1600);

/// Sleep `wait`; false when `stop` came first.
pub(crate) async fn sleep_unless_stopped(wait: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => true,
        _ = stop.cancelled() => false,
    }
}

/// The outage in progress.
#[derive(Debug)]
struct Current {
    kind: &'static str,
    reason: String,
    started: Instant,
    since: SystemTime,
    last_failure: Instant,
}

/// Whether a process is waiting for its database, and since when.
///
/// ```
/// let outage = sqlmq::client::Outage::default();
/// let err = sqlmq::Error::from(sqlx::Error::Io(std::io::Error::other("connection refused")));
/// assert!(outage.failed(&err)); // logs "waiting for the database" once
/// assert_eq!(outage.current().unwrap().kind, "unreachable");
/// assert!(outage.failed(&err)); // still the same outage: not logged again
/// ```
#[derive(Debug, Default)]
pub struct Outage {
    /// Whether `state` holds an outage: lets [`Outage::succeeded`], called after every claim
    /// of every worker loop, skip the lock in the usual case.
    active: AtomicBool,
    state: Mutex<State>,
}

/// An [`Outage`]'s state, behind one lock.
#[derive(Debug, Default)]
struct State {
    /// The outage in progress.
    current: Option<Current>,
    /// When the last outage ended: a failure of an attempt begun before it belongs to that
    /// outage (a pool acquire that waited through it, say), not to a new one.
    ended: Option<Instant>,
}

/// What an [`Outage`] in progress is about.
///
/// ```
/// let outage = sqlmq::client::Outage::default();
/// outage.begin("unreachable", "cannot reach 127.0.0.1:3306");
/// let now = outage.current().unwrap();
/// assert_eq!(now.reason, "cannot reach 127.0.0.1:3306");
/// assert!(now.since <= std::time::SystemTime::now());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutageReport {
    /// `unreachable`, `no_connection` (the pool got none in time), `connection_limit` or
    /// `out_of_space` (the label of `sqlmq_database_waits_total`).
    pub kind: &'static str,
    /// The first error of the outage, for humans.
    pub reason: String,
    /// When it started.
    pub since: SystemTime,
}

impl Outage {
    /// How long after its last failure a success ends an outage.
    ///
    /// ```
    /// assert_eq!(sqlmq::client::Outage::SETTLE, std::time::Duration::from_secs(2));
    /// ```
    pub const SETTLE: Duration = Duration::from_secs(2);

    /// The wait before the next attempt after `failures` failures in a row (1-based): 50 ms
    /// doubling up to 1.6 s, with jitter so that a fleet of processes does not retry in step.
    ///
    /// ```
    /// let wait = sqlmq::client::Outage::pause(3);
    /// assert!(wait >= std::time::Duration::from_millis(200) && wait <= std::time::Duration::from_millis(400));
    /// ```
    pub fn pause(failures: u32) -> Duration {
        let cap = Duration::from_millis(50)
            .saturating_mul(1 << failures.min(6))
            .min(MAX_PAUSE);
        cap.mul_f64(rand::rng().random_range(0.5..1.0))
    }

    /// What kind of wait `err` means, or `None` when it is not the database being unavailable
    /// (a client mistake, a deadlock, a fatal error).
    ///
    /// ```
    /// use sqlmq::Error;
    /// use sqlmq::client::Outage;
    /// let refused = Error::from(sqlx::Error::Io(std::io::Error::other("refused")));
    /// assert_eq!(Outage::kind_of(&refused), Some("unreachable"));
    /// assert_eq!(Outage::kind_of(&Error::UnknownQueue("q".into())), None);
    /// ```
    pub fn kind_of(err: &Error) -> Option<&'static str> {
        match err {
            Error::ConnectionLimit { .. } => Some("connection_limit"),
            Error::DatabaseFull { .. } => Some("out_of_space"),
            e if e.class() == Some(ErrorClass::Reconnect) => Some("unreachable"),
            // The pool opened no connection in time: the server refusing or slow to accept
            // them, or every pooled one busy for that long.
            e if e.class() == Some(ErrorClass::Busy) => Some("no_connection"),
            _ => None,
        }
    }

    /// Note a failed call: starts an outage (logged, counted) when `err` is one and none is in
    /// progress. Returns whether `err` is an outage's kind of error (the caller waits and
    /// retries); other errors are left to the caller.
    ///
    /// ```
    /// let outage = sqlmq::client::Outage::default();
    /// assert!(!outage.failed(&sqlmq::Error::UnknownQueue("q".into())));
    /// assert!(outage.current().is_none());
    /// ```
    pub fn failed(&self, err: &Error) -> bool {
        self.failed_since(err, Instant::now())
    }

    /// [`Outage::failed`] for an attempt begun at `attempt_started`: a failure of an attempt
    /// begun before the last outage ended (a pool acquire that waited through the outage and
    /// timed out just after it) does not start a new one.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let outage = sqlmq::client::Outage::default();
    /// let refused = sqlmq::Error::from(sqlx::Error::PoolTimedOut);
    /// let started = Instant::now();
    /// outage.begin("unreachable", "refused");
    /// outage.end();
    /// assert!(outage.failed_since(&refused, started)); // an outage's error: wait and retry
    /// assert!(outage.current().is_none()); // but the outage it belongs to is over
    /// ```
    pub fn failed_since(&self, err: &Error, attempt_started: Instant) -> bool {
        let Some(kind) = Self::kind_of(err) else {
            return false;
        };
        let mut state = self.state.lock().expect("poisoned");
        let stale = state.ended.is_some_and(|ended| attempt_started < ended);
        if !stale || state.current.is_some() {
            self.begin_locked(&mut state, kind, &err.to_string());
        }
        true
    }

    /// Note a failure of kind `kind` (see [`OutageReport::kind`]) described by `reason`: starts
    /// an outage unless one is in progress.
    ///
    /// ```
    /// let outage = sqlmq::client::Outage::default();
    /// outage.begin("connection_limit", "Too many connections");
    /// assert_eq!(outage.current().unwrap().kind, "connection_limit");
    /// ```
    pub fn begin(&self, kind: &'static str, reason: &str) {
        self.begin_locked(&mut self.state.lock().expect("poisoned"), kind, reason);
    }

    fn begin_locked(&self, state: &mut State, kind: &'static str, reason: &str) {
        let now = Instant::now();
        if let Some(c) = state.current.as_mut() {
            c.last_failure = now;
            return;
        }
        self.active.store(true, Ordering::Release);
        tracing::warn!(kind, "waiting for the database, retrying: {reason}");
        metrics::counter!(crate::telemetry::catalogue::DATABASE_WAITS.name(), "kind" => kind)
            .increment(1);
        metrics::gauge!(crate::telemetry::catalogue::DATABASE_WAITING.name()).set(1.0);
        state.current = Some(Current {
            kind,
            reason: reason.to_owned(),
            started: now,
            since: SystemTime::now(),
            last_failure: now,
        });
    }

    /// Note a call that succeeded: ends the outage in progress (logged) when its last failure
    /// is at least [`Outage::SETTLE`] ago.
    ///
    /// ```
    /// let outage = sqlmq::client::Outage::default();
    /// outage.begin("unreachable", "refused");
    /// outage.succeeded(); // too soon after the failure: still waiting
    /// assert!(outage.current().is_some());
    /// ```
    pub fn succeeded(&self) {
        if !self.active.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state.lock().expect("poisoned");
        let settled = state
            .current
            .as_ref()
            .is_some_and(|c| c.last_failure.elapsed() >= Self::SETTLE);
        if settled {
            self.end_locked(&mut state);
        }
    }

    /// End the outage in progress now (logged), however recent its last failure: for a caller
    /// whose success proves the database back, such as a connection that was just opened.
    ///
    /// ```
    /// let outage = sqlmq::client::Outage::default();
    /// outage.begin("unreachable", "refused");
    /// outage.end();
    /// assert!(outage.current().is_none());
    /// ```
    pub fn end(&self) {
        self.end_locked(&mut self.state.lock().expect("poisoned"));
    }

    fn end_locked(&self, state: &mut State) {
        if let Some(c) = state.current.take() {
            self.active.store(false, Ordering::Release);
            state.ended = Some(Instant::now());
            tracing::warn!(
                kind = c.kind,
                "the database is available again after {:.1?}",
                c.started.elapsed()
            );
            metrics::gauge!(crate::telemetry::catalogue::DATABASE_WAITING.name()).set(0.0);
        }
    }

    /// Run `call` until it succeeds, fails with an error that is not the database being
    /// unavailable (returned), or `stop` is cancelled (`Ok(None)`); between attempts, wait with
    /// jittered backoff (50 ms doubling to 1.6 s) and report the outage here.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let stop = sqlmq::worker::CancellationToken::new();
    /// let queue = client.outage().wait_out(&stop, || client.queue("emails")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_out<T, F, Fut>(
        &self,
        stop: &CancellationToken,
        mut call: F,
    ) -> Result<Option<T>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut failures = 0;
        loop {
            let started = Instant::now();
            match call().await {
                Ok(value) => {
                    self.succeeded();
                    return Ok(Some(value));
                }
                Err(e) if self.failed_since(&e, started) => {
                    failures += 1;
                    if !sleep_unless_stopped(Self::pause(failures), stop).await {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The outage in progress, if any.
    ///
    /// ```
    /// assert!(sqlmq::client::Outage::default().current().is_none());
    /// ```
    pub fn current(&self) -> Option<OutageReport> {
        let state = self.state.lock().expect("poisoned");
        state.current.as_ref().map(|c| OutageReport {
            kind: c.kind,
            reason: c.reason.clone(),
            since: c.since,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Error {
        Error::from(sqlx::Error::Io(std::io::Error::other("refused")))
    }

    #[test]
    fn pauses_grow_and_stay_bounded() {
        for failures in 1..40 {
            let p = Outage::pause(failures);
            assert!(p <= MAX_PAUSE, "{p:?}");
            assert!(p >= Duration::from_millis(50), "{p:?}");
        }
        assert!(Outage::pause(30) >= MAX_PAUSE / 2);
    }

    #[tokio::test]
    async fn wait_out_retries_an_outage_and_returns_other_errors() {
        let outage = Outage::default();
        let stop = CancellationToken::new();
        let mut calls = 0;
        let got = outage
            .wait_out(&stop, || {
                calls += 1;
                let n = calls;
                async move { if n < 3 { Err(refused()) } else { Ok(n) } }
            })
            .await
            .unwrap();
        assert_eq!(got, Some(3));
        let err = outage
            .wait_out(&stop, || async {
                Err::<(), _>(Error::UnknownQueue("q".into()))
            })
            .await
            .unwrap_err();
        assert!(matches!(err, Error::UnknownQueue(_)));
        stop.cancel();
        let stopped = outage
            .wait_out(&stop, || async { Err::<(), _>(refused()) })
            .await;
        assert_eq!(stopped.unwrap(), None);
    }

    #[test]
    fn an_outage_ends_only_after_a_quiet_success() {
        let outage = Outage::default();
        assert!(outage.failed(&refused()));
        {
            let mut state = outage.state.lock().unwrap();
            let c = state.current.as_mut().unwrap();
            c.last_failure -= Outage::SETTLE;
        }
        outage.succeeded();
        assert!(outage.current().is_none());
        outage.succeeded();
        assert!(outage.current().is_none());
    }

    #[test]
    fn a_new_failure_keeps_the_first_reason_and_start() {
        let outage = Outage::default();
        outage.begin("connection_limit", "first");
        let since = outage.current().unwrap().since;
        outage.begin("unreachable", "second");
        let now = outage.current().unwrap();
        assert_eq!(
            (now.kind, now.reason.as_str()),
            ("connection_limit", "first")
        );
        assert_eq!(now.since, since);
    }

    #[test]
    fn only_unavailability_is_an_outage() {
        let deadlock = Error::retry_transaction("deadlock");
        assert_eq!(Outage::kind_of(&deadlock), None);
        assert_eq!(
            Outage::kind_of(&Error::from(sqlx::Error::PoolTimedOut)),
            Some("no_connection")
        );
        assert_eq!(
            Outage::kind_of(&Error::DatabaseFull {
                source: sqlx::Error::Protocol("full".into())
            }),
            Some("out_of_space")
        );
    }
}
