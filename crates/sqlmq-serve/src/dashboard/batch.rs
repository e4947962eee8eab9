//! `/batches/{id}`: a batch's state and progress (counts and a bar), its times and callbacks,
//! its members with their results, and — for a workflow — the graph of its steps as SVG: one
//! box per step coloured by its state, an arrow from each dependency to its dependant, steps
//! laid out left to right in layers (a step's layer is the longest path to it from a step
//! without dependencies). `/batches?id=…` looks a batch up.

use std::collections::HashMap;

use axum::extract::Path;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;
use sqlmq::Backend;

use super::layout::{Nav, action, enc, page, preview};
use super::{Page, PageContext, respond};
use crate::api::batches::{BatchOut, BatchStateOut, BatchStepOut, RoleOut, StepStateOut};
use crate::body::encode;

/// Most steps drawn as a graph (a larger batch lists its members only).
pub const MAX_GRAPH: usize = 300;
/// Most members listed in the table.
const MAX_ROWS: usize = 500;
/// Most results read for the table (one query each).
const MAX_RESULTS: usize = 100;

const BOX_W: f64 = 150.0;
const BOX_H: f64 = 30.0;
const COL_GAP: f64 = 64.0;
const ROW_GAP: f64 = 12.0;
const PAD: f64 = 10.0;
/// Characters of a label that fit in a box.
const LABEL_CHARS: usize = 19;

/// A state's fill and stroke.
fn colours(state: StepStateOut) -> (&'static str, &'static str) {
    match state {
        StepStateOut::Waiting => ("#eef0f4", "#9aa1b0"),
        StepStateOut::Held => ("#fff4d6", "#d49a00"),
        StepStateOut::Pending => ("#e3ecfc", "#2f6fde"),
        StepStateOut::Succeeded => ("#e3f4e7", "#2e9d4a"),
        StepStateOut::Dead => ("#fdecea", "#b3261e"),
        StepStateOut::Cancelled => ("#f4f4f4", "#6b7386"),
    }
}

const STATES: [StepStateOut; 6] = [
    StepStateOut::Waiting,
    StepStateOut::Held,
    StepStateOut::Pending,
    StepStateOut::Succeeded,
    StepStateOut::Dead,
    StepStateOut::Cancelled,
];

/// A member's label: its step name, or the end of its id (a UUIDv7 begins with its time,
/// which a batch's members share).
fn label(s: &BatchStepOut) -> String {
    match &s.step {
        Some(name) => name.clone(),
        None => format!("…{}", &s.id[s.id.len().saturating_sub(8)..]),
    }
}

fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(chars - 1).collect::<String>())
    }
}

/// Where each node goes: its layer (column) and its row in that layer.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    pub layer: Vec<usize>,
    pub row: Vec<usize>,
    /// Nodes per layer.
    pub sizes: Vec<usize>,
}

/// Lay out `n` nodes whose parents (dependencies, by index) are given: a node's layer is the
/// longest path to it from a node without parents; in each layer the nodes are ordered by
/// the mean row of their parents (fewer crossings), else as given. Nodes on a cycle (which the
/// library refuses) stay in the layer they reached.
pub fn layout(parents: &[Vec<usize>]) -> Layout {
    let n = parents.len();
    let mut children = vec![Vec::new(); n];
    let mut unmet: Vec<usize> = parents.iter().map(Vec::len).collect();
    for (child, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p].push(child);
        }
    }
    let mut layer = vec![0; n];
    let mut ready: Vec<usize> = (0..n).filter(|&i| unmet[i] == 0).rev().collect();
    while let Some(i) = ready.pop() {
        for &c in &children[i] {
            layer[c] = layer[c].max(layer[i] + 1);
            unmet[c] -= 1;
            if unmet[c] == 0 {
                ready.push(c);
            }
        }
    }
    let layers = layer.iter().max().map_or(0, |m| m + 1);
    let mut row = vec![0; n];
    let mut sizes = Vec::with_capacity(layers);
    for l in 0..layers {
        let mut members: Vec<(f64, usize)> = (0..n)
            .filter(|&i| layer[i] == l)
            .map(|i| {
                let placed: Vec<f64> = parents[i]
                    .iter()
                    .filter(|&&p| layer[p] < l)
                    .map(|&p| row[p] as f64)
                    .collect();
                let mean = if placed.is_empty() {
                    i as f64
                } else {
                    placed.iter().sum::<f64>() / placed.len() as f64
                };
                (mean, i)
            })
            .collect();
        members.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (r, (_, i)) in members.iter().enumerate() {
            row[*i] = r;
        }
        sizes.push(members.len());
    }
    Layout { layer, row, sizes }
}

