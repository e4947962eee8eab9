//! `/topics/{topic}/records/{id}`: one record and its state in every group.

use axum::extract::Path;
use axum::response::Response;
use maud::html;
use sqlmq::Backend;

use super::layout::{Nav, enc, page, preview};
use super::{Page, PageContext, respond};

async fn render<B: Backend>(cx: PageContext<B>, topic: String, id: String) -> Page {
    let t = crate::api::trace::trace_record(&cx.state, &topic, &id).await?;
    let body = html! {
        h1 { "Record " code { (t.id) } }
        p { a href=(format!("/topics/{}", enc(&topic))) { "← topic " (topic) } }
        p { "partition " (t.partition) " · offset "
            (t.offset.map_or("not sequenced yet".to_owned(), |o| o.to_string())) }
        @if let Some(r) = &t.record {
            p { "key " (r.key.as_deref().unwrap_or("—")) " · published " (r.published_at) " · sequenced " (r.sequenced_at) }
            pre { (preview(&r.body, &r.body_base64)) }
        }
        h2 { "Across groups" }
        table #trace {
            tr { th { "group" } th { "mode" } th { "state" } th { "since / at" } th.n { "attempts" } th { "deliveries" } }
            @for g in &t.groups {
                tr {
                    td { a href=(format!("/topics/{}/groups/{}", enc(&topic), enc(&g.group))) { (g.group) } }
                    td { (g.mode) }
                    td { (g.state.replace('_', " ")) @if let Some(m) = &g.member { " by " (m) } }
                    td { (g.at.as_deref().unwrap_or("")) @if let Some(l) = &g.lease_until { br; "lease until " (l) } }
                    td.n { (g.attempts) }
                    td {
                        @for e in &g.events {
                            div { "#" (e.attempt) " " (e.outcome) " " span.muted { (e.at) }
                                @if let Some(m) = &e.member { " " (m) }
                                @if let Some(err) = &e.error { " — " span.err { (err) } } }
                        }
                        @if !g.read_by.is_empty() { "read by " (g.read_by.join(", ")) }
                    }
                }
            }
            @if t.groups.is_empty() { tr { td colspan="6" .muted { "The topic has no groups." } } }
        }
    };
    Ok(page("Trace", Nav::None, cx.chrome(), body))
}

/// `GET /topics/{topic}/records/{id}`.
pub async fn show<B: Backend>(
    cx: PageContext<B>,
    Path((topic, id)): Path<(String, String)>,
) -> Response {
    respond(render(cx, topic, id).await)
}
