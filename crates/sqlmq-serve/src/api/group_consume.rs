//! Consuming a cluster-mode group over HTTP: the same shapes as a queue's.

use axum::extract::{Path, State};
use sqlmq::Backend;
use sqlmq::source::Source;

use super::consume;
use super::model::{
    AckRequest, ExtendRequest, NackRequest, ReceiveRequest, ReceiveResponse, SettleResponse,
};
use crate::error::ApiResult;
use crate::extract::Json;
use crate::state::AppState;

async fn consumer<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
) -> ApiResult<Source<B>> {
    Ok(Source::Group(state.group(topic, group).await?))
}

/// Claim records, waiting up to `wait_ms` for the first (long poll).
#[utoipa::path(post, operation_id = "group_receive", path = "/v1/topics/{topic}/groups/{group}/receive", tag = "group consumption",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Cluster group name")),
    request_body = ReceiveRequest,
    responses((status = 200, description = "Claimed records", body = ReceiveResponse)))]
pub async fn receive<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): Path<(String, String)>,
    Json(request): Json<ReceiveRequest>,
) -> ApiResult<Json<ReceiveResponse>> {
    // Boxed: the lookup's future is kilobytes, and a waiting request should not carry it.
    let lookup = Box::pin(consumer(&state, &topic, &group));
    let c = lookup.await?;
    consume::receive(&state, c, request).await
}

/// Ack claimed records; per-receipt results.
#[utoipa::path(post, operation_id = "group_ack", path = "/v1/topics/{topic}/groups/{group}/ack", tag = "group consumption",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Cluster group name")),
    request_body = AckRequest,
    responses((status = 200, description = "Per-receipt results", body = SettleResponse)))]
pub async fn ack<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): Path<(String, String)>,
    Json(request): Json<AckRequest>,
) -> ApiResult<Json<SettleResponse>> {
    let c = consumer(&state, &topic, &group).await?;
    consume::ack(&state, c, request).await
}

/// Nack claimed records: retry on the group's ladder, or dead-letter.
#[utoipa::path(post, operation_id = "group_nack", path = "/v1/topics/{topic}/groups/{group}/nack", tag = "group consumption",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Cluster group name")),
    request_body = NackRequest,
    responses((status = 200, description = "Per-receipt results", body = SettleResponse)))]
pub async fn nack<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): Path<(String, String)>,
    Json(request): Json<NackRequest>,
) -> ApiResult<Json<SettleResponse>> {
    let c = consumer(&state, &topic, &group).await?;
    consume::nack(c, request).await
}

/// Extend the leases of claimed records.
#[utoipa::path(post, operation_id = "group_extend", path = "/v1/topics/{topic}/groups/{group}/extend", tag = "group consumption",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Cluster group name")),
    request_body = ExtendRequest,
    responses((status = 200, description = "Per-receipt results", body = SettleResponse)))]
pub async fn extend<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): Path<(String, String)>,
    Json(request): Json<ExtendRequest>,
) -> ApiResult<Json<SettleResponse>> {
    let c = consumer(&state, &topic, &group).await?;
    consume::extend(c, request).await
}
