//! Operating a group: reset, replay, waiting retries ("retry now"), dead letters (redrive,
//! purge).

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use super::model::{CountResponse, DeadLettersResponse, IdsRequest, ListQuery, Selection};
use crate::body::rfc3339;
use crate::error::ApiResult;
use crate::extract::{Json, Query};
use crate::state::AppState;

/// A partition and an offset.
#[derive(Serialize, ToSchema)]
pub struct PositionOut {
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: i64,
}

/// Positions per partition.
#[derive(Serialize, ToSchema)]
pub struct PositionsResponse {
    /// One per partition.
    pub positions: Vec<PositionOut>,
}

pub(crate) fn positions(list: Vec<(u32, i64)>) -> PositionsResponse {
    PositionsResponse {
        positions: list
            .into_iter()
            .map(|(partition, offset)| PositionOut { partition, offset })
            .collect(),
    }
}

/// `POST …/reset`: move the group to a position.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// `earliest`, `latest`, an offset, or an RFC 3339 time.
    pub to: String,
}

/// `POST …/replay`: deliver a range again.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// From (inclusive): `earliest`, `latest`, an offset or an RFC 3339 time.
    pub from: String,
    /// To (exclusive), in the same forms.
    pub to: String,
}

/// A record waiting for its next attempt.
#[derive(Serialize, ToSchema)]
pub struct RetryOut {
    /// The record id.
    pub id: String,
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: i64,
    /// Attempts made.
    pub attempts: u32,
    /// When it is due (RFC 3339).
    pub run_at: String,
}

/// Records waiting on the ladder, soonest first.
#[derive(Serialize, ToSchema)]
pub struct RetriesResponse {
    /// The waiting records.
    pub retries: Vec<RetryOut>,
}

type GroupPath = Path<(String, String)>;

/// Reset: returns the new positions.
pub(crate) async fn reset_group<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
    to: &str,
) -> ApiResult<PositionsResponse> {
    let g = state.group(topic, group).await?;
    let list = g.reset(to.parse()?).await?;
    state.wakeups.wake(&format!("t:{topic}"));
    Ok(positions(list))
}

/// Replay: returns how many records were queued again.
pub(crate) async fn replay_group<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
    from: &str,
    to: &str,
) -> ApiResult<u64> {
    let g = state.group(topic, group).await?;
    let n = g.replay(from.parse()?, to.parse()?).await?;
    state.wakeups.wake(&format!("t:{topic}"));
    Ok(n)
}

/// Retry now: returns how many were waiting.
pub(crate) async fn retry_now<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
    selection: Selection,
) -> ApiResult<u64> {
    let g = state.group(topic, group).await?;
    let ids = match selection {
        Selection::Ids(ids) => ids,
        Selection::All => g.retries(10_000).await?.into_iter().map(|r| r.id).collect(),
    };
    let n = if ids.is_empty() {
        0
    } else {
        g.retry_now(&ids).await?
    };
    state.wakeups.wake(&format!("t:{topic}"));
    Ok(n)
}

/// Redrive dead letters: returns how many.
pub(crate) async fn redrive<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
    selection: Selection,
) -> ApiResult<u64> {
    let g = state.group(topic, group).await?;
    let n = match selection {
        Selection::All => g.redrive_all().await?,
        Selection::Ids(ids) => g.redrive(&ids).await?.len() as u64,
    };
    state.wakeups.wake(&format!("t:{topic}"));
    Ok(n)
}

/// Move the group's position in every partition.
#[utoipa::path(post, operation_id = "group_reset", path = "/v1/topics/{topic}/groups/{group}/reset", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    request_body = ResetRequest,
    responses((status = 200, description = "The new positions", body = PositionsResponse)))]
pub async fn reset<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
    Json(request): Json<ResetRequest>,
) -> ApiResult<Json<PositionsResponse>> {
    Ok(Json(
        reset_group(&state, &topic, &group, &request.to).await?,
    ))
}

/// Deliver a range of records again (cluster groups).
#[utoipa::path(post, operation_id = "group_replay", path = "/v1/topics/{topic}/groups/{group}/replay", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    request_body = ReplayRequest,
    responses((status = 200, description = "How many records were queued again", body = CountResponse)))]
pub async fn replay<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
    Json(request): Json<ReplayRequest>,
) -> ApiResult<Json<CountResponse>> {
    let count = replay_group(&state, &topic, &group, &request.from, &request.to).await?;
    Ok(Json(CountResponse { count }))
}

/// Records waiting for their next attempt, soonest first.
#[utoipa::path(get, operation_id = "group_retries_list", path = "/v1/topics/{topic}/groups/{group}/retries", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name"), ListQuery),
    responses((status = 200, description = "Waiting retries", body = RetriesResponse)))]
pub async fn retries<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<RetriesResponse>> {
    let limit = query.checked()?;
    let list = state.group(&topic, &group).await?.retries(limit).await?;
    Ok(Json(RetriesResponse {
        retries: list
            .into_iter()
            .map(|r| RetryOut {
                id: r.id.to_string(),
                partition: r.partition,
                offset: r.offset,
                attempts: r.attempts,
                run_at: rfc3339(r.run_at),
            })
            .collect(),
    }))
}

/// Make waiting retries due now: `{"ids":[…]}` or `{"all":true}`.
#[utoipa::path(post, operation_id = "group_retries_retry_now", path = "/v1/topics/{topic}/groups/{group}/retries/retry-now", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    request_body = IdsRequest,
    responses((status = 200, description = "How many were waiting", body = CountResponse)))]
pub async fn retry_now_handler<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
    Json(request): Json<IdsRequest>,
) -> ApiResult<Json<CountResponse>> {
    let count = retry_now(&state, &topic, &group, request.selection()?).await?;
    Ok(Json(CountResponse { count }))
}

/// A group's dead letters with their error history.
#[utoipa::path(get, operation_id = "group_dead_letters_list", path = "/v1/topics/{topic}/groups/{group}/dead", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name"), ListQuery),
    responses((status = 200, description = "Dead letters, oldest first", body = DeadLettersResponse)))]
pub async fn dead<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<DeadLettersResponse>> {
    let limit = query.checked()?;
    let list = state
        .group(&topic, &group)
        .await?
        .dead_letters(limit)
        .await?;
    Ok(Json(list.into()))
}

/// Redrive a group's dead letters: `{"ids":[…]}` or `{"all":true}`.
#[utoipa::path(post, operation_id = "group_dead_letters_redrive", path = "/v1/topics/{topic}/groups/{group}/dead/redrive", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    request_body = IdsRequest,
    responses((status = 200, description = "How many were redriven", body = CountResponse)))]
pub async fn redrive_handler<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
    Json(request): Json<IdsRequest>,
) -> ApiResult<Json<CountResponse>> {
    let count = redrive(&state, &topic, &group, request.selection()?).await?;
    Ok(Json(CountResponse { count }))
}

/// Delete a group's dead letters.
#[utoipa::path(delete, operation_id = "group_dead_letters_purge", path = "/v1/topics/{topic}/groups/{group}/dead", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    responses((status = 200, description = "How many were deleted", body = CountResponse)))]
pub async fn purge_dead<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): GroupPath,
) -> ApiResult<Json<CountResponse>> {
    let count = state
        .group(&topic, &group)
        .await?
        .purge_dead_letters()
        .await?;
    Ok(Json(CountResponse { count }))
}
