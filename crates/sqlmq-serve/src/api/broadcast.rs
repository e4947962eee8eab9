//! Broadcast members over HTTP: each member polls every record in offset order from its own
//! position and checkpoints it.
//!
//! A member's position lives in this server's memory between polls (a `BroadcastReader` per
//! member); `checkpoint` saves it in the database, so that after a restart of the server — or
//! with several servers behind a load balancer — the member resumes from its last checkpoint
//! (at-least-once for what it read after it). Poll with `"checkpoint": true` to save after
//! every poll. A member silent for [`READER_IDLE`] is forgotten by the server (its checkpoint
//! stays).

use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use super::group_admin::{PositionsResponse, positions};
use super::records::RecordOut;
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::longpoll::wait_for;
use crate::state::{AppState, SharedReader};

/// `POST …/members/{member}/poll`.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct PollRequest {
    /// Most records (default 100).
    #[schema(minimum = 1, maximum = 1000)]
    pub max: Option<u32>,
    /// Long poll: wait up to this long for records (default 0).
    #[schema(minimum = 0, maximum = 20000)]
    pub wait_ms: Option<u64>,
    /// Save the new positions after this poll (default false).
    pub checkpoint: Option<bool>,
}

/// Records read by a member, and its positions after them.
#[derive(Serialize, ToSchema)]
pub struct PollResponse {
    /// The records, in offset order per partition.
    pub records: Vec<RecordOut>,
    /// The member's next offset per partition.
    pub positions: Vec<super::group_admin::PositionOut>,
}

type MemberPath = Path<(String, String, String)>;

/// A member not heard from for this long loses its in-memory position; its next poll resumes
/// from its last checkpoint.
pub const READER_IDLE: Duration = Duration::from_secs(600);

async fn reader<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
    member: &str,
) -> ApiResult<SharedReader<B>> {
    let key = (topic.to_owned(), group.to_owned(), member.to_owned());
    let now = Instant::now();
    let mut readers = state.readers.lock().await;
    // Members that stopped polling are forgotten (their checkpoint stays in the database),
    // so that the map cannot grow without bound.
    readers.retain(|_, (used, _)| now.duration_since(*used) < READER_IDLE);
    if let Some((used, r)) = readers.get_mut(&key) {
        *used = now;
        return Ok(r.clone());
    }
    let g = state.group(topic, group).await?;
    let r = SharedReader::new(tokio::sync::Mutex::new(g.reader(member).await?));
    readers.insert(key, (now, r.clone()));
    Ok(r)
}

/// Read the next records from the member's positions, waiting up to `wait_ms`.
#[utoipa::path(post, operation_id = "member_poll", path = "/v1/topics/{topic}/groups/{group}/members/{member}/poll", tag = "broadcast",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Broadcast group name"),
           ("member" = String, Path, description = "Member name (stable across restarts)")),
    request_body = PollRequest,
    responses((status = 200, description = "Records and new positions", body = PollResponse)))]
pub async fn poll<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group, member)): MemberPath,
    Json(request): Json<PollRequest>,
) -> ApiResult<Json<PollResponse>> {
    let max = request.max.unwrap_or(100);
    if !(1..=1000).contains(&max) {
        return Err(ApiError::invalid(format!(
            "max must be 1..=1000, got {max}"
        )));
    }
    let wait = request.wait_ms.unwrap_or(0);
    if wait > 20_000 {
        return Err(ApiError::invalid(format!(
            "wait_ms must be 0..=20000, got {wait}"
        )));
    }
    let wait = std::time::Duration::from_millis(wait).min(state.max_wait);
    let shared = reader(&state, &topic, &group, &member).await?;
    let mut r = shared.lock().await;
    let notify = state.wakeups.get(&format!("t:{topic}"));
    let records = {
        let r = &mut *r;
        let r = std::sync::Arc::new(tokio::sync::Mutex::new(r));
        wait_for(notify, wait, state.poll, &state.shutdown, || {
            let r = r.clone();
            async move { r.lock().await.poll(max as usize).await }
        })
        .await?
    };
    if request.checkpoint.unwrap_or(false) {
        r.checkpoint().await?;
    }
    Ok(Json(PollResponse {
        records: records.into_iter().map(RecordOut::from).collect(),
        positions: positions(r.positions()).positions,
    }))
}

/// Save the member's positions: it resumes from here after a restart.
#[utoipa::path(post, operation_id = "member_checkpoint", path = "/v1/topics/{topic}/groups/{group}/members/{member}/checkpoint", tag = "broadcast",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Broadcast group name"),
           ("member" = String, Path, description = "Member name")),
    responses((status = 200, description = "The saved positions", body = PositionsResponse)))]
pub async fn checkpoint<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group, member)): MemberPath,
) -> ApiResult<Json<PositionsResponse>> {
    let shared = reader(&state, &topic, &group, &member).await?;
    let r = shared.lock().await;
    r.checkpoint().await?;
    Ok(Json(positions(r.positions())))
}

/// Leave the group for good: forget the member's checkpoint.
#[utoipa::path(delete, operation_id = "member_leave", path = "/v1/topics/{topic}/groups/{group}/members/{member}", tag = "broadcast",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Broadcast group name"),
           ("member" = String, Path, description = "Member name")),
    responses((status = 204, description = "Left")))]
pub async fn leave<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group, member)): MemberPath,
) -> ApiResult<StatusCode> {
    let shared = reader(&state, &topic, &group, &member).await?;
    state
        .readers
        .lock()
        .await
        .remove(&(topic.clone(), group.clone(), member.clone()));
    let reader = match std::sync::Arc::try_unwrap(shared) {
        Ok(m) => m.into_inner(),
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "member_busy",
                "the member has a poll in progress",
            ));
        }
    };
    reader.leave().await?;
    Ok(StatusCode::NO_CONTENT)
}
