//! `/processes`: registered worker processes and their heartbeats.

use maud::html;
use sqlmq::Backend;

use super::alerts::SILENT_AFTER;
use super::layout::{Nav, age, page};
use super::{Page, PageContext};

/// `GET /processes`.
pub async fn show<B: Backend>(cx: PageContext<B>) -> Page {
    let list = cx.state.client.processes().await?;
    let body = html! {
        h1 { "Processes" }
        p.muted { "Worker processes heartbeat every 5 s; one silent for three heartbeats is dead and live peers release its claims." }
        table #processes {
            tr { th { "id" } th { "kind" } th { "host" } th.n { "pid" } th { "queue ids" }
                 th { "started" } th { "last heartbeat" } th { "state" } }
            @for p in &list {
                tr {
                    td { (p.id) } td { (p.kind) } td { (p.host) } td.n { (p.pid) }
                    td { (format!("{:?}", p.queue_ids)) }
                    td { (crate::body::rfc3339(p.started_at)) }
                    td { (age(Some(p.silent_for.as_millis() as u64))) " ago" }
                    td { @if p.silent_for > SILENT_AFTER { span.err { "silent" } } @else { "alive" } }
                }
            }
            @if list.is_empty() { tr { td colspan="8" .muted { "No worker process is registered." } } }
        }
    };
    Ok(page("Processes", Nav::Processes, cx.chrome(), body))
}
