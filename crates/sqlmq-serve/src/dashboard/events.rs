//! `/events`: the events suspended durable runs wait for, each with its waiting runs.

use maud::html;
use sqlmq::Backend;

use super::layout::{Nav, enc, page};
use super::{Page, PageContext};
use crate::body::rfc3339;

/// Runs listed under each event.
const RUNS_SHOWN: usize = 20;

/// `GET /events`.
pub async fn show<B: Backend>(cx: PageContext<B>) -> Page {
    let client = &cx.state.client;
    let events = client.awaited_events(200).await?;
    let mut waiting = Vec::with_capacity(events.len());
    for e in &events {
        waiting.push(client.runs_waiting_for(&e.name, RUNS_SHOWN).await?);
    }
    let body = html! {
        h1 { "Events" }
        p.muted { "Durable runs suspended in a wait for an event; an emit (" code { "sqlmq event emit NAME" }
            ", " code { "POST /v1/events/{name}" } ") wakes them all." }
        table #events {
            tr { th { "event" } th.n { "runs" } th { "waiting since" } th { "runs (the longest waiting first)" } }
            @for (e, runs) in events.iter().zip(&waiting) {
                tr id=(enc(&e.name)) {
                    td { b { (e.name) } } td.n { (e.runs) } td { (rfc3339(e.since)) }
                    td {
                        @for r in runs {
                            div { a href=(format!("/queues/{}/messages/{}", enc(&r.queue), r.id)) { code { (r.id) } }
                                span.muted { " " (r.queue) " · since " (rfc3339(r.since)) } }
                        }
                        @if e.runs > runs.len() as u64 { div.muted { "and " (e.runs - runs.len() as u64) " more" } }
                    }
                }
            }
            @if events.is_empty() { tr { td colspan="4" .muted { "No run waits for an event." } } }
        }
    };
    Ok(page("Events", Nav::Events, cx.chrome(), body))
}