/// The graph of a batch's members, or None when it is no workflow (no step names, no
/// dependencies between members) or too large to draw.
pub fn graph(steps: &[BatchStepOut]) -> Option<Markup> {
    let members: Vec<&BatchStepOut> = steps.iter().filter(|s| s.role == RoleOut::Member).collect();
    let index: HashMap<&str, usize> = members
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let parents: Vec<Vec<usize>> = members
        .iter()
        .map(|s| {
            s.depends_on
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    let workflow =
        members.iter().any(|s| s.step.is_some()) || parents.iter().any(|p| !p.is_empty());
    if !workflow || members.is_empty() || members.len() > MAX_GRAPH {
        return None;
    }
    let Layout { layer, row, sizes } = layout(&parents);
    let tallest = sizes.iter().copied().max().unwrap_or(1) as f64;
    let pitch = BOX_H + ROW_GAP;
    let x = |i: usize| PAD + layer[i] as f64 * (BOX_W + COL_GAP);
    // Shorter layers are centred against the tallest.
    let y =
        |i: usize| PAD + (tallest - sizes[layer[i]] as f64) * pitch / 2.0 + row[i] as f64 * pitch;
    let width = 2.0 * PAD + sizes.len() as f64 * (BOX_W + COL_GAP) - COL_GAP;
    let height = 2.0 * PAD + tallest * pitch - ROW_GAP;
    let edges: Vec<(usize, usize)> = parents
        .iter()
        .enumerate()
        .flat_map(|(c, ps)| ps.iter().map(move |&p| (p, c)))
        .collect();
    Some(html! {
        div style="overflow:auto;max-height:80vh" {
            svg #workflow width=(width) height=(height) viewBox=(format!("0 0 {width} {height}"))
                role="img" aria-label="The workflow's steps and their dependencies" {
                defs {
                    marker #arrow viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto" {
                        path d="M0,0 L10,5 L0,10 z" fill="#8a93a6" {}
                    }
                }
                @for (p, c) in &edges {
                    @let (x1, y1) = (x(*p) + BOX_W, y(*p) + BOX_H / 2.0);
                    @let (x2, y2) = (x(*c), y(*c) + BOX_H / 2.0);
                    @let bend = COL_GAP / 2.0;
                    path.edge d=(format!("M{x1:.1},{y1:.1} C{:.1},{y1:.1} {:.1},{y2:.1} {x2:.1},{y2:.1}", x1 + bend, x2 - bend))
                        fill="none" stroke="#8a93a6" stroke-width="1.3" marker-end="url(#arrow)" {}
                }
                @for (i, s) in members.iter().enumerate() {
                    @let (fill, stroke) = colours(s.state);
                    a href=(format!("/queues/{}?id={}", enc(&s.queue), enc(&s.id))) {
                        g.step data-state=(s.state.as_str()) {
                            title { (label(s)) " — " (s.state.as_str()) " — queue " (s.queue) " — " (s.id) }
                            rect x=(x(i)) y=(y(i)) width=(BOX_W) height=(BOX_H) rx="5"
                                fill=(fill) stroke=(stroke) stroke-width="1.5"
                                stroke-dasharray=[(s.state == StepStateOut::Cancelled).then_some("4 3")] {}
                            text x=(x(i) + BOX_W / 2.0) y=(y(i) + BOX_H / 2.0 + 4.0) font-size="12"
                                text-anchor="middle" fill="#1d2330" { (shorten(&label(s), LABEL_CHARS)) }
                        }
                    }
                }
            }
        }
        (legend())
    })
}

fn legend() -> Markup {
    html! {
        div.muted {
            @for state in STATES {
                @let (fill, stroke) = colours(state);
                span style="margin-right:12px" {
                    span style=(format!("display:inline-block;width:10px;height:10px;background:{fill};border:1px solid {stroke};margin-right:4px")) {}
                    (state.as_str())
                }
            }
        }
    }
}

/// The progress bar: acked, dead and cancelled members, the rest pending.
/// The share of `b`'s members that `n` is, in percent.
fn pct(b: &BatchOut, n: u64) -> f64 {
    if b.members == 0 {
        0.0
    } else {
        n as f64 * 100.0 / b.members as f64
    }
}

/// A bar of `b`'s finished members: succeeded, dead and cancelled, each its share.
fn bar(b: &BatchOut) -> Markup {
    let finished = b.succeeded + b.dead + b.cancelled;
    html! {
        div.progress title=(format!("{finished} of {} members finished", b.members)) {
            @for (n, colour, what) in [(b.succeeded, "#2e9d4a", "succeeded"), (b.dead, "#b3261e", "dead"), (b.cancelled, "#9aa1b0", "cancelled")] {
                @if n > 0 {
                    span style=(format!("width:{:.2}%;background:{colour}", pct(b, n))) title=(format!("{n} {what}")) {}
                }
            }
        }
    }
}

fn progress(b: &BatchOut) -> Markup {
    let finished = b.succeeded + b.dead + b.cancelled;
    html! {
        div #progress { (bar(b)) }
        p.muted { (finished) " of " (b.members) " members finished"
            @if b.members > 0 { " (" (format!("{:.0}", pct(b, finished))) "%)" } }
    }
}

/// `b`'s state as the API spells it.
fn state_text(state: BatchStateOut) -> &'static str {
    match state {
        BatchStateOut::Open => "open",
        BatchStateOut::Sealed => "sealed",
        BatchStateOut::Finished => "finished",
    }
}

