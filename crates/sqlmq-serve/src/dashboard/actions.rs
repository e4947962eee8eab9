//! The dashboard's buttons: HTML forms posting here, each calling the same handler-layer
//! function as its API route, then redirecting back with a message. The authentication layer
//! already refuses these POSTs to read-only access (403).

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use serde::Deserialize;
use sqlmq::Backend;

use super::PageError;
use super::layout::enc;
use crate::api::model::Selection;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// `id=…` for one entry, `all=1` for every one.
#[derive(Deserialize, Default)]
pub struct Pick {
    id: Option<String>,
    all: Option<String>,
}

impl Pick {
    fn selection(&self) -> ApiResult<Selection> {
        match (&self.id, self.all.is_some()) {
            (_, true) => Ok(Selection::All),
            (Some(id), false) => Ok(Selection::Ids(vec![id.trim().parse()?])),
            (None, false) => Err(ApiError::invalid("pick an entry or all")),
        }
    }
}

/// `to=…` (reset) or `from=…&to=…` (replay).
#[derive(Deserialize)]
pub struct Range {
    from: Option<String>,
    to: String,
}

fn back(page: String, message: String) -> Response {
    Redirect::to(&format!("{page}?msg={}", enc(&message))).into_response()
}

fn done(result: ApiResult<(String, String)>) -> Response {
    match result {
        Ok((page, message)) => back(page, message),
        Err(e) => PageError(e).into_response(),
    }
}

fn queue_page(q: &str) -> String {
    format!("/queues/{}", enc(q))
}

fn group_page(t: &str, g: &str) -> String {
    format!("/topics/{}/groups/{}", enc(t), enc(g))
}

async fn pause<B: Backend>(State(s): State<AppState<B>>, Path(q): Path<String>) -> Response {
    done(
        async {
            crate::api::queues::set_paused(&s, &q, true).await?;
            Ok((queue_page(&q), format!("Queue {q} paused.")))
        }
        .await,
    )
}

async fn resume<B: Backend>(State(s): State<AppState<B>>, Path(q): Path<String>) -> Response {
    done(
        async {
            crate::api::queues::set_paused(&s, &q, false).await?;
            Ok((queue_page(&q), format!("Queue {q} resumed.")))
        }
        .await,
    )
}

/// `key=…&weight=…`: a fairness key's weight.
#[derive(Deserialize)]
pub struct Weight {
    key: String,
    weight: String,
}

async fn weight<B: Backend>(
    State(s): State<AppState<B>>,
    Path(q): Path<String>,
    Form(w): Form<Weight>,
) -> Response {
    done(
        async {
            let weight: u32 = w.weight.trim().parse().map_err(|_| {
                ApiError::invalid(format!("weight: a whole number, got {:?}", w.weight))
            })?;
            s.queue(&q).await?.set_weight(&w.key, weight).await?;
            Ok((
                queue_page(&q),
                format!("Fairness key {:?} of {q} has weight {weight}.", w.key),
            ))
        }
        .await,
    )
}

async fn purge<B: Backend>(State(s): State<AppState<B>>, Path(q): Path<String>) -> Response {
    done(
        async {
            let n = s.queue(&q).await?.purge().await?;
            Ok((queue_page(&q), format!("Purged {n} message(s) from {q}.")))
        }
        .await,
    )
}

async fn redrive<B: Backend>(
    State(s): State<AppState<B>>,
    Path(q): Path<String>,
    Form(pick): Form<Pick>,
) -> Response {
    done(
        async {
            let n = crate::api::dead::redrive(&s, &q, pick.selection()?).await?;
            Ok((
                queue_page(&q),
                format!("Redrove {n} dead letter(s) into {q}."),
            ))
        }
        .await,
    )
}

async fn purge_dead<B: Backend>(State(s): State<AppState<B>>, Path(q): Path<String>) -> Response {
    done(
        async {
            let n = s.queue(&q).await?.purge_dead_letters().await?;
            Ok((
                queue_page(&q),
                format!("Deleted {n} dead letter(s) of {q}."),
            ))
        }
        .await,
    )
}

async fn delete_message<B: Backend>(
    State(s): State<AppState<B>>,
    Path((q, id)): Path<(String, String)>,
) -> Response {
    done(
        async {
            crate::api::messages::cancel(State(s), Path((q.clone(), id.clone()))).await?;
            Ok((queue_page(&q), format!("Deleted message {id}.")))
        }
        .await,
    )
}

