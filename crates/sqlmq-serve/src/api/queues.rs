//! Queue administration: list, create or update, describe, delete, pause, resume, purge.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use super::model::CountResponse;
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::state::AppState;

/// A queue's settings.
#[derive(Serialize, ToSchema)]
pub struct QueueConfigOut {
    /// Deliveries before a failing message becomes a dead letter.
    pub max_attempts: u32,
    /// Wait between attempts: `exp:BASE:MAX` or a ladder such as `10s,1m,10m`.
    pub backoff: String,
    /// How long idempotency keys are remembered, in milliseconds.
    pub dedup_window_ms: u64,
    /// At most this many messages in flight in the whole queue, every process together (null:
    /// no limit).
    #[schema(minimum = 1, maximum = 1000000)]
    pub max_in_flight: Option<u32>,
    /// At most this many deliveries per window, every process together, as `COUNT/DURATION`
    /// (`100/1m`; null: no limit).
    #[schema(example = "100/1m")]
    pub rate_limit: Option<String>,
    /// At most this many messages of one concurrency key at once, every process together
    /// (null: no limit).
    #[schema(minimum = 1, maximum = 1000000)]
    pub concurrency_limit: Option<u32>,
    /// At most this many deliveries of one concurrency key per window, every process
    /// together, as `COUNT/DURATION` (`10/1s`; null: no limit).
    #[schema(example = "10/1s")]
    pub rate_limit_per_key: Option<String>,
    /// Whether ready messages are handed out across fairness keys by weight within a
    /// priority (else first in, first out).
    pub fair: bool,
}

/// A queue: its settings and its messages by state.
#[derive(Serialize, ToSchema)]
pub struct QueueOut {
    /// The queue's name.
    pub name: String,
    /// Whether receives hand out nothing.
    pub paused: bool,
    /// Claimable now.
    pub ready: u64,
    /// Delayed or backing off.
    pub scheduled: u64,
    /// Waiting behind an earlier message with their ordering key.
    pub blocked: u64,
    /// Waiting for their dependencies to be acked, or for their batch to finish (a batch's
    /// callbacks).
    pub waiting: u64,
    /// Claimed, not acked yet.
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// Age of the oldest ready message, in milliseconds.
    pub oldest_ready_age_ms: Option<u64>,
    /// Settings.
    pub config: QueueConfigOut,
}

/// Every queue.
#[derive(Serialize, ToSchema)]
pub struct QueuesResponse {
    /// Queues by name.
    pub queues: Vec<QueueOut>,
}

/// `PUT /v1/queues/{queue}`: settings to create the queue with, or to change (fields left out
/// keep their current value, or the default for a new queue).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct QueueConfigRequest {
    /// Deliveries before dead-lettering (default 25).
    #[schema(minimum = 1, maximum = 1000000)]
    pub max_attempts: Option<u32>,
    /// `exp:BASE:MAX` (e.g. `exp:1s:1h`) or a ladder (e.g. `10s,1m,10m`).
    pub backoff: Option<String>,
    /// How long idempotency keys are remembered, in milliseconds (default 24 h).
    #[schema(minimum = 0, maximum = 31622400000_u64)]
    pub dedup_window_ms: Option<u64>,
    /// At most this many messages in flight in the whole queue, every process together; 0
    /// removes the limit.
    #[schema(minimum = 0, maximum = 1000000)]
    pub max_in_flight: Option<u32>,
    /// At most this many deliveries per window, every process together: `COUNT/DURATION`
    /// (`100/1m`, `20/1s`); `none` removes the limit.
    #[schema(example = "100/1m")]
    pub rate_limit: Option<String>,
    /// At most this many messages of one concurrency key (`concurrency_key` of a sent message)
    /// at once, every process together; the others wait in line; 0 removes the limit.
    #[schema(minimum = 0, maximum = 1000000)]
    pub concurrency_limit: Option<u32>,
    /// At most this many deliveries of one concurrency key per window, every process
    /// together: `COUNT/DURATION` (`10/1s`); a key over it is skipped while the others flow;
    /// `none` removes the limit.
    #[schema(example = "10/1s")]
    pub rate_limit_per_key: Option<String>,
    /// Hand out ready messages across fairness keys (`fairness_key` of a sent message) by
    /// weight within a priority, so that no key's backlog delays the others; `false`: first
    /// in, first out.
    pub fair: Option<bool>,
}

