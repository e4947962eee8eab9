//! `/queues/{queue}`: counts by state, depth and throughput charts, find a message in any
//! state, the messages of each state a page at a time, dead letters with their error history
//! (redrive one or all, purge), pause/resume, purge; its settings, limits included; a fair
//! queue's keys with their weight, share and backlog (weights set here).

use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use sqlmq::Backend;

use super::chart::{Series, line_chart};
use super::layout::{Nav, action, age, enc, page, preview};
use super::{Page, PageContext, messages, respond};
use crate::api::browse::QueuedMessageOut;
use crate::api::fairness::FairnessKeyOut;
use crate::api::model::DeadLetterOut;
use crate::api::queues::QueueConfigOut;
use crate::error::ApiError;

/// `?id=` or `?key=`: find a message; `?state=` (and `after=`): the page of messages shown.
#[derive(Deserialize, Default)]
pub struct Find {
    id: Option<String>,
    key: Option<String>,
    state: Option<String>,
    after: Option<String>,
}

/// How many dead letters a search looks through.
const SEARCH_LIMIT: usize = 10_000;
/// How many dead letters the page lists.
const LIST_LIMIT: usize = 100;

fn dead_table(queue: &str, dead: &[DeadLetterOut], write: bool) -> Markup {
    let base = format!("/ui/queues/{}", enc(queue));
    html! {
        table #dead {
            tr { th { "id" } th.n { "attempts" } th { "died" } th { "key" } th { "body" } th { "error history" }
                 @if write { th { "" } } }
            @for d in dead {
                tr {
                    td { code { (d.id) } } td.n { (d.attempts) } td { (d.died_at) }
                    td { (d.ordering_key.as_deref().unwrap_or("")) }
                    td { pre { (preview(&d.body, &d.body_base64)) } }
                    td {
                        @for e in &d.errors { div { "#" (e.attempt) " " span.muted { (e.at) } " " (e.error) } }
                    }
                    @if write {
                        td {
                            (action(&format!("{base}/dead/redrive"), "Redrive", None, &[("id", &d.id)]))
                            " "
                            (action(&format!("{base}/messages/{}/delete", enc(&d.id)), "Delete",
                                Some(&format!("Delete dead letter {} for good?", d.id)), &[]))
                        }
                    }
                }
            }
            @if dead.is_empty() { tr { td colspan="7" .muted { "No dead letters." } } }
        }
    }
}

/// A queue's limits as the settings line shows them: `at most 2 in flight`,
/// `rate limit 100/1m` (nothing for a queue without limits).
fn limits(c: &QueueConfigOut) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = c.max_in_flight {
        out.push(format!("at most {n} in flight"));
    }
    if let Some(r) = &c.rate_limit {
        out.push(format!("rate limit {r}"));
    }
    if let Some(n) = c.concurrency_limit {
        out.push(format!("at most {n} per concurrency key"));
    }
    if let Some(r) = &c.rate_limit_per_key {
        out.push(format!("rate limit {r} per concurrency key"));
    }
    out
}

/// How many fairness keys the page lists.
const KEYS_LIMIT: usize = 20;

/// A fair queue's keys: weight, share of claims while they all have messages ready (weight
/// over the sum of the listed ready keys' weights), ready and in-flight counts, oldest ready
/// age; and a form setting a key's weight.
fn keys_section(queue: &str, keys: &[FairnessKeyOut], write: bool) -> Markup {
    let active: u64 = keys
        .iter()
        .filter(|k| k.ready > 0)
        .map(|k| u64::from(k.weight))
        .sum();
    let base = format!("/ui/queues/{}", enc(queue));
    html! {
        h2 { "Fairness keys" }
        table #fair-keys {
            tr { th { "key" } th.n { "weight" } th.n { "share" } th.n { "ready" } th.n { "in flight" } th { "oldest ready" } }
            @for k in keys {
                @let share = if k.ready > 0 && active > 0 {
                    format!("{:.0}%", 100.0 * f64::from(k.weight) / active as f64)
                } else {
                    "—".to_owned()
                };
                tr {
                    td { code { @if k.key.is_empty() { span.muted { "(none)" } } @else { (k.key) } } }
                    td.n { (k.weight) } td.n { (share) } td.n { (k.ready) } td.n { (k.in_flight) }
                    td { (age((k.ready > 0).then_some(k.oldest_ready_ms))) }
                }
            }
            @if keys.is_empty() { tr { td colspan="6" .muted { "No key has messages ready or in flight." } } }
        }
        p.muted { "The " (KEYS_LIMIT) " keys with the most messages ready; share: of deliveries while every key listed with messages ready has some." }
        @if write {
            form.inline #set-weight method="post" action=(format!("{base}/weight")) {
                input name="key" placeholder="fairness key" required;
                " " input name="weight" type="number" min="1" max="10000" value="1" size="6";
                " " button type="submit" { "Set weight" }
            }
        }
    }
}

fn charts<B: Backend>(cx: &PageContext<B>, name: &str) -> Markup {
    let h = cx.state.history.lock().expect("poisoned");
    let point = |f: fn(&crate::history::QueuePoint) -> u64| {
        h.series(|s| s.queues.get(name).map(|p| f(p) as f64))
    };
    let depth = [
        Series {
            name: "ready".into(),
            points: point(|p| p.ready),
        },
        Series {
            name: "scheduled".into(),
            points: point(|p| p.scheduled),
        },
        Series {
            name: "in flight".into(),
            points: point(|p| p.in_flight),
        },
        Series {
            name: "dead".into(),
            points: point(|p| p.dead),
        },
    ];
    let throughput = [
        Series {
            name: "sent via HTTP".into(),
            points: h.rate(|s| s.queues.get(name).map(|p| p.traffic.sent)),
        },
        Series {
            name: "acked via HTTP".into(),
            points: h.rate(|s| s.queues.get(name).map(|p| p.traffic.acked)),
        },
    ];
    html! {
        div.row {
            div { (line_chart("Depth", "msgs", &depth)) }
            div { (line_chart("Throughput through this server", "/min", &throughput)) }
        }
    }
}

