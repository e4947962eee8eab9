//! `/topics/{topic}`: partitions with offset ranges and bytes, publish rate, groups with lag
//! and a lag chart, records by offset, key or time, and the ranking of every topic.

use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use sqlmq::Backend;

use super::chart::{Series, line_chart};
use super::layout::{Nav, enc, page, preview};
use super::overview::{groups_table, topics_table};
use super::{Page, PageContext, respond};
use crate::api::records::{RecordOut, RecordsQuery};

/// The records form: `partition` + `offset`, or `key`, or `since`.
#[derive(Deserialize, Default)]
pub struct Look {
    partition: Option<String>,
    offset: Option<String>,
    key: Option<String>,
    since: Option<String>,
}

fn filled(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl Look {
    fn query(&self) -> Result<RecordsQuery, crate::error::ApiError> {
        let num = |v: &Option<String>, what: &str| -> Result<Option<i64>, crate::error::ApiError> {
            filled(v)
                .map(|s| {
                    s.parse::<i64>().map_err(|_| {
                        crate::error::ApiError::invalid(format!("{what} must be a number"))
                    })
                })
                .transpose()
        };
        let key = filled(&self.key);
        let since = filled(&self.since);
        let positional = key.is_none() && since.is_none();
        Ok(RecordsQuery {
            partition: if positional {
                num(&self.partition, "partition")?.map(|p| p.max(0) as u32)
            } else {
                None
            },
            offset: if positional {
                num(&self.offset, "offset")?
            } else {
                None
            },
            key,
            since,
            until: None,
            limit: Some(50),
        })
    }
}

/// Records with a link to each one's trace.
pub fn records_table(topic: &str, records: &[RecordOut]) -> Markup {
    html! {
        table #records {
            tr { th.n { "partition" } th.n { "offset" } th { "key" } th { "published" } th { "body" } th { "" } }
            @for r in records {
                tr {
                    td.n { (r.partition) } td.n { (r.offset) } td { (r.key.as_deref().unwrap_or("")) }
                    td { (r.published_at) } td { pre { (preview(&r.body, &r.body_base64)) } }
                    td { a href=(format!("/topics/{}/records/{}", enc(topic), enc(&r.id))) { "trace" } }
                }
            }
            @if records.is_empty() { tr { td colspan="6" .muted { "No records there." } } }
        }
    }
}

fn charts<B: Backend>(cx: &PageContext<B>, name: &str, groups: &[String]) -> Markup {
    let h = cx.state.history.lock().expect("poisoned");
    let rate = [Series {
        name: "records sequenced".into(),
        points: h.rate(|s| s.topics.get(name).copied()),
    }];
    let lag: Vec<Series> = groups
        .iter()
        .map(|g| {
            let label = format!("{name}/{g}");
            Series {
                name: g.clone(),
                points: h.series(|s| s.groups.get(&label).map(|p| p.unconsumed as f64)),
            }
        })
        .collect();
    html! {
        div.row {
            div { (line_chart("Publish rate", "/min", &rate)) }
            div { (line_chart("Lag per group (unconsumed)", "records", &lag)) }
        }
    }
}

async fn render<B: Backend>(cx: PageContext<B>, name: String, look: Look) -> Page {
    let t = crate::api::topics::one(&cx.state, &name).await?;
    let groups = crate::api::groups::all(&cx.state, &name).await?;
    let ranking = crate::api::topics::all(&cx.state).await?;
    let records = crate::api::records::query(&cx.state, &name, look.query()?).await?;
    let records: Vec<RecordOut> = records.into_iter().map(RecordOut::from).collect();
    let group_names: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
    let c = &t.config;
    let body = html! {
        h1 { "Topic " (t.name) }
        div.cards {
            div.card { b { (t.records) } "records retained" }
            div.card { b { (t.bytes) } "bytes" }
            div.card { b { (format!("{:.1}", t.rate_per_s)) } "records/s (1 min)" }
            div.card { b { (t.total) } "ever sequenced" }
        }
        p.muted { (c.partitions) " partitions · retention "
            (c.retention_ms.map_or("none".to_owned(), |ms| super::layout::age(Some(ms))))
            @if let Some(b) = c.retention_bytes { " / " (b) " bytes per partition" }
            @if c.strict_order { " · strict order" } }
        (charts(&cx, &name, &group_names))
        h2 { "Partitions" }
        table #partitions {
            tr { th.n { "partition" } th.n { "first offset" } th.n { "end" } th.n { "retained" } th.n { "bytes" } }
            @for p in t.partitions.as_deref().unwrap_or_default() {
                tr { td.n { (p.partition) } td.n { (p.start) } td.n { (p.end) } td.n { (p.end - p.start) } td.n { (p.bytes) } }
            }
        }
        h2 { "Consumer groups" } (groups_table(&groups))
        h2 { "Records" }
        form method="get" action=(format!("/topics/{}", enc(&name))) {
            "partition " input name="partition" size="4" value=[look.partition.as_deref()];
            " offset " input name="offset" size="8" value=[look.offset.as_deref()];
            " — or key " input name="key" value=[look.key.as_deref()];
            " — or since " input name="since" placeholder="10m or 2026-11-22T10:00:00Z" value=[look.since.as_deref()];
            " " button type="submit" { "Show" }
        }
        (records_table(&name, &records))
        h2 { "All topics by volume" } (topics_table(&ranking))
    };
    Ok(page(&format!("Topic {name}"), Nav::None, cx.chrome(), body))
}

/// `GET /topics/{topic}`.
pub async fn show<B: Backend>(
    cx: PageContext<B>,
    Path(name): Path<String>,
    axum::extract::Query(look): axum::extract::Query<Look>,
) -> Response {
    respond(render(cx, name, look).await)
}