/// A backoff in the text form the CLI and this API accept.
pub(crate) fn backoff_text(b: &sqlmq::queue::Backoff) -> String {
    let d = |d: &Duration| humantime::format_duration(*d).to_string().replace(' ', "");
    match b {
        sqlmq::queue::Backoff::Exponential { base, max, .. } => {
            format!("exp:{}:{}", d(base), d(max))
        }
        sqlmq::queue::Backoff::Ladder(steps) => steps.iter().map(d).collect::<Vec<_>>().join(","),
    }
}

/// A rate limit in the text form this API accepts, without spaces (`100/1m`, `5/1m30s`).
pub(crate) fn rate_limit_text(r: &sqlmq::queue::RateLimit) -> String {
    r.to_string().replace(' ', "")
}

fn config_out(c: &sqlmq::QueueConfig) -> QueueConfigOut {
    QueueConfigOut {
        max_attempts: c.max_attempts,
        backoff: backoff_text(&c.backoff),
        dedup_window_ms: c.dedup_window.as_millis() as u64,
        max_in_flight: c.max_in_flight,
        rate_limit: c.rate_limit.as_ref().map(rate_limit_text),
        concurrency_limit: c.concurrency_limit,
        rate_limit_per_key: c.rate_limit_per_key.as_ref().map(rate_limit_text),
        fair: c.fair,
    }
}

fn queue_out(s: sqlmq::queue::QueueStats, c: &sqlmq::QueueConfig) -> QueueOut {
    QueueOut {
        name: s.name,
        paused: s.paused,
        ready: s.ready,
        scheduled: s.scheduled,
        blocked: s.blocked,
        waiting: s.waiting,
        in_flight: s.in_flight,
        dead: s.dead,
        oldest_ready_age_ms: s.oldest_ready_age_ms,
        config: config_out(c),
    }
}

/// Every queue with its counts and settings.
pub(crate) async fn all<B: Backend>(state: &AppState<B>) -> ApiResult<Vec<QueueOut>> {
    let stats = state.client.queue_stats().await?;
    let configs: std::collections::HashMap<String, sqlmq::QueueConfig> =
        state.client.queue_configs().await?.into_iter().collect();
    Ok(stats
        .into_iter()
        .filter_map(|s| {
            let c = configs.get(&s.name)?.clone();
            Some(queue_out(s, &c))
        })
        .collect())
}

/// One queue with its counts and settings.
pub(crate) async fn one<B: Backend>(state: &AppState<B>, name: &str) -> ApiResult<QueueOut> {
    let queue = state.queue(name).await?;
    let stats = queue.stats().await?;
    let config = state
        .client
        .queue_configs()
        .await?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| c)
        .ok_or_else(|| sqlmq::Error::UnknownQueue(name.to_owned()))?;
    Ok(queue_out(stats, &config))
}

/// List queues with their counts.
#[utoipa::path(get, operation_id = "queues_list", path = "/v1/queues", tag = "queues",
    responses((status = 200, description = "Every queue", body = QueuesResponse)))]
pub async fn list<B: Backend>(State(state): State<AppState<B>>) -> ApiResult<Json<QueuesResponse>> {
    Ok(Json(QueuesResponse {
        queues: all(&state).await?,
    }))
}

/// Describe a queue: counts by state and settings.
#[utoipa::path(get, operation_id = "queue_get", path = "/v1/queues/{queue}", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "The queue", body = QueueOut)))]
pub async fn get<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<QueueOut>> {
    Ok(Json(one(&state, &name).await?))
}

