//! `/queues/{queue}/messages/{id}`: one message, and its durable run as a timeline of steps,
//! sleeps and event waits.

use axum::extract::Path;
use axum::response::Response;
use maud::{Markup, html};
use sqlmq::Backend;
use sqlmq::flow::{RunJournal, RunStepState, StepKind};

use super::layout::{Nav, action, enc, page, preview};
use super::{Page, PageContext, respond};
use crate::api::browse::QueuedMessageOut;
use crate::body::rfc3339;

/// The run's timeline: one entry per journal row, in order.
pub fn timeline(journal: &RunJournal) -> Markup {
    html! {
        ol.timeline #timeline {
            @for s in &journal.steps {
                li class=(state_class(s.state)) {
                    span.badge { (kind_label(s.kind)) } " "
                    b { (s.name) } " — " (s.state.to_string().replace('_', " "))
                    span.muted {
                        " · recorded " (rfc3339(s.recorded_at))
                        @if let Some(t) = s.wake_at {
                            @if s.kind == StepKind::Sleep { " · until " } @else { " · deadline " }
                            (rfc3339(t))
                        }
                        @if s.result_bytes > 0 { " · " (s.result_bytes) " bytes" }
                    }
                }
            }
            @if journal.steps.is_empty() { li.muted { "No durable step recorded (none made, or the run ended with its ack)." } }
        }
        @for event in &journal.waiting_for {
            p.waiting { "Suspended until the event " a href=(format!("/events#{}", enc(event))) { b { (event) } } " comes or its deadline passes." }
        }
    }
}

fn kind_label(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Sleep => "sleep",
        StepKind::Event => "event",
        _ => "step",
    }
}

fn state_class(state: RunStepState) -> &'static str {
    match state {
        RunStepState::Waiting => "waiting",
        RunStepState::TimedOut => "timed-out",
        _ => "done",
    }
}

async fn render<B: Backend>(cx: PageContext<B>, queue: String, id: String) -> Page {
    let message_id: sqlmq::MessageId = id.parse()?;
    let handle = cx.state.queue(&queue).await?;
    let message = handle.message(message_id).await?;
    let progress = handle.progress(message_id).await?;
    let write = cx.access.can_write();
    let journal = cx.state.client.journal(message_id).await?;
    let body = html! {
        h1 { "Message " code { (id) } }
        p { a href=(format!("/queues/{}", enc(&queue))) { "← queue " (queue) } }
        @match message.map(QueuedMessageOut::from) {
            Some(m) => {
                p { "state " b #state { (m.state.replace('_', " ")) } " · attempts " (m.attempts)
                    " · priority " (m.priority) " · sent " (m.enqueued_at)
                    @if let Some(t) = &m.run_at { " · due " (t) }
                    @if let Some(t) = &m.lease_until { " · lease until " (t) } }
                @if let Some(p) = &progress { p #progress { "progress " (super::messages::progress_cell(&p.value)) " · at " (rfc3339(p.updated_at)) } }
                @if write && m.state == "in_flight" {
                    (action(&format!("/ui/queues/{}/messages/{}/delete", enc(&queue), enc(&m.id)), "Cancel",
                        Some(&format!("Stop the handler of message {} and remove it for good?", m.id)), &[]))
                }
                pre { (preview(&m.body, &m.body_base64)) }
                @for e in &m.errors { p.err { "attempt " (e.attempt) " at " (e.at) ": " (e.error) } }
            }
            None => p.muted { "Not in the queue: acked, cancelled or purged (or never sent here)." }
        }
        h2 { "Run" }
        (timeline(&journal))
    };
    Ok(page("Message", Nav::None, cx.chrome(), body))
}

/// `GET /queues/{queue}/messages/{id}`.
pub async fn show<B: Backend>(
    cx: PageContext<B>,
    Path((queue, id)): Path<(String, String)>,
) -> Response {
    respond(render(cx, queue, id).await)
}
