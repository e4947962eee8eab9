//! A queue's dead letters: list with their error history, redrive (some or all), purge.

use axum::extract::{Path, State};
use sqlmq::Backend;

use super::model::{CountResponse, DeadLettersResponse, IdsRequest, ListQuery, Selection};
use crate::error::ApiResult;
use crate::extract::{Json, Query};
use crate::state::AppState;

/// Redrive `selection` from a queue's dead letters; how many went back.
pub(crate) async fn redrive<B: Backend>(
    state: &AppState<B>,
    name: &str,
    selection: Selection,
) -> ApiResult<u64> {
    let queue = state.queue(name).await?;
    let count = match selection {
        Selection::All => queue.redrive_all().await?,
        Selection::Ids(ids) => queue.redrive(&ids).await?.len() as u64,
    };
    Ok(count)
}

/// The oldest dead letters with their error history.
#[utoipa::path(get, operation_id = "queue_dead_letters_list", path = "/v1/queues/{queue}/dead", tag = "dead letters",
    params(("queue" = String, Path, description = "Queue name"), ListQuery),
    responses((status = 200, description = "Dead letters, oldest first", body = DeadLettersResponse)))]
pub async fn list<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<DeadLettersResponse>> {
    let limit = query.checked()?;
    let dead = state.queue(&name).await?.dead_letters(limit).await?;
    Ok(Json(dead.into()))
}

/// Put dead letters back into the queue (attempts reset): `{"ids":[…]}` or `{"all":true}`.
#[utoipa::path(post, operation_id = "queue_dead_letters_redrive", path = "/v1/queues/{queue}/dead/redrive", tag = "dead letters",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = IdsRequest,
    responses((status = 200, description = "How many were redriven", body = CountResponse)))]
pub async fn redrive_handler<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<IdsRequest>,
) -> ApiResult<Json<CountResponse>> {
    let count = redrive(&state, &name, request.selection()?).await?;
    Ok(Json(CountResponse { count }))
}

/// Delete every dead letter of the queue.
#[utoipa::path(delete, operation_id = "queue_dead_letters_purge", path = "/v1/queues/{queue}/dead", tag = "dead letters",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "How many were deleted", body = CountResponse)))]
pub async fn purge<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<CountResponse>> {
    let count = state.queue(&name).await?.purge_dead_letters().await?;
    Ok(Json(CountResponse { count }))
}