/// Create a queue, or update its settings (its messages are kept).
#[utoipa::path(put, operation_id = "queue_put", path = "/v1/queues/{queue}", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = QueueConfigRequest,
    responses((status = 200, description = "The queue as it is now", body = QueueOut,
        links(
            ("QueueGet" = (operation_id = "queue_get", parameters(("queue" = "$request.path.queue")))),
            ("QueueMessagesList" = (operation_id = "queue_messages_list",
                parameters(("queue" = "$request.path.queue")))),
        ))))]
pub async fn put<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<QueueConfigRequest>,
) -> ApiResult<Json<QueueOut>> {
    sqlmq::admin::validate_name("queue", &name)?;
    let mut config = state
        .client
        .queue_configs()
        .await?
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| c)
        .unwrap_or_default();
    if let Some(n) = request.max_attempts {
        config = config.max_attempts(n);
    }
    if let Some(text) = &request.backoff {
        config = config.backoff(text.parse()?);
    }
    if let Some(ms) = request.dedup_window_ms {
        config = config.dedup_window(Duration::from_millis(ms));
    }
    if let Some(n) = request.max_in_flight {
        config = config.max_in_flight((n > 0).then_some(n));
    }
    if let Some(text) = &request.rate_limit {
        config = config.rate_limit(match text.as_str() {
            "none" => None,
            text => Some(text.parse()?),
        });
    }
    if let Some(n) = request.concurrency_limit {
        config = config.concurrency_limit((n > 0).then_some(n));
    }
    if let Some(text) = &request.rate_limit_per_key {
        config = config.rate_limit_per_key(match text.as_str() {
            "none" => None,
            text => Some(text.parse()?),
        });
    }
    if let Some(fair) = request.fair {
        config = config.fair(fair);
    }
    state.client.create_queue(&name, config).await?;
    // A cached handle would go on claiming by the limits it read (for up to the library's
    // refresh): a fresh one applies the new ones to this server's next receive.
    state.handles.forget_queue(&name);
    Ok(Json(one(&state, &name).await?))
}

/// Delete a queue with all its messages and dead letters.
#[utoipa::path(delete, operation_id = "queue_delete", path = "/v1/queues/{queue}", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 204, description = "Deleted")))]
pub async fn delete<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    state.handles.forget_queue(&name);
    state.client.delete_queue(&name).await?;
    state.handles.forget_queue(&name);
    Ok(StatusCode::NO_CONTENT)
}

/// Pause or resume.
pub(crate) async fn set_paused<B: Backend>(
    state: &AppState<B>,
    name: &str,
    paused: bool,
) -> ApiResult<()> {
    let queue = state.queue(name).await?;
    if paused {
        queue.pause().await?
    } else {
        queue.resume().await?
    }
    Ok(())
}

/// Stop handing out messages (sends are still accepted).
#[utoipa::path(post, operation_id = "queue_pause", path = "/v1/queues/{queue}/pause", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 204, description = "Paused")))]
pub async fn pause<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    set_paused(&state, &name, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Hand out messages again.
#[utoipa::path(post, operation_id = "queue_resume", path = "/v1/queues/{queue}/resume", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 204, description = "Resumed")))]
pub async fn resume<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    set_paused(&state, &name, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete every message except dead letters (in-flight ones included).
#[utoipa::path(post, operation_id = "queue_purge", path = "/v1/queues/{queue}/purge", tag = "queues",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "How many were deleted", body = CountResponse)))]
pub async fn purge<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<CountResponse>> {
    let count = state.queue(&name).await?.purge().await?;
    Ok(Json(CountResponse { count }))
}

/// Reject a duration in milliseconds longer than a year (the library's arithmetic is in
/// microseconds on the database clock).
pub(crate) fn at_most_a_year(field: &str, ms: u64) -> ApiResult<Duration> {
    const YEAR_MS: u64 = 366 * 24 * 3600 * 1000;
    if ms > YEAR_MS {
        return Err(ApiError::invalid(format!(
            "{field} must be at most {YEAR_MS} (a year), got {ms}"
        )));
    }
    Ok(Duration::from_millis(ms))
}
