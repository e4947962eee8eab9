//! Alerts, computed from the latest snapshot and the history: the database unreachable,
//! consume timeouts, growing lag, rising dead letters, silent worker processes, a backed-up
//! queue, InnoDB's history list length held long, a schedule no process fires.

use std::time::Duration;

use maud::{Markup, html};
use sqlmq::Backend;

use super::layout::{Nav, age, enc, page};
use super::{Page, PageContext};
use crate::history::History;
use crate::snapshot::Snapshot;

/// How far back "growing" and "rising" look.
pub const TREND_WINDOW: Duration = Duration::from_secs(5 * 60);
/// A worker silent this long has missed its heartbeats.
pub use crate::snapshot::SILENT_AFTER;
/// A queue whose oldest ready message is older than this is backed up.
pub const BACKED_UP_AFTER: Duration = Duration::from_secs(5 * 60);

/// InnoDB's history list length above which the server's undo history is "long", once it has
/// lasted [`HISTORY_LIST_LONG_FOR`] (docs/alerts/sqlmq.rules.yml's `SqlmqInnodbHistoryListLong`
/// uses the same figures).
///
/// Why 100 000: sqlmq's own transactions are short, and its 30-minute soak at 200 msg/s with
/// retries and dead letters kept the length between about 100 and 500 (docs/BENCHMARKS.md,
/// "Soak"), so this is 200 times the healthy level; it takes a transaction held open (or a
/// purge that cannot keep up) for minutes of traffic to get there. And it is where a queue
/// pays: the rows claims and acks delete stay in the indexes, delete-marked, until purged, and
/// every claim steps over those at the head of `ready`. Measured on MariaDB 10.11 (2026-11-26,
/// a table shaped as `ready`, a read view held open while 8 sessions each inserted 4 rows and
/// deleted the 4 at the head of their queue, one transaction each, 6 500 times): at a length
/// of 104 000, with 26 000 delete-marked rows at the head of one queue, its claim (`SELECT …
/// ORDER BY priority, id LIMIT 10 FOR UPDATE SKIP LOCKED`) took 3.9 ms against 40–60 µs on a
/// clean index, and 37 µs once the read view was closed and purge had removed all 104 000 (in
/// under 3 s). A lower threshold would fire on the ordinary
/// long readers of a busy server (a `mysqldump --single-transaction`, a report) that purge
/// absorbs as soon as they end.
pub const HISTORY_LIST_LONG: u64 = 100_000;
/// How long the history list length must stay above [`HISTORY_LIST_LONG`] before it alerts:
/// long enough to let a batch job's transaction end and purge catch up (seconds, once nothing
/// holds it back), the same 5 minutes as a backed-up queue.
pub const HISTORY_LIST_LONG_FOR: Duration = Duration::from_secs(5 * 60);

/// A schedule this far past its next fire time is not being fired: no process runs a worker,
/// `consume`, `subscribe` or `serve` on its database, or they cannot reach it (a pass fires
/// what is due within seconds; docs/alerts/sqlmq.rules.yml's `SqlmqScheduleNotFiring` uses the
/// same figure).
pub const SCHEDULE_OVERDUE_AFTER: Duration = Duration::from_secs(120);

/// One active alert.
pub struct Alert {
    /// What it is about (queue, `topic/group`, process id, "database").
    pub subject: String,
    /// What is wrong.
    pub text: String,
    /// Where to look.
    pub link: String,
}

