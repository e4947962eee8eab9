//! The web dashboard: server-rendered HTML (maud), no JavaScript build step.
//!
//! | file | pages |
//! |---|---|
//! | `overview.rs` | `/`: queues, topics (ranking), groups, processes, alerts, rates |
//! | `queue.rs` | `/queues/{queue}`: counts, charts, find, dead letters, actions |
//! | `messages.rs` | the queue page's messages: a state a page at a time, search results |
//! | `run.rs` | `/queues/{queue}/messages/{id}`: a message and its durable run's timeline |
//! | `events.rs` | `/events`: the events durable runs wait for, with the runs |
//! | `topic.rs` | `/topics/{topic}`: partitions, rate, groups with lag, records, ranking |
//! | `batch.rs` | `/batches/{id}`: a batch's progress, callbacks, members, a workflow's graph |
//! | `trace.rs` | `/topics/{topic}/records/{id}`: a record's trace across groups |
//! | `group.rs` | `/topics/{topic}/groups/{group}`: lag, retries, dead letters, reset, replay |
//! | `processes.rs` | `/processes` |
//! | `schedules.rs` | `/schedules`: timing, target, next and last fire, pause/resume |
//! | `alerts.rs` | `/alerts` and the rules |
//! | `actions.rs` | the POST forms behind every button (full access only) |
//! | `login.rs` | `/login`, `/logout`: the token as an `HttpOnly` cookie |
//! | `layout.rs`, `chart.rs` | page shell, refresh toggle, SVG charts |
//!
//! Pages read the database directly (fresh tables); charts come from the background
//! refresher's history. Read-only access renders no action at all, and the action routes
//! refuse it (403) anyway.

mod actions;
mod alerts;
mod batch;
mod chart;
mod events;
mod group;
mod layout;
mod login;
mod messages;
mod overview;
mod processes;
mod queue;
mod run;
mod schedules;
mod topic;
mod trace;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use maud::{Markup, html};
use serde::Deserialize;
use sqlmq::Backend;

use crate::auth::Access;
use crate::error::ApiError;
use crate::state::AppState;

/// What every page handler gets: the state, the caller's access, a flash message, and whether
/// the browser holds a session cookie (then the header offers to sign out).
pub struct PageContext<B: Backend> {
    pub state: AppState<B>,
    pub access: Access,
    pub flash: Option<String>,
    pub signed_in: bool,
}

impl<B: Backend> PageContext<B> {
    /// What the page shell shows around the page.
    pub fn chrome(&self) -> layout::Chrome<'_> {
        layout::Chrome {
            access: self.access,
            flash: self.flash.as_deref(),
            signed_in: self.signed_in,
        }
    }
}

#[derive(Deserialize)]
struct FlashQuery {
    msg: Option<String>,
}

impl<B: Backend> FromRequestParts<AppState<B>> for PageContext<B> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<B>) -> Result<Self, Response> {
        let Extension(access) = Extension::<Access>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let flash = axum::extract::Query::<FlashQuery>::from_request_parts(parts, state)
            .await
            .ok()
            .and_then(|q| q.0.msg);
        let signed_in = parts
            .headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains(&format!("{}=", crate::auth::COOKIE)));
        let State(state) = State::<AppState<B>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(PageContext {
            state,
            access,
            flash,
            signed_in,
        })
    }
}

/// A rendered page, or an error shown as a page with the error's status.
pub type Page = Result<Markup, PageError>;

/// An error rendered as HTML.
pub struct PageError(pub ApiError);

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> PageError {
        PageError(e)
    }
}

impl From<sqlmq::Error> for PageError {
    fn from(e: sqlmq::Error) -> PageError {
        PageError(e.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = html! {
            h1 { "Error " (self.0.status.as_u16()) }
            p.err { (self.0.message) }
            p { a href="/" { "Back to the overview" } }
        };
        let markup = layout::page("Error", layout::Nav::None, layout::Chrome::default(), body);
        (self.0.status, Html(markup.into_string())).into_response()
    }
}

/// Wrap a page result as a response.
pub(crate) fn respond(page: Page) -> Response {
    match page {
        Ok(markup) => Html(markup.into_string()).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Every dashboard route.
pub(crate) fn routes<B: Backend>() -> Router<AppState<B>> {
    Router::new()
        .route("/", get(|cx| async { respond(overview::show(cx).await) }))
        .route(
            "/processes",
            get(|cx| async { respond(processes::show(cx).await) }),
        )
        .route(
            "/schedules",
            get(|cx| async { respond(schedules::show(cx).await) }),
        )
        .route(
            "/alerts",
            get(|cx| async { respond(alerts::show(cx).await) }),
        )
        .route("/queues/{queue}", get(queue::show))
        .route("/queues/{queue}/messages/{id}", get(run::show))
        .route(
            "/events",
            get(|cx| async { respond(events::show(cx).await) }),
        )
        .route("/batches", get(batch::lookup))
        .route("/batches/{id}", get(batch::show))
        .route("/topics/{topic}", get(topic::show))
        .route("/topics/{topic}/records/{id}", get(trace::show))
        .route("/topics/{topic}/groups/{group}", get(group::show))
        .route("/login", get(login::form).post(login::submit))
        .route("/logout", post(login::logout))
        .merge(actions::routes())
}
