//! Topic administration: list (the ranking by volume), create or update, describe, delete.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use crate::error::ApiResult;
use crate::extract::Json;
use crate::snapshot::RATE_WINDOW;
use crate::state::AppState;

/// A topic's settings.
#[derive(Serialize, ToSchema)]
pub struct TopicConfigOut {
    /// Partitions.
    pub partitions: u32,
    /// Records older than this are deleted (milliseconds); none when null.
    pub retention_ms: Option<u64>,
    /// At most about this many bytes of bodies are kept per partition; none when null.
    pub retention_bytes: Option<u64>,
    /// Records some group has not consumed are never deleted.
    pub retention_keeps_unconsumed: bool,
    /// One record in flight per partition per cluster group.
    pub strict_order: bool,
}

/// A topic's size and recent volume.
#[derive(Serialize, ToSchema)]
pub struct TopicOut {
    /// The topic's name.
    pub name: String,
    /// Records retained.
    pub records: u64,
    /// Bytes of bodies retained.
    pub bytes: u64,
    /// Records ever given an offset.
    pub total: u64,
    /// Records per second over the last minute.
    pub rate_per_s: f64,
    /// Consumer groups.
    pub groups: usize,
    /// Settings.
    pub config: TopicConfigOut,
    /// Partitions with their retained offsets (describe only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<Vec<PartitionOut>>,
}

/// One partition: retained offsets `[start, end)` and bytes.
#[derive(Serialize, ToSchema)]
pub struct PartitionOut {
    /// The partition.
    pub partition: u32,
    /// First offset retained.
    pub start: i64,
    /// The offset the next record will get.
    pub end: i64,
    /// Bytes of bodies retained.
    pub bytes: i64,
}

/// Every topic, busiest first (records per second over the last minute, then size).
#[derive(Serialize, ToSchema)]
pub struct TopicsResponse {
    /// The ranking.
    pub topics: Vec<TopicOut>,
}

/// `PUT /v1/topics/{topic}`: settings (fields left out keep their value, or the default).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct TopicConfigRequest {
    /// Partitions (1 to 1024; can only grow).
    #[schema(minimum = 1, maximum = 1024)]
    pub partitions: Option<u32>,
    /// Delete records older than this many milliseconds; 0 removes the limit.
    #[schema(minimum = 0)]
    pub retention_ms: Option<u64>,
    /// Keep at most about this many bytes per partition; 0 removes the limit.
    #[schema(minimum = 0)]
    pub retention_bytes: Option<u64>,
    /// Never delete records some group has not consumed.
    pub retention_keeps_unconsumed: Option<bool>,
    /// One record in flight per partition per cluster group.
    pub strict_order: Option<bool>,
}

fn config_out(c: &sqlmq::TopicConfig) -> TopicConfigOut {
    TopicConfigOut {
        partitions: c.partitions,
        retention_ms: c.retention.map(|d| d.as_millis() as u64),
        retention_bytes: c.retention_bytes,
        retention_keeps_unconsumed: c.retention_keeps_unconsumed,
        strict_order: c.strict_order,
    }
}

fn topic_out(s: sqlmq::topic::TopicStats, c: &sqlmq::TopicConfig) -> TopicOut {
    TopicOut {
        name: s.name,
        records: s.records,
        bytes: s.bytes,
        total: s.total,
        rate_per_s: s.rate_per_s,
        groups: s.groups,
        config: config_out(c),
        partitions: None,
    }
}

/// Every topic, busiest first.
pub(crate) async fn all<B: Backend>(state: &AppState<B>) -> ApiResult<Vec<TopicOut>> {
    let configs: std::collections::HashMap<String, sqlmq::TopicConfig> = state
        .client
        .topics()
        .await?
        .into_iter()
        .map(|t| (t.name().to_owned(), t.config().clone()))
        .collect();
    Ok(state
        .client
        .topic_stats(RATE_WINDOW)
        .await?
        .into_iter()
        .filter_map(|s| {
            let c = configs.get(&s.name)?.clone();
            Some(topic_out(s, &c))
        })
        .collect())
}

/// One topic, with its partitions.
pub(crate) async fn one<B: Backend>(state: &AppState<B>, name: &str) -> ApiResult<TopicOut> {
    // Fresh, not cached: the partition count may have grown.
    let topic = state.client.topic(name).await?;
    let stats = topic.stats(RATE_WINDOW).await?;
    let mut out = topic_out(stats, topic.config());
    out.partitions = Some(
        topic
            .partitions()
            .await?
            .into_iter()
            .map(|p| PartitionOut {
                partition: p.partition,
                start: p.start,
                end: p.end,
                bytes: p.bytes,
            })
            .collect(),
    );
    Ok(out)
}

/// List topics, busiest first.
#[utoipa::path(get, operation_id = "topics_list", path = "/v1/topics", tag = "topics",
    responses((status = 200, description = "Every topic, busiest first", body = TopicsResponse)))]
pub async fn list<B: Backend>(State(state): State<AppState<B>>) -> ApiResult<Json<TopicsResponse>> {
    Ok(Json(TopicsResponse {
        topics: all(&state).await?,
    }))
}

/// Describe a topic: settings, size, rate and partitions.
#[utoipa::path(get, operation_id = "topic_get", path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses((status = 200, description = "The topic", body = TopicOut)))]
pub async fn get<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<Json<TopicOut>> {
    Ok(Json(one(&state, &name).await?))
}

/// Create a topic, or update its settings (partitions only grow).
#[utoipa::path(put, operation_id = "topic_put", path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    request_body = TopicConfigRequest,
    responses((status = 200, description = "The topic as it is now", body = TopicOut,
        links(
            ("TopicGet" = (operation_id = "topic_get", parameters(("topic" = "$request.path.topic")))),
            ("RecordsList" = (operation_id = "records_list", parameters(("topic" = "$request.path.topic")))),
        ))))]
pub async fn put<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<TopicConfigRequest>,
) -> ApiResult<Json<TopicOut>> {
    sqlmq::admin::validate_name("topic", &name)?;
    let mut config = match state.client.topic(&name).await {
        Ok(t) => t.config().clone(),
        Err(sqlmq::Error::UnknownTopic(_)) => sqlmq::TopicConfig::default(),
        Err(e) => return Err(e.into()),
    };
    if let Some(n) = request.partitions {
        config = config.partitions(n);
    }
    if let Some(ms) = request.retention_ms {
        config.retention = (ms > 0).then(|| Duration::from_millis(ms));
    }
    if let Some(bytes) = request.retention_bytes {
        config.retention_bytes = (bytes > 0).then_some(bytes);
    }
    if let Some(keep) = request.retention_keeps_unconsumed {
        config = config.retention_keeps_unconsumed(keep);
    }
    if let Some(strict) = request.strict_order {
        config = config.strict_order(strict);
    }
    state.client.create_topic(&name, config).await?;
    state.handles.forget_topic(&name);
    Ok(Json(one(&state, &name).await?))
}

/// Delete a topic with its records and groups.
#[utoipa::path(delete, operation_id = "topic_delete", path = "/v1/topics/{topic}", tag = "topics",
    params(("topic" = String, Path, description = "Topic name")),
    responses((status = 204, description = "Deleted")))]
pub async fn delete<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    state.handles.forget_topic(&name);
    state.client.delete_topic(&name).await?;
    state.handles.forget_topic(&name);
    Ok(StatusCode::NO_CONTENT)
}