/// Every active alert.
pub fn compute(s: &Snapshot, h: &History) -> Vec<Alert> {
    let mut out = Vec::new();
    if !s.up {
        let since = s
            .down_since
            .and_then(|t| t.elapsed().ok())
            .map(|d| format!(" for {}", age(Some(d.as_millis() as u64))))
            .unwrap_or_default();
        out.push(Alert {
            subject: "database".into(),
            text: format!(
                "unavailable{since}, retrying: {}",
                s.error.as_deref().unwrap_or("not read yet")
            ),
            link: "/".into(),
        });
    }
    for (label, n) in &s.consume_timeouts {
        if *n > 0 {
            out.push(Alert {
                subject: label.clone(),
                text: format!("{n} record(s) held longer than the group's consume timeout"),
                link: group_link(label),
            });
        }
    }
    for g in &s.groups {
        let label = format!("{}/{}", g.topic, g.group);
        if let Some((before, now)) =
            h.change_over(TREND_WINDOW, |x| x.groups.get(&label).map(|p| p.unconsumed))
            && now > before
        {
            out.push(Alert {
                subject: label.clone(),
                text: format!("lag growing: {before} → {now} unconsumed in the last 5 minutes"),
                link: group_link(&label),
            });
        }
        if let Some((before, now)) =
            h.change_over(TREND_WINDOW, |x| x.groups.get(&label).map(|p| p.dead))
            && now > before
        {
            out.push(Alert {
                subject: label.clone(),
                text: format!("dead letters rising: {before} → {now} in the last 5 minutes"),
                link: group_link(&label),
            });
        }
    }
    for q in &s.queues {
        if let Some((before, now)) =
            h.change_over(TREND_WINDOW, |x| x.queues.get(&q.name).map(|p| p.dead))
            && now > before
        {
            out.push(Alert {
                subject: q.name.clone(),
                text: format!("dead letters rising: {before} → {now} in the last 5 minutes"),
                link: format!("/queues/{}", enc(&q.name)),
            });
        }
        if let Some(a) = q.oldest_ready_age()
            && a > BACKED_UP_AFTER
            && !q.paused
        {
            out.push(Alert {
                subject: q.name.clone(),
                text: format!(
                    "backed up: the oldest ready message waits for {}",
                    age(Some(a.as_millis() as u64))
                ),
                link: format!("/queues/{}", enc(&q.name)),
            });
        }
    }
    if let Some(length) = s.history_list_length.as_ref().and_then(|h| h.length())
        && h.above_for(HISTORY_LIST_LONG_FOR, HISTORY_LIST_LONG, |x| {
            x.history_list_length
        })
    {
        out.push(Alert {
            subject: "database".into(),
            text: format!(
                "InnoDB history list length {length}, above {HISTORY_LIST_LONG} for 5 minutes: \
                 a transaction held open or a lagging purge keeps undo from being purged, and \
                 every claim steps over the rows not purged yet. Find the oldest transaction \
                 (information_schema.innodb_trx ordered by trx_started) and end it; if none is \
                 old, purge lags behind the writes (innodb_purge_threads)"
            ),
            link: "/alerts#innodb-history".into(),
        });
    }
    for (name, late) in s.schedules_overdue() {
        if late > SCHEDULE_OVERDUE_AFTER {
            out.push(Alert {
                subject: name.to_owned(),
                text: format!(
                    "{} past its fire time: no process fires schedules (every worker, sqlmq \
                     consume, subscribe and serve does)",
                    age(Some(late.as_millis() as u64))
                ),
                link: "/schedules".into(),
            });
        }
    }
    for p in &s.processes {
        if p.silent_for > SILENT_AFTER {
            out.push(Alert {
                subject: p.id.clone(),
                text: format!(
                    "silent for {}: missed its heartbeats (its claims are released by live peers)",
                    age(Some(p.silent_for.as_millis() as u64))
                ),
                link: "/processes".into(),
            });
        }
    }
    out
}

fn group_link(label: &str) -> String {
    let (t, g) = label.split_once('/').unwrap_or((label, ""));
    format!("/topics/{}/groups/{}", enc(t), enc(g))
}

/// A list of alerts (or a calm line).
pub fn list(alerts: &[Alert]) -> Markup {
    html! {
        @if alerts.is_empty() {
            p.muted #no-alerts { "No active alerts." }
        } @else {
            @for a in alerts {
                div.alert { b { a href=(a.link) { (a.subject) } } ": " (a.text) }
            }
        }
    }
}

