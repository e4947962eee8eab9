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

/// A table of messages (`id` is the table's element id); cancel buttons with full access
/// (a message a consumer holds cannot be cancelled).
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
                    td { (when(m)) } td { (key_cell(m)) }
                    td { pre { (preview(&m.body, &m.body_base64)) } }
                    td { @if let Some(e) = m.errors.last() { "#" (e.attempt) " " (e.error) } }
                    @if write {
                        td {
                            @if m.state != "in_flight" {
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
    let messages: Vec<QueuedMessageOut> = page.messages.into_iter().map(Into::into).collect();
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
