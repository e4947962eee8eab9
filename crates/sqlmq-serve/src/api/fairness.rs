//! A fair queue's keys: their weights and backlogs (the mode is the queue's `fair` setting).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use super::model::ListQuery;
use crate::error::ApiResult;
use crate::extract::{Json, Query};
use crate::state::AppState;

/// A fairness key of a fair queue.
#[derive(Serialize, ToSchema)]
pub struct FairnessKeyOut {
    /// The key (empty: messages sent without one).
    pub key: String,
    /// Its weight: its share of deliveries while other keys have messages waiting is its
    /// weight over the sum of theirs.
    pub weight: u32,
    /// Its messages ready now.
    pub ready: u64,
    /// Its messages claimed and not yet settled.
    pub in_flight: u64,
    /// Age of its oldest ready message, in milliseconds (0 when none).
    pub oldest_ready_ms: u64,
    /// Its messages made ready so far (sent, due, back after a retry's backoff): a counter
    /// whose rate is the key's arrival rate.
    pub arrived: u64,
    /// Its messages that left so far (acked, dead-lettered, cancelled, purged, gone back to
    /// wait for a retry): a counter whose rate is the key's completion rate.
    pub settled: u64,
}

/// A fair queue's keys.
#[derive(Serialize, ToSchema)]
pub struct FairnessKeysResponse {
    /// The keys with the most messages ready, most first; then keys with messages in flight
    /// and nothing ready; then keys with a weight set and neither.
    pub keys: Vec<FairnessKeyOut>,
}

/// `PUT /v1/queues/{queue}/weights`: one key's weight.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightRequest {
    /// The fairness key (empty: messages sent without one).
    pub key: String,
    /// Its weight, 1 to 10 000 (every key starts at 1).
    #[schema(minimum = 1, maximum = 10000)]
    pub weight: u32,
}

/// The keys of a queue (at most 1 024).
pub(crate) async fn keys_of<B: Backend>(
    state: &AppState<B>,
    name: &str,
    limit: usize,
) -> ApiResult<Vec<FairnessKeyOut>> {
    let keys = state.queue(name).await?.fairness_keys(limit).await?;
    Ok(keys
        .into_iter()
        .map(|k| FairnessKeyOut {
            key: k.key,
            weight: k.weight,
            ready: k.ready,
            in_flight: k.in_flight,
            oldest_ready_ms: k.oldest_ready_ms,
            arrived: k.arrived,
            settled: k.settled,
        })
        .collect())
}

/// A fair queue's fairness keys with the most messages ready (at most 1 024), with their
/// weights and messages in flight; then keys with messages in flight and nothing ready; then
/// keys with a weight set and neither. It counts every ready message of the queue.
#[utoipa::path(get, operation_id = "queue_keys_list", path = "/v1/queues/{queue}/keys", tag = "queues",
    params(("queue" = String, Path, description = "Queue name"), ListQuery),
    responses((status = 200, description = "The keys", body = FairnessKeysResponse)))]
pub async fn keys<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Query(query): Query<ListQuery>,
) -> ApiResult<Json<FairnessKeysResponse>> {
    let limit = query.checked()?;
    Ok(Json(FairnessKeysResponse {
        keys: keys_of(&state, &name, limit).await?,
    }))
}

/// Set a fairness key's weight: it applies to the key's messages that become ready after it.
#[utoipa::path(put, operation_id = "queue_weight_put", path = "/v1/queues/{queue}/weights", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = WeightRequest,
    responses((status = 204, description = "Set")))]
pub async fn set_weight<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<WeightRequest>,
) -> ApiResult<StatusCode> {
    state
        .queue(&name)
        .await?
        .set_weight(&request.key, request.weight)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
