//! The database snapshot behind `/metrics` and the dashboard's charts, and the background task
//! that refreshes it.
//!
//! Reading every queue's counts and every group's lag costs a handful of queries per object;
//! doing it on each Prometheus scrape would tie the scrape's latency to the database's and let
//! several scrapers multiply the load. So one task reads everything every `metrics_refresh`
//! (10 s by default) and scrapes render the last snapshot.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use sqlmq::Backend;

use crate::history::Sample;
use crate::state::AppState;

/// How many fairness keys of each fair queue `/metrics` exports: the busiest, so that a
/// queue of many tenants does not make a series per tenant.
pub const FAIRNESS_KEYS: usize = 10;
/// Window of the topic ranking's rates.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// A worker process silent this long has missed its heartbeats (the library's 5 s × 3): the
/// dashboard says so, and `/metrics` counts it in `sqlmq_processes_silent`.
pub const SILENT_AFTER: Duration = Duration::from_secs(15);

/// Everything the refresher read from the database at one time.
///
/// ```
/// let s = sqlmq_serve::Snapshot::default();
/// assert!(!s.up && s.queues.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Snapshot {
    /// When the last successful read finished.
    pub taken_at: Option<SystemTime>,
    /// Whether the last read succeeded.
    pub up: bool,
    /// Why the last read failed.
    pub error: Option<String>,
    /// Since when the reads fail (the first failed read after a good one).
    pub down_since: Option<SystemTime>,
    /// Every queue's counts.
    pub queues: Vec<sqlmq::queue::QueueStats>,
    /// The fairness keys with the most messages ready (ten at most) of each fair
    /// queue, by queue name.
    pub fairness_keys: BTreeMap<String, Vec<sqlmq::queue::FairnessKey>>,
    /// Every topic's size and rate, busiest first.
    pub topics: Vec<sqlmq::topic::TopicStats>,
    /// Every group's lag, by topic then group.
    pub groups: Vec<sqlmq::topic::GroupLag>,
    /// Registered worker processes.
    pub processes: Vec<sqlmq::admin::ProcessInfo>,
    /// Records held past their group's consume timeout, by `topic/group`.
    pub consume_timeouts: BTreeMap<String, usize>,
    /// InnoDB's history list length, or why the server would not tell; `None` where the
    /// database has no undo history (SQLite).
    pub history_list_length: Option<sqlmq::admin::HistoryListLength>,
    /// Every recurring schedule.
    pub schedules: Vec<sqlmq::schedule::Schedule>,
    /// The database's clock when the schedules were read (what their fire times count by).
    pub database_time: Option<SystemTime>,
}

impl Snapshot {
    /// How far past its next fire time each schedule that is not paused is, by the
    /// database's clock (zero while it is not due).
    pub fn schedules_overdue(&self) -> Vec<(&str, std::time::Duration)> {
        let Some(now) = self.database_time else {
            return Vec::new();
        };
        self.schedules
            .iter()
            .filter(|s| !s.paused)
            .filter_map(|s| {
                let next = s.next_fire?;
                Some((
                    s.name.as_str(),
                    now.duration_since(next).unwrap_or_default(),
                ))
            })
            .collect()
    }
}

