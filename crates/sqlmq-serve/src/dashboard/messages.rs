//! The queue page's messages: one state a page at a time (tabs with their counts, a link to
//! the next page), and the table that shows them or a search's finds. Read without a lease.

use maud::{Markup, html};
use sqlmq::Backend;
use sqlmq::inspect::MessageState;

use super::layout::{action, enc, preview};
use crate::api::browse::QueuedMessageOut;
use crate::api::queues::QueueOut;

/// Messages on one page.
pub const PAGE: usize = 50;

/// A state's tab: its name in the query string, its label, its count.
fn tabs(q: &QueueOut) -> [(MessageState, &'static str, u64); 5] {
    [
        (MessageState::Ready, "ready", q.ready),
        (MessageState::Scheduled, "scheduled", q.scheduled),
        (MessageState::Blocked, "blocked", q.blocked),
        (MessageState::InFlight, "in flight", q.in_flight),
        (MessageState::Waiting, "waiting", q.waiting),
    ]
}

/// When the message's state ends (scheduled, blocked: due; in flight: the lease's end) or
/// began (dead).
fn when(m: &QueuedMessageOut) -> &str {
    match m.state.as_str() {
        "in_flight" => m.lease_until.as_deref(),
        "dead" => m.died_at.as_deref(),
        "scheduled" => m.run_at.as_deref(),
        _ => None,
    }
    .unwrap_or("")
}

/// How far a running handler got: a bar when its progress says a fraction (a number from 0 to
/// 1, or `done` of `total`/`of`), and the JSON itself.
pub fn progress_cell(value: &serde_json::Value) -> Markup {
    let fraction = match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::Object(o) => {
            let done = o.get("done").and_then(serde_json::Value::as_f64);
            let total = o
                .get("total")
                .or_else(|| o.get("of"))
                .and_then(serde_json::Value::as_f64);
            match (done, total) {
                (Some(d), Some(t)) if t > 0.0 => Some(d / t),
                _ => None,
            }
        }
        _ => None,
    }
    .filter(|f| (0.0..=1.0).contains(f));
    html! {
        span.progress-of {
            @if let Some(f) = fraction {
                progress max="100" value=(format!("{:.0}", f * 100.0)) { (format!("{:.0} %", f * 100.0)) }
                " "
            }
            code { (value.to_string()) }
        }
    }
}

/// A table of messages (`id` is the table's element id); cancel buttons with full access (a
/// message a consumer holds is cancelled where it runs).
pub fn table(id: &str, queue: &str, messages: &[QueuedMessageOut], write: bool) -> Markup {
    let base = format!("/ui/queues/{}", enc(queue));
    html! {
        table id=(id) {
            tr { th { "id" } th { "state" } th.n { "priority" } th.n { "attempts" } th { "until / died" }
                 th { "key" } th { "body" } th { "last error" } @if write { th { "" } } }
            @for m in messages {
                tr {
                    td { a href=(format!("/queues/{}/messages/{}", enc(queue), enc(&m.id))) { code { (m.id) } } }
                    td { (m.state) } td.n { (m.priority) } td.n { (m.attempts) }
                    td { (when(m)) @if let Some(p) = &m.progress { br; (progress_cell(p)) } }
                    td { (key_cell(m)) }
                    td { pre { (preview(&m.body, &m.body_base64)) } }
                    td { @if let Some(e) = m.errors.last() { "#" (e.attempt) " " (e.error) } }
                    @if write {
                        td {
                            @if m.state == "in_flight" {
                                (action(&format!("{base}/messages/{}/delete", enc(&m.id)), "Cancel",
                                    Some(&format!("Stop the handler of message {} and remove it for good?", m.id)), &[]))
                            } @else {
                                (action(&format!("{base}/messages/{}/delete", enc(&m.id)), "Cancel",
                                    Some(&format!("Remove message {} for good?", m.id)), &[]))
                            }
                        }
                    }
                }
            }
            @if messages.is_empty() { tr { td colspan="9" .muted { "No messages." } } }
        }
    }
}

/// The state tabs and one page of `state` past `after`.
pub async fn section<B: Backend>(
    queue: &sqlmq::Queue<B>,
    q: &QueueOut,
    state: MessageState,
    after: Option<&str>,
    write: bool,
) -> sqlmq::Result<Markup> {
    let page = queue.browse(state, after, PAGE).await?;
    let mut messages: Vec<QueuedMessageOut> = page.messages.into_iter().map(Into::into).collect();
    if state == MessageState::InFlight {
        // Running handlers' progress: one read for the page (kept for those that report).
        let progress: std::collections::HashMap<String, serde_json::Value> = queue
            .progress_all(PAGE)
            .await?
            .into_iter()
            .map(|p| (p.id.to_string(), p.value))
            .collect();
        for m in &mut messages {
            m.progress = progress.get(&m.id).cloned();
        }
    }
    let here = format!("/queues/{}", enc(&q.name));
    Ok(html! {
        h2 { "Messages" }
        p #states {
            @for (s, label, count) in tabs(q) {
                @if s == state { b { (label) " (" (count) ")" } }
                @else { a href=(format!("{here}?state={}", s.as_str())) { (label) " (" (count) ")" } }
                " "
            }
        }
        (table("messages", &q.name, &messages, write))
        p {
            @if after.is_some() {
                a #first-page href=(format!("{here}?state={}", state.as_str())) { "first page" } " "
            }
            @if let Some(next) = &page.next {
                a #next-page href=(format!("{here}?state={}&after={}", state.as_str(), enc(next))) { "next page →" }
            }
        }
    })
}

/// The key column: an ordering key as it is, a concurrency key marked as one.
fn key_cell(m: &QueuedMessageOut) -> String {
    match (&m.ordering_key, &m.concurrency_key) {
        (Some(k), _) => k.clone(),
        (None, Some(k)) => format!("{k} (concurrency)"),
        (None, None) => String::new(),
    }
}