/// `GET /alerts`.
pub async fn show<B: Backend>(cx: PageContext<B>) -> Page {
    let snapshot = cx.state.snapshot();
    let alerts = {
        let h = cx.state.history.lock().expect("poisoned");
        compute(&snapshot, &h)
    };
    let body = html! {
        h1 { "Alerts" }
        (list(&alerts))
        h2 { "What is checked" }
        ul.muted {
            li { "Database unavailable: unreachable, at its connection limit or out of space (the background refresh failed); sqlmq serve keeps running and retries." }
            li { "Consume timeouts: records held longer than their group's consume_timeout." }
            li { "Growing lag and rising dead letters over the last 5 minutes (from this server's history)." }
            li { "Worker processes silent for more than 15 s (three missed heartbeats)." }
            li { "Queues whose oldest ready message is older than 5 minutes." }
            li { "Recurring schedules more than 2 minutes past their fire time (no process fires them)." }
            li #innodb-history {
                "InnoDB history list length above " (HISTORY_LIST_LONG) " for 5 minutes (a transaction held open, or purge lagging): "
                @match (&snapshot.history_list_length, snapshot.taken_at) {
                    (_, None) => { "not read yet." }
                    (Some(sqlmq::admin::HistoryListLength::Length(n)), _) => { "now " b #history-list-length { (n) } "." }
                    (Some(sqlmq::admin::HistoryListLength::Unavailable(why)), _) => { "unavailable — " (why) }
                    (Some(_), _) => { "unavailable." }
                    (None, _) => { "not applicable (no InnoDB: SQLite)." }
                }
            }
        }
        p.muted { "Figures refreshed every " (cx.state.metrics_refresh.as_secs_f64()) " s by a background task." }
    };
    Ok(page("Alerts", Nav::Alerts, cx.chrome(), body))
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use sqlmq::admin::HistoryListLength::{Length, Unavailable};

    use super::*;
    use crate::history::Sample;

    /// A snapshot whose history list length is `now`, and a history of `lengths` a minute
    /// apart (the last one taken with the snapshot).
    fn seen(now: Option<sqlmq::admin::HistoryListLength>, lengths: &[u64]) -> (Snapshot, History) {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut h = History::default();
        for (i, n) in lengths.iter().enumerate() {
            h.push(Sample {
                at: Some(start + Duration::from_secs(60 * i as u64)),
                history_list_length: Some(*n),
                ..Sample::default()
            });
        }
        let s = Snapshot {
            up: true,
            taken_at: Some(start + Duration::from_secs(60 * lengths.len() as u64)),
            history_list_length: now,
            ..Snapshot::default()
        };
        (s, h)
    }

    fn history_alerts(s: &Snapshot, h: &History) -> Vec<String> {
        compute(s, h)
            .into_iter()
            .filter(|a| a.text.contains("history list length"))
            .map(|a| format!("{}: {}", a.subject, a.text))
            .collect()
    }

    #[test]
    fn a_history_list_long_for_five_minutes_alerts() {
        let long = HISTORY_LIST_LONG + 1;
        let (s, h) = seen(Some(Length(long)), &[long; 6]);
        let alerts = history_alerts(&s, &h);
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert!(alerts[0].starts_with("database: InnoDB history list length 100001, above 100000"));
        assert!(
            alerts[0].contains("information_schema.innodb_trx"),
            "{alerts:?}"
        );
    }

    #[test]
    fn a_short_or_moderate_history_list_does_not_alert() {
        let long = 2 * HISTORY_LIST_LONG;
        for (now, lengths) in [
            // Long for four minutes only.
            (
                Some(Length(long)),
                vec![1_000, long, long, long, long, long],
            ),
            // Long, with a dip within the five minutes.
            (Some(Length(long)), vec![long, long, 500, long, long, long]),
            // At the threshold, not above it.
            (Some(Length(HISTORY_LIST_LONG)), vec![HISTORY_LIST_LONG; 6]),
            // Healthy.
            (Some(Length(300)), vec![300; 10]),
        ] {
            let (s, h) = seen(now, &lengths);
            assert!(history_alerts(&s, &h).is_empty(), "{lengths:?}");
        }
        // Unknown now (no InnoDB, or the server would not tell): no alert, whatever before.
        for now in [None, Some(Unavailable("PROCESS".into()))] {
            let (s, h) = seen(now, &[long; 6]);
            assert!(history_alerts(&s, &h).is_empty());
        }
    }
}