/// Read everything once.
pub(crate) async fn collect<B: Backend>(client: &sqlmq::Client<B>) -> sqlmq::Result<Snapshot> {
    let queues = client.queue_stats().await?;
    let mut fairness_keys = BTreeMap::new();
    for (name, config) in client.queue_configs().await? {
        if !config.fair {
            continue;
        }
        let queue = match client.queue(&name).await {
            Ok(queue) => queue,
            // Deleted since the configurations were read.
            Err(sqlmq::Error::UnknownQueue(_)) => continue,
            Err(e) => return Err(e),
        };
        fairness_keys.insert(name, queue.fairness_keys(FAIRNESS_KEYS).await?);
    }
    let topics = client.topic_stats(RATE_WINDOW).await?;
    let mut groups = Vec::new();
    let mut consume_timeouts = BTreeMap::new();
    for topic in client.topics().await? {
        for group in topic.groups().await? {
            // Group maintenance is what finds records held past the consume timeout; it is
            // safe to run from any number of processes (it also releases expired leases).
            if group.config().consume_timeout.is_some()
                && group.config().mode == sqlmq::topic::GroupMode::Cluster
            {
                let report = group.maintain().await?;
                consume_timeouts.insert(
                    format!("{}/{}", topic.name(), group.name()),
                    report.consume_timeouts,
                );
            }
            groups.push(group.lag().await?);
        }
    }
    let processes = client.processes().await?;
    // A figure the server refuses to this user is "unavailable", not a failed read.
    let history_list_length = client.history_list_length().await?;
    let schedules = client.schedules().await?;
    let database_time = Some(client.database_time().await?);
    Ok(Snapshot {
        taken_at: Some(SystemTime::now()),
        up: true,
        error: None,
        down_since: None,
        queues,
        fairness_keys,
        topics,
        groups,
        processes,
        consume_timeouts,
        history_list_length,
        schedules,
        database_time,
    })
}

/// Say once why the history list length is unavailable (and once that it is back), rather
/// than at every refresh.
fn log_history_change(before: &Snapshot, now: &Snapshot) {
    use sqlmq::admin::HistoryListLength::Unavailable;
    match (&before.history_list_length, &now.history_list_length) {
        (Some(Unavailable(_)), Some(Unavailable(_))) => {}
        (_, Some(Unavailable(reason))) => tracing::info!(
            %reason,
            "InnoDB's history list length is unavailable: no gauge sqlmq_innodb_history_list_length, no alert"
        ),
        (Some(Unavailable(_)), Some(_)) => {
            tracing::info!("InnoDB's history list length is readable again")
        }
        _ => {}
    }
}

/// Refresh once: on failure keep the previous figures but mark the database down.
pub(crate) async fn refresh<B: Backend>(state: &AppState<B>) {
    let timeout = state.metrics_refresh.max(Duration::from_secs(5));
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(timeout, collect(&state.client)).await;
    let outage = state.client.outage();
    let next = match result {
        Ok(Ok(snapshot)) => {
            outage.succeeded();
            snapshot
        }
        failed => {
            let reason = match failed {
                // An unavailable database is logged once, when the outage starts.
                Ok(Err(e)) if outage.failed_since(&e, started) => e.to_string(),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "reading the database gauges failed");
                    e.to_string()
                }
                _ => {
                    let reason = format!("no answer within {timeout:?}");
                    outage.begin("unreachable", &reason);
                    reason
                }
            };
            let mut previous = (*state.snapshot()).clone();
            previous.up = false;
            previous.error = Some(reason);
            previous.down_since = previous.down_since.or(Some(SystemTime::now()));
            previous
        }
    };
    if next.up {
        log_history_change(&state.snapshot(), &next);
        let traffic = state.traffic.lock().expect("poisoned").clone();
        let sample = Sample::of(&next, &traffic);
        state.history.lock().expect("poisoned").push(sample);
    }
    *state.snapshot.write().expect("poisoned") = std::sync::Arc::new(next);
}

/// While the database is down (or just back), how often the refresher looks whether it is
/// (still) back, so that the dashboard and the log say so soon.
const DOWN_REFRESH: Duration = Duration::from_secs(1);

/// The refresher: runs until the server shuts down.
pub(crate) async fn run<B: Backend>(state: AppState<B>) {
    loop {
        refresh(&state).await;
        // Until the outage is over (its end is confirmed by a success a while after the last
        // failure), look again soon.
        let wait = if state.snapshot().up && state.client.outage().current().is_none() {
            state.metrics_refresh
        } else {
            state.metrics_refresh.min(DOWN_REFRESH)
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = state.shutdown.cancelled() => return,
        }
    }
}