async fn render<B: Backend>(cx: PageContext<B>, name: String, find: Find) -> Page {
    let q = crate::api::queues::one(&cx.state, &name).await?;
    let queue = cx.state.queue(&name).await?;
    let write = cx.access.can_write();
    let id = find.id.as_deref().unwrap_or("").trim().to_owned();
    let key = find.key.as_deref().unwrap_or("").trim().to_owned();
    let searching = !id.is_empty() || !key.is_empty();
    // A search looks in every state: the message with that id wherever it is, the messages
    // of that key waiting or in flight; dead letters with that key are the dead table's.
    let mut found: Vec<QueuedMessageOut> = Vec::new();
    if !id.is_empty() {
        found.extend(
            queue
                .message(id.parse()?)
                .await?
                .map(QueuedMessageOut::from),
        );
    }
    if !key.is_empty() {
        let by_key = queue.messages_by_key(&key, messages::PAGE).await?;
        found.extend(by_key.into_iter().map(QueuedMessageOut::from));
    }
    let limit = if searching { SEARCH_LIMIT } else { LIST_LIMIT };
    let mut dead: Vec<DeadLetterOut> = queue
        .dead_letters(limit)
        .await?
        .into_iter()
        .map(DeadLetterOut::from)
        .collect();
    if searching {
        dead.retain(|d| {
            (!id.is_empty() && d.id == id)
                || (!key.is_empty() && d.ordering_key.as_deref() == Some(key.as_str()))
        });
    }
    let state: sqlmq::inspect::MessageState = match find.state.as_deref() {
        None | Some("") => sqlmq::inspect::MessageState::Ready,
        Some(s) => s.parse().map_err(ApiError::from)?,
    };
    let listing = messages::section(
        &queue,
        &q,
        state,
        find.after.as_deref().filter(|a| !a.is_empty()),
        write,
    )
    .await?;
    let keys = if q.config.fair {
        crate::api::fairness::keys_of(&cx.state, &name, KEYS_LIMIT).await?
    } else {
        Vec::new()
    };
    let base = format!("/ui/queues/{}", enc(&name));
    let body = html! {
        h1 { "Queue " (q.name) @if q.paused { " " span.badge { "paused" } } }
        div.cards {
            div.card #count-ready { b { (q.ready) } "ready" }
            div.card #count-scheduled { b { (q.scheduled) } "scheduled" }
            div.card #count-blocked { b { (q.blocked) } "blocked" }
            div.card #count-waiting title="waiting for dependencies, or for their batch (callbacks)" { b { (q.waiting) } "waiting" }
            div.card #count-in-flight { b { (q.in_flight) } "in flight" }
            div.card #count-dead { b { (q.dead) } "dead" }
            div.card { b { (age(q.oldest_ready_age_ms)) } "oldest ready" }
        }
        p.muted #settings { "max attempts " (q.config.max_attempts) " · backoff " (q.config.backoff)
                  " · idempotency window " (age(Some(q.config.dedup_window_ms)))
                  @for limit in limits(&q.config) { " · " (limit) }
                  @if q.config.fair { " · fair across fairness keys" } }
        @if write {
            p #actions {
                @if q.paused { (action(&format!("{base}/resume"), "Resume", None, &[])) }
                @else { (action(&format!("{base}/pause"), "Pause", Some(&format!("Pause queue {name}? Consumers get nothing until it is resumed.")), &[])) }
                " "
                (action(&format!("{base}/purge"), "Purge queue", Some(&format!("Delete every message of {name} (dead letters excepted), in-flight ones included?")), &[]))
            }
        }
        (charts(&cx, &name))
        @if q.config.fair { (keys_section(&name, &keys, write)) }
        h2 { "Find a message" }
        form method="get" action=(format!("/queues/{}", enc(&name))) {
            input name="id" placeholder="message id" value=[find.id.as_deref()] size="40";
            " or "
            input name="key" placeholder="ordering or idempotency key" value=[find.key.as_deref()];
            " " button type="submit" { "Find" }
            @if searching { " " a href=(format!("/queues/{}", enc(&name))) { "clear" } }
        }
        @if searching {
            (messages::table("found", &name, &found, write))
            p.muted { "Looks in every state; dead letters with the key are among the oldest " (SEARCH_LIMIT) " below." }
        }
        (listing)
        h2 { "Dead letters" @if searching { " matching" } }
        @if write && q.dead > 0 {
            p {
                (action(&format!("{base}/dead/redrive"), "Redrive all", Some(&format!("Put all {} dead letters of {name} back into the queue?", q.dead)), &[("all", "1")]))
                " "
                (action(&format!("{base}/dead/purge"), "Purge dead letters", Some(&format!("Delete all {} dead letters of {name} for good?", q.dead)), &[]))
            }
        }
        (dead_table(&name, &dead, write))
    };
    Ok(page(&format!("Queue {name}"), Nav::None, cx.chrome(), body))
}

/// `GET /queues/{queue}`.
pub async fn show<B: Backend>(
    cx: PageContext<B>,
    Path(name): Path<String>,
    axum::extract::Query(find): axum::extract::Query<Find>,
) -> Response {
    respond(render(cx, name, find).await)
}
