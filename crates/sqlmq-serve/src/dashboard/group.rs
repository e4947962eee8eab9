//! `/topics/{topic}/groups/{group}`: lag per partition and member, a lag chart, retries
//! waiting on the ladder ("retry now"), dead letters (redrive, purge), reset and replay.

use axum::extract::Path;
use axum::response::Response;
use maud::html;
use sqlmq::Backend;

use super::chart::{Series, line_chart};
use super::layout::{Nav, action, age, enc, page, preview};
use super::{Page, PageContext, respond};
use crate::api::model::DeadLetterOut;

/// Rows listed in the retries and dead-letter tables.
const LIST_LIMIT: usize = 100;

async fn render<B: Backend>(cx: PageContext<B>, topic: String, name: String) -> Page {
    let g = crate::api::groups::one(&cx.state, &topic, &name).await?;
    let group = cx.state.group(&topic, &name).await?;
    let cluster = g.config.mode == "cluster";
    let (retries, dead) = if cluster {
        let r = group.retries(LIST_LIMIT).await?;
        let d: Vec<DeadLetterOut> = group
            .dead_letters(LIST_LIMIT)
            .await?
            .into_iter()
            .map(DeadLetterOut::from)
            .collect();
        (r, d)
    } else {
        (Vec::new(), Vec::new())
    };
    let write = cx.access.can_write();
    let base = format!("/ui/topics/{}/groups/{}", enc(&topic), enc(&name));
    let label = format!("{topic}/{name}");
    let chart = {
        let h = cx.state.history.lock().expect("poisoned");
        line_chart(
            "Lag, last hour",
            "records",
            &[
                Series {
                    name: "unconsumed".into(),
                    points: h.series(|s| s.groups.get(&label).map(|p| p.unconsumed as f64)),
                },
                Series {
                    name: "dead".into(),
                    points: h.series(|s| s.groups.get(&label).map(|p| p.dead as f64)),
                },
            ],
        )
    };
    let body = html! {
        h1 { "Group " (name) " of " a href=(format!("/topics/{}", enc(&topic))) { (topic) } " " span.badge { (g.config.mode) } }
        div.cards {
            div.card #lag-unconsumed { b { (g.unconsumed) } "unconsumed" }
            div.card { b { (g.in_flight) } "in flight" }
            div.card { b { (g.retrying) } "retrying" }
            div.card #lag-dead { b { (g.dead) } "dead" }
            div.card { b { (age(g.oldest_unconsumed_age_ms)) } "oldest unconsumed" }
        }
        p.muted { "max attempts " (g.config.max_attempts) " · ladder " (g.config.backoff)
            @if let Some(t) = g.config.consume_timeout_ms { " · consume timeout " (age(Some(t))) }
            @if let Some(r) = &g.config.rate_limit { " · rate limit " (r) } }
        (chart)
        h2 { "Lag per partition" }
        table #partitions {
            tr { th.n { "partition" } th.n { "end" } th.n { "position" } th.n { "backlog" } th.n { "in flight" }
                 th.n { "retrying" } th.n { "dead" } th { "oldest unconsumed" } }
            @for p in &g.partitions {
                tr { td.n { (p.partition) } td.n { (p.end) } td.n { (p.position) } td.n { (p.backlog) }
                     td.n { (p.in_flight) } td.n { (p.retrying) } td.n { (p.dead) } td { (age(p.oldest_unconsumed_age_ms)) } }
            }
        }
        @if !g.members.is_empty() {
            h2 { "Members" }
            table #members {
                tr { th { "member" } th.n { "behind" } th { "checkpointed" } }
                @for m in &g.members { tr { td { (m.member) } td.n { (m.behind) } td { (m.checkpointed_at) } } }
            }
        }
        @if write {
            h2 { "Reset and replay" }
            form.inline method="post" action=(format!("{base}/reset"))
                onsubmit="return confirm('Move the group to this position in every partition?')" {
                "reset to " input name="to" placeholder="earliest, latest, offset or time" required;
                " " button.danger type="submit" { "Reset" }
            }
            " "
            @if cluster {
                form.inline method="post" action=(format!("{base}/replay"))
                    onsubmit="return confirm('Deliver this range to the group again?')" {
                    "replay from " input name="from" placeholder="offset or time" required size="12";
                    " to " input name="to" placeholder="offset or time" required size="12";
                    " " button.danger type="submit" { "Replay" }
                }
            }
        }
        @if cluster {
            h2 { "Retries waiting on the ladder" }
            @if write && !retries.is_empty() {
                p { (action(&format!("{base}/retry-now"), "Retry all now", Some("Make every waiting retry due now?"), &[("all", "1")])) }
            }
            table #retries {
                tr { th { "id" } th.n { "partition" } th.n { "offset" } th.n { "attempts" } th { "due" } @if write { th { "" } } }
                @for r in &retries {
                    tr { td { code { (r.id) } } td.n { (r.partition) } td.n { (r.offset) } td.n { (r.attempts) }
                         td { (crate::body::rfc3339(r.run_at)) }
                         @if write { td { (action(&format!("{base}/retry-now"), "Retry now", None, &[("id", &r.id.to_string())])) } } }
                }
                @if retries.is_empty() { tr { td colspan="6" .muted { "Nothing waiting." } } }
            }
            h2 { "Dead letters" }
            @if write && !dead.is_empty() {
                p {
                    (action(&format!("{base}/dead/redrive"), "Redrive all", Some("Deliver every dead letter of this group again?"), &[("all", "1")]))
                    " "
                    (action(&format!("{base}/dead/purge"), "Purge dead letters", Some("Delete every dead letter of this group for good?"), &[]))
                }
            }
            table #dead {
                tr { th { "id" } th.n { "partition" } th.n { "offset" } th.n { "attempts" } th { "body" } th { "error history" } @if write { th { "" } } }
                @for d in &dead {
                    tr {
                        td { a href=(format!("/topics/{}/records/{}", enc(&topic), enc(&d.id))) { code { (d.id) } } }
                        td.n { (d.partition.unwrap_or(0)) } td.n { (d.offset.unwrap_or(0)) } td.n { (d.attempts) }
                        td { pre { (preview(&d.body, &d.body_base64)) } }
                        td { @for e in &d.errors { div { "#" (e.attempt) " " span.muted { (e.at) } " " (e.error) } } }
                        @if write { td { (action(&format!("{base}/dead/redrive"), "Redrive", None, &[("id", &d.id)])) } }
                    }
                }
                @if dead.is_empty() { tr { td colspan="7" .muted { "No dead letters." } } }
            }
        }
    };
    Ok(page(&format!("Group {name}"), Nav::None, cx.chrome(), body))
}

/// `GET /topics/{topic}/groups/{group}`.
pub async fn show<B: Backend>(
    cx: PageContext<B>,
    Path((topic, name)): Path<(String, String)>,
) -> Response {
    respond(render(cx, topic, name).await)
}
