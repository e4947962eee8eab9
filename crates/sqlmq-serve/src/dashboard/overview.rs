//! `/`: everything at a glance.

use maud::{Markup, html};
use sqlmq::Backend;

use super::alerts;
use super::chart::{Series, line_chart};
use super::layout::{Nav, age, enc, page};
use super::{Page, PageContext};
use crate::api::groups::GroupOut;
use crate::api::queues::QueueOut;
use crate::api::topics::TopicOut;
use crate::history::History;

/// The queues table.
pub fn queues_table(queues: &[QueueOut]) -> Markup {
    html! {
        table #queues {
            tr { th { "queue" } th.n { "ready" } th.n { "scheduled" } th.n { "blocked" }
                 th.n { "waiting" } th.n { "in flight" } th.n { "dead" } th { "oldest ready" } th { "state" } }
            @for q in queues {
                tr {
                    td { a href=(format!("/queues/{}", enc(&q.name))) { (q.name) } }
                    td.n { (q.ready) } td.n { (q.scheduled) } td.n { (q.blocked) }
                    td.n { (q.waiting) } td.n { (q.in_flight) } td.n { (q.dead) }
                    td { (age(q.oldest_ready_age_ms)) }
                    td { @if q.paused { span.badge { "paused" } } @else { "running" } }
                }
            }
            @if queues.is_empty() { tr { td colspan="9" .muted { "No queues yet." } } }
        }
    }
}

/// The topic ranking: busiest first.
pub fn topics_table(topics: &[TopicOut]) -> Markup {
    html! {
        table #topics {
            tr { th { "#" } th { "topic" } th.n { "records/s (1 min)" } th.n { "retained" }
                 th.n { "bytes" } th.n { "partitions" } th.n { "groups" } }
            @for (i, t) in topics.iter().enumerate() {
                tr {
                    td { (i + 1) }
                    td { a href=(format!("/topics/{}", enc(&t.name))) { (t.name) } }
                    td.n { (format!("{:.1}", t.rate_per_s)) } td.n { (t.records) }
                    td.n { (t.bytes) } td.n { (t.config.partitions) } td.n { (t.groups) }
                }
            }
            @if topics.is_empty() { tr { td colspan="7" .muted { "No topics yet." } } }
        }
    }
}

/// Groups with their lag.
pub fn groups_table(groups: &[GroupOut]) -> Markup {
    html! {
        table #groups {
            tr { th { "group" } th { "mode" } th.n { "unconsumed" } th.n { "in flight" }
                 th.n { "retrying" } th.n { "dead" } th { "oldest unconsumed" } }
            @for g in groups {
                tr {
                    td { a href=(format!("/topics/{}/groups/{}", enc(&g.topic), enc(&g.name))) { (g.topic) " / " (g.name) } }
                    td { (g.config.mode) } td.n { (g.unconsumed) } td.n { (g.in_flight) }
                    td.n { (g.retrying) } td.n { (g.dead) } td { (age(g.oldest_unconsumed_age_ms)) }
                }
            }
            @if groups.is_empty() { tr { td colspan="7" .muted { "No consumer groups yet." } } }
        }
    }
}

/// Messages per minute through this server, all queues together.
fn traffic_chart(h: &History) -> Markup {
    let sent = h.rate(|s| Some(s.queues.values().map(|q| q.traffic.sent).sum()));
    let acked = h.rate(|s| Some(s.queues.values().map(|q| q.traffic.acked).sum()));
    let published = h.rate(|s| Some(s.topics.values().sum()));
    line_chart(
        "Rates, last hour",
        "/min",
        &[
            Series {
                name: "sent via HTTP".into(),
                points: sent,
            },
            Series {
                name: "acked via HTTP".into(),
                points: acked,
            },
            Series {
                name: "records sequenced (all topics)".into(),
                points: published,
            },
        ],
    )
}

/// Batches the overview lists (the batches page has the rest).
const OVERVIEW_BATCHES: usize = 10;

/// `GET /`.
pub async fn show<B: Backend>(cx: PageContext<B>) -> Page {
    let state = &cx.state;
    let queues = crate::api::queues::all(state).await?;
    let topics = crate::api::topics::all(state).await?;
    let mut groups = Vec::new();
    for t in &topics {
        groups.extend(crate::api::groups::all(state, &t.name).await?);
    }
    let processes = state.client.processes().await?;
    // The unfinished batches first, then the latest finished: ten.
    let batches: Vec<crate::api::batches::BatchOut> = state
        .client
        .batches(None, OVERVIEW_BATCHES)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let snapshot = state.snapshot();
    let (alerts, chart) = {
        let h = state.history.lock().expect("poisoned");
        (alerts::compute(&snapshot, &h), traffic_chart(&h))
    };
    let body = html! {
        h1 { "Overview" }
        div.cards {
            div.card { b { (queues.len()) } "queues" }
            div.card { b { (topics.len()) } "topics" }
            div.card { b { (groups.len()) } "groups" }
            div.card { b { (processes.len()) } a href="/processes" { "live processes" } }
            div.card { b { (alerts.len()) } a href="/alerts" { "active alerts" } }
        }
        (alerts::list(&alerts))
        (chart)
        h2 { "Queues" } (queues_table(&queues))
        h2 { "Batches and workflows" }
        (super::batch::table(&batches))
        p { a href="/batches" { "All batches →" } } (super::batch::lookup_form())
        h2 { "Topics by volume" } (topics_table(&topics))
        h2 { "Consumer groups" } (groups_table(&groups))
    };
    Ok(page("Overview", Nav::Overview, cx.chrome(), body))
}