/// A table of batches with their progress, each linking to its page.
pub fn table(batches: &[BatchOut]) -> Markup {
    html! {
        table #batches {
            tr { th { "batch" } th { "state" } th { "progress" } th { "members" } th { "succeeded" }
                 th { "dead" } th { "cancelled" } th { "created" } th { "finished" } }
            @for b in batches {
                tr {
                    td { a href=(format!("/batches/{}", enc(&b.id))) { code { (b.id) } } }
                    td { span.badge { (state_text(b.state)) } }
                    td style="min-width:10em" { (bar(b)) }
                    td { (b.members) } td { (b.succeeded) }
                    td { @if b.dead > 0 { b.bad { (b.dead) } } @else { "0" } }
                    td { (b.cancelled) } td { (b.created_at) }
                    td { (b.finished_at.as_deref().unwrap_or("—")) }
                }
            }
            @if batches.is_empty() { tr { td colspan="9" .muted { "No batches." } } }
        }
    }
}

fn state_badge(state: StepStateOut) -> Markup {
    let (fill, stroke) = colours(state);
    html! {
        span.badge style=(format!("background:{fill};border:1px solid {stroke}")) { (state.as_str()) }
    }
}

fn role_text(role: RoleOut) -> &'static str {
    match role {
        RoleOut::Member => "member",
        RoleOut::OnSuccess => "on success",
        RoleOut::OnFailure => "on failure",
        RoleOut::OnComplete => "on complete",
    }
}

fn message_link(s: &BatchStepOut) -> Markup {
    html! {
        a href=(format!("/queues/{}?id={}", enc(&s.queue), enc(&s.id))) { code { (s.id) } }
    }
}

