//! Alerts, computed from the latest snapshot and the history: the database unreachable,
//! consume timeouts, growing lag, rising dead letters, silent worker processes, a backed-up
//! queue.

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
            li { "InnoDB history list length: not available — the sqlmq library does not report it yet." }
        }
        p.muted { "Figures refreshed every " (cx.state.metrics_refresh.as_secs_f64()) " s by a background task." }
    };
    Ok(page("Alerts", Nav::Alerts, cx.chrome(), body))
}