async fn retry_now<B: Backend>(
    State(s): State<AppState<B>>,
    Path((t, g)): Path<(String, String)>,
    Form(pick): Form<Pick>,
) -> Response {
    done(
        async {
            let n = crate::api::group_admin::retry_now(&s, &t, &g, pick.selection()?).await?;
            Ok((group_page(&t, &g), format!("{n} retry(ies) made due now.")))
        }
        .await,
    )
}

async fn group_redrive<B: Backend>(
    State(s): State<AppState<B>>,
    Path((t, g)): Path<(String, String)>,
    Form(pick): Form<Pick>,
) -> Response {
    done(
        async {
            let n = crate::api::group_admin::redrive(&s, &t, &g, pick.selection()?).await?;
            Ok((group_page(&t, &g), format!("Redrove {n} dead letter(s).")))
        }
        .await,
    )
}

async fn group_purge_dead<B: Backend>(
    State(s): State<AppState<B>>,
    Path((t, g)): Path<(String, String)>,
) -> Response {
    done(
        async {
            let n = s.group(&t, &g).await?.purge_dead_letters().await?;
            Ok((group_page(&t, &g), format!("Deleted {n} dead letter(s).")))
        }
        .await,
    )
}

async fn reset<B: Backend>(
    State(s): State<AppState<B>>,
    Path((t, g)): Path<(String, String)>,
    Form(range): Form<Range>,
) -> Response {
    done(
        async {
            let to = range.to.trim();
            crate::api::group_admin::reset_group(&s, &t, &g, to).await?;
            Ok((group_page(&t, &g), format!("Group reset to {to}.")))
        }
        .await,
    )
}

async fn replay<B: Backend>(
    State(s): State<AppState<B>>,
    Path((t, g)): Path<(String, String)>,
    Form(range): Form<Range>,
) -> Response {
    done(
        async {
            let from = range
                .from
                .as_deref()
                .unwrap_or("earliest")
                .trim()
                .to_owned();
            let n =
                crate::api::group_admin::replay_group(&s, &t, &g, &from, range.to.trim()).await?;
            Ok((
                group_page(&t, &g),
                format!("{n} record(s) queued for delivery again."),
            ))
        }
        .await,
    )
}

fn schedules_page() -> String {
    "/schedules".to_owned()
}

async fn batch_seal<B: Backend>(State(s): State<AppState<B>>, Path(id): Path<String>) -> Response {
    done(
        async {
            let batch: sqlmq::flow::BatchId = id.trim().parse()?;
            s.client.seal_batch(batch).await?;
            Ok((
                format!("/batches/{}", enc(&id)),
                format!("Batch {batch} sealed."),
            ))
        }
        .await,
    )
}

async fn schedule_pause<B: Backend>(
    State(s): State<AppState<B>>,
    Path(name): Path<String>,
) -> Response {
    done(
        async {
            crate::api::schedules::set_paused(&s, &name, true).await?;
            Ok((schedules_page(), format!("Schedule {name} paused.")))
        }
        .await,
    )
}

async fn schedule_resume<B: Backend>(
    State(s): State<AppState<B>>,
    Path(name): Path<String>,
) -> Response {
    done(
        async {
            crate::api::schedules::set_paused(&s, &name, false).await?;
            Ok((schedules_page(), format!("Schedule {name} resumed.")))
        }
        .await,
    )
}

/// Every action route.
pub(crate) fn routes<B: Backend>() -> Router<AppState<B>> {
    let q = "/ui/queues/{queue}";
    let g = "/ui/topics/{topic}/groups/{group}";
    Router::new()
        .route(&format!("{q}/pause"), post(pause))
        .route(&format!("{q}/resume"), post(resume))
        .route(&format!("{q}/purge"), post(purge))
        .route(&format!("{q}/weight"), post(weight))
        .route(&format!("{q}/dead/redrive"), post(redrive))
        .route(&format!("{q}/dead/purge"), post(purge_dead))
        .route(&format!("{q}/messages/{{id}}/delete"), post(delete_message))
        .route(&format!("{g}/retry-now"), post(retry_now))
        .route(&format!("{g}/dead/redrive"), post(group_redrive))
        .route(&format!("{g}/dead/purge"), post(group_purge_dead))
        .route(&format!("{g}/reset"), post(reset))
        .route(&format!("{g}/replay"), post(replay))
        .route("/ui/batches/{id}/seal", post(batch_seal))
        .route("/ui/schedules/{schedule}/pause", post(schedule_pause))
        .route("/ui/schedules/{schedule}/resume", post(schedule_resume))
}
