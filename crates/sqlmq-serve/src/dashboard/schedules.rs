//! `/schedules`: recurring schedules with their timing, target, next and last fire times and
//! how many they fired; pause and resume (full access only).

use std::time::SystemTime;

use maud::{Markup, html};
use sqlmq::Backend;
use sqlmq::schedule::{ScheduleTarget, Timing};

use super::layout::{Nav, action, age, enc, page};
use super::{Page, PageContext};
use crate::api::schedules::{every_text, rfc3339_within};

/// When a schedule fires, for a human: `0 3 * * * (Europe/Paris)` or `every 1m`.
fn timing(t: &Timing) -> String {
    match t {
        Timing::Cron { expr, zone } => format!("{expr} ({zone})"),
        Timing::Every(d) => format!("every {}", every_text(*d)),
    }
}

/// Where a schedule sends, linked to its page.
fn target(t: &ScheduleTarget) -> Markup {
    match t {
        ScheduleTarget::Queue(q) => {
            html! { "queue " a href=(format!("/queues/{}", enc(q))) { (q) } }
        }
        ScheduleTarget::Topic(t) => {
            html! { "topic " a href=(format!("/topics/{}", enc(t))) { (t) } }
        }
    }
}

/// A fire time with how far it is from now: `2026-01-01T03:00:00.000Z (in 5h 2m)`.
fn when(t: Option<SystemTime>, now: SystemTime) -> Markup {
    let Some(t) = t else {
        return html! { span.muted { "—" } };
    };
    let text = rfc3339_within(t).unwrap_or_else(|| "after the year 9999".to_owned());
    let relative = match t.duration_since(now) {
        Ok(ahead) => format!("in {}", age(Some(ahead.as_millis() as u64))),
        Err(e) => format!("{} ago", age(Some(e.duration().as_millis() as u64))),
    };
    html! { (text) " " span.muted { "(" (relative) ")" } }
}

/// `GET /schedules`.
pub async fn show<B: Backend>(cx: PageContext<B>) -> Page {
    let list = cx.state.client.schedules().await?;
    let write = cx.access.can_write();
    let now = SystemTime::now();
    let body = html! {
        h1 { "Schedules" }
        p.muted { "Each due fire time sends one message (or record) with the headers sqlmq-schedule and sqlmq-fire-time; every running worker, sqlmq consume, subscribe and serve fires them, exactly one of them each fire time." }
        table #schedules {
            tr { th { "name" } th { "timing" } th { "target" } th { "state" } th { "next fire" }
                 th { "last fired" } th.n { "fired" } @if write { th { "" } } }
            @for s in &list {
                tr {
                    td.nowrap { (s.name) }
                    td { code { (timing(&s.config.timing)) } }
                    td { (target(&s.config.target)) }
                    td { @if s.paused { span.badge { "paused" } } @else { "running" } }
                    td { @if s.paused { span.muted { "—" } } @else { (when(s.next_fire, now)) } }
                    td { (when(s.last_fired, now)) }
                    td.n { (s.fired) }
                    @if write {
                        td {
                            @let base = format!("/ui/schedules/{}", enc(&s.name));
                            @if s.paused {
                                (action(&format!("{base}/resume"), "Resume", None, &[]))
                            } @else {
                                (action(&format!("{base}/pause"), "Pause", None, &[]))
                            }
                        }
                    }
                }
            }
            @if list.is_empty() {
                tr { td colspan="8" .muted { "No schedules yet (sqlmq schedule create, or PUT /v1/schedules/{name})." } }
            }
        }
    };
    Ok(page("Schedules", Nav::Schedules, cx.chrome(), body))
}
