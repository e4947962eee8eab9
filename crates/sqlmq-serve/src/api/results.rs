//! Results: what an ack left (`results` of `POST …/ack`), read back by message id, and a
//! message's dependencies with theirs (what a workflow step's handler reads).

use axum::extract::{Path, State};
use serde::Serialize;
use sqlmq::Backend;
use utoipa::ToSchema;

use crate::body::encode;
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::state::AppState;

/// The result a message's ack left.
#[derive(Serialize, ToSchema)]
pub struct ResultOut {
    /// The message id.
    pub id: String,
    /// The result, when it is UTF-8 text (as every result given over HTTP is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The result in base64, when it is not UTF-8 (a library client may keep bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<String>,
}

/// A dependency of a message, with the result its ack left.
#[derive(Serialize, ToSchema)]
pub struct DependencyOut {
    /// The dependency's message id.
    pub id: String,
    /// Its step name, in a workflow.
    pub step: Option<String>,
    /// Its result, when it left one as UTF-8 text (absent: not acked yet, acked without a
    /// result, or expired).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Its result in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<String>,
}

/// A message's dependencies.
#[derive(Serialize, ToSchema)]
pub struct DependenciesResponse {
    /// One per dependency (none for a message without dependencies, or an unknown one).
    pub dependencies: Vec<DependencyOut>,
}

/// The result the ack of a message left (kept 7 days); 404 when it left none.
#[utoipa::path(get, operation_id = "message_result", path = "/v1/messages/{id}/result", tag = "messages",
    params(("id" = String, Path, description = "Message id")),
    responses((status = 200, description = "The result", body = ResultOut)))]
pub async fn result<B: Backend>(
    State(state): State<AppState<B>>,
    Path(id): Path<String>,
) -> ApiResult<Json<ResultOut>> {
    let id: sqlmq::MessageId = id.parse()?;
    let Some(bytes) = state.client.result(id).await? else {
        return Err(ApiError::not_found(format!(
            "message {id} left no result (not acked yet, acked without one, or more than 7 days ago)"
        )));
    };
    let (result, result_base64) = encode(bytes);
    Ok(Json(ResultOut {
        id: id.to_string(),
        result,
        result_base64,
    }))
}

/// A message's dependencies (`depends_on`, or a workflow step's `after`), each with the result
/// its ack left: what a step's handler reads.
#[utoipa::path(get, operation_id = "message_dependencies", path = "/v1/messages/{id}/dependencies", tag = "messages",
    params(("id" = String, Path, description = "Message id")),
    responses((status = 200, description = "Its dependencies with their results", body = DependenciesResponse)))]
pub async fn dependencies<B: Backend>(
    State(state): State<AppState<B>>,
    Path(id): Path<String>,
) -> ApiResult<Json<DependenciesResponse>> {
    let id: sqlmq::MessageId = id.parse()?;
    let found = state.client.dependency_results(id).await?;
    Ok(Json(DependenciesResponse {
        dependencies: found
            .into_iter()
            .map(|d| {
                let (result, result_base64) = match d.result {
                    Some(bytes) => encode(bytes),
                    None => (None, None),
                };
                DependencyOut {
                    id: d.id.to_string(),
                    step: d.step,
                    result,
                    result_base64,
                }
            })
            .collect(),
    }))
}