async fn render<B: Backend>(cx: PageContext<B>, id: String) -> Page {
    let b = crate::api::batches::status(&cx.state, &id).await?;
    let write = cx.access.can_write();
    let (members, callbacks): (Vec<&BatchStepOut>, Vec<&BatchStepOut>) =
        b.steps.iter().partition(|s| s.role == RoleOut::Member);
    let names: HashMap<&str, String> = members.iter().map(|s| (s.id.as_str(), label(s))).collect();
    let mut results: HashMap<&str, String> = HashMap::new();
    for s in members.iter().filter(|s| s.has_result).take(MAX_RESULTS) {
        if let Some(bytes) = cx.state.client.result(s.id.parse()?).await? {
            let (text, b64) = encode(bytes);
            results.insert(s.id.as_str(), preview(&text, &b64));
        }
    }
    let state = state_text(b.state);
    let graph = graph(&b.steps);
    let body = html! {
        h1 { "Batch " code { (b.id) } " " span.badge #batch-state { (state) } }
        p { a href="/" { "← overview" } }
        div.cards {
            div.card #count-members { b { (b.members) } "members" }
            div.card #count-pending { b { (b.pending) } "pending" }
            div.card #count-succeeded { b { (b.succeeded) } "succeeded" }
            div.card #count-dead { b { (b.dead) } "dead" }
            div.card #count-cancelled { b { (b.cancelled) } "cancelled" }
        }
        (progress(&b))
        p #times { "created " (b.created_at)
            " · " @if let Some(f) = &b.finished_at { "finished " (f) } @else { "not finished" } }
        @if write && b.state == BatchStateOut::Open {
            p #actions {
                (action(&format!("/ui/batches/{}/seal", enc(&b.id)), "Seal",
                    Some("Seal this batch? No member can be added afterwards."), &[]))
            }
        }
        h2 { "Callbacks" }
        table #callbacks {
            tr { th { "when" } th { "queue" } th { "state" } th { "message" } }
            @for c in &callbacks {
                tr { td { (role_text(c.role)) } td { a href=(format!("/queues/{}", enc(&c.queue))) { (c.queue) } }
                     td { (state_badge(c.state)) } td { (message_link(c)) } }
            }
            @if callbacks.is_empty() { tr { td colspan="4" .muted { "No callbacks." } } }
        }
        @if let Some(graph) = graph {
            h2 { "Workflow" }
            (graph)
        } @else if members.len() > MAX_GRAPH {
            p.muted { "The workflow has more than " (MAX_GRAPH) " steps: not drawn." }
        }
        h2 { "Members" }
        table #members {
            tr { th { "step" } th { "queue" } th { "state" } th { "after" } th { "result" } th { "message" } }
            @for s in members.iter().take(MAX_ROWS) {
                tr {
                    td { (s.step.as_deref().unwrap_or("—")) }
                    td { a href=(format!("/queues/{}", enc(&s.queue))) { (s.queue) } }
                    td { (state_badge(s.state)) }
                    td {
                        @for (i, d) in s.depends_on.iter().enumerate() {
                            @if i > 0 { ", " }
                            @match names.get(d.as_str()) { Some(n) => { (n) } None => { code { (d) } } }
                        }
                    }
                    td { @if let Some(r) = results.get(s.id.as_str()) { pre { (r) } }
                         @else if s.has_result { span.muted { "kept" } } }
                    td { (message_link(s)) }
                }
            }
            @if members.is_empty() { tr { td colspan="6" .muted { "No members yet." } } }
        }
        @if members.len() > MAX_ROWS { p.muted { "The first " (MAX_ROWS) " of " (members.len()) " members." } }
    };
    Ok(page(
        &format!("Batch {}", b.id),
        Nav::None,
        cx.chrome(),
        body,
    ))
}

/// `GET /batches/{id}`.
pub async fn show<B: Backend>(cx: PageContext<B>, Path(id): Path<String>) -> Response {
    respond(render(cx, id).await)
}

/// `?id=`: the batch to open; else `?state=` and `?limit=` of the list.
#[derive(Deserialize, Default)]
pub struct Lookup {
    id: Option<String>,
    state: Option<String>,
    limit: Option<usize>,
}

/// The form that looks a batch up by id.
pub fn lookup_form() -> Markup {
    html! {
        form #batch-lookup method="get" action="/batches" {
            input name="id" placeholder="batch id" size="40";
            " " button type="submit" { "Open batch" }
        }
    }
}

/// `GET /batches?id=…`: to the batch's page; without an id, the batches — unfinished first,
/// then those finished most recently, or those of one `state` — and the lookup form.
pub async fn lookup<B: Backend>(
    cx: PageContext<B>,
    axum::extract::Query(lookup): axum::extract::Query<Lookup>,
) -> Response {
    match lookup
        .id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        Some(id) => Redirect::to(&format!("/batches/{}", enc(id))).into_response(),
        None => respond(list(cx, lookup).await),
    }
}

/// The states the list filters by, as links.
const FILTERS: [(&str, &str); 4] = [
    ("", "all"),
    ("open", "open"),
    ("sealed", "sealed"),
    ("finished", "finished"),
];

async fn list<B: Backend>(cx: PageContext<B>, lookup: Lookup) -> Page {
    let query = crate::api::batches::BatchListQuery {
        state: lookup.state.clone(),
        limit: lookup.limit,
    };
    let listed = crate::api::batches::listed(&cx.state, &query).await?;
    let current = lookup.state.as_deref().unwrap_or_default();
    let body = html! {
        h1 { "Batches and workflows" }
        p { a href="/" { "← overview" } }
        p #filters {
            @for (i, (state, name)) in FILTERS.iter().enumerate() {
                @if i > 0 { " · " }
                @if *state == current { b { (name) } }
                @else { a href=(format!("/batches?state={state}")) { (name) } }
            }
        }
        (table(&listed.batches))
        p.muted { "Unfinished batches first, then the ones finished most recently (kept 7 days)." }
        (lookup_form())
    };
    Ok(page("Batches", Nav::None, cx.chrome(), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, name: Option<&str>, deps: &[&str], state: StepStateOut) -> BatchStepOut {
        BatchStepOut {
            id: id.to_owned(),
            queue: "jobs".to_owned(),
            step: name.map(str::to_owned),
            role: RoleOut::Member,
            state,
            depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
            has_result: false,
        }
    }

    #[test]
    fn layers_are_longest_paths_and_rows_follow_parents() {
        // a → b → d, a → c → d, a → d (a shortcut does not pull d forward), e alone.
        let parents = vec![vec![], vec![0], vec![0], vec![1, 2, 0], vec![]];
        let l = layout(&parents);
        assert_eq!(l.layer, [0, 1, 1, 2, 0]);
        assert_eq!(l.sizes, [2, 2, 1]);
        assert_eq!((l.row[0], l.row[4]), (0, 1));
        // A child of the second root sorts below a child of the first.
        let l = layout(&[vec![], vec![], vec![1], vec![0]]);
        assert_eq!((l.row[3], l.row[2]), (0, 1));
        // A cycle (refused by the library) does not hang or panic.
        let l = layout(&[vec![1], vec![0]]);
        assert_eq!(l.layer, [0, 0]);
    }

    #[test]
    fn a_graph_has_a_box_per_step_an_arrow_per_dependency_and_escapes_names() {
        let steps = vec![
            step(
                "00000000-0000-7000-8000-00000000000a",
                Some("a<b>"),
                &[],
                StepStateOut::Succeeded,
            ),
            step(
                "00000000-0000-7000-8000-00000000000b",
                Some("b"),
                &["00000000-0000-7000-8000-00000000000a"],
                StepStateOut::Pending,
            ),
            step(
                "00000000-0000-7000-8000-00000000000c",
                Some("c"),
                &["00000000-0000-7000-8000-00000000000a"],
                StepStateOut::Dead,
            ),
            step(
                "00000000-0000-7000-8000-00000000000d",
                Some("d"),
                &[
                    "00000000-0000-7000-8000-00000000000b",
                    "00000000-0000-7000-8000-00000000000c",
                ],
                StepStateOut::Held,
            ),
        ];
        let svg = graph(&steps).expect("a workflow").into_string();
        assert_eq!(svg.matches("<rect").count(), 4, "{svg}");
        assert_eq!(svg.matches("class=\"edge\"").count(), 4, "{svg}");
        assert!(svg.contains("a&lt;b&gt;") && !svg.contains("a<b>"), "{svg}");
        assert!(svg.contains("data-state=\"held\""), "{svg}");
        // A plain batch (no names, no dependencies) draws nothing.
        let plain = vec![step(
            "00000000-0000-7000-8000-00000000000e",
            None,
            &[],
            StepStateOut::Pending,
        )];
        assert!(graph(&plain).is_none());
    }

    #[test]
    fn fifty_steps_fit_a_readable_drawing() {
        // A fan-out of 48 between a root and a join: three columns, 48 rows.
        let id = |i: usize| format!("00000000-0000-7000-8000-{i:012}");
        let mut steps = vec![step(&id(0), Some("root"), &[], StepStateOut::Succeeded)];
        for i in 1..=48 {
            steps.push(step(
                &id(i),
                Some(&format!("shard-{i}")),
                &[&id(0)],
                StepStateOut::Pending,
            ));
        }
        let all: Vec<String> = (1..=48).map(id).collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        steps.push(step(&id(49), Some("join"), &all, StepStateOut::Waiting));
        let svg = graph(&steps).unwrap().into_string();
        assert_eq!(svg.matches("<rect").count(), 50);
        assert_eq!(svg.matches("class=\"edge\"").count(), 96);
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(width < 800.0, "{width}");
    }
}
