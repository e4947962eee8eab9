//! Consumer groups of a topic: list with lag, create or update, describe (lag per partition
//! and member), delete.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use super::queues::{backoff_text, rate_limit_text};
use crate::error::ApiResult;
use crate::extract::Json;
use crate::state::AppState;

/// A group's settings.
#[derive(Serialize, ToSchema)]
pub struct GroupConfigOut {
    /// `cluster` or `broadcast`.
    pub mode: String,
    /// Failed attempts before a record becomes a dead letter (cluster).
    pub max_attempts: u32,
    /// Wait before each retry (cluster): a ladder such as `10s,30s,1m` or `exp:BASE:MAX`.
    pub backoff: String,
    /// Records held longer than this (milliseconds) are reported as consume timeouts.
    pub consume_timeout_ms: Option<u64>,
    /// Cluster groups: at most this many deliveries per window, every member together, as
    /// `COUNT/DURATION` (`50/1s`; null: no limit).
    #[schema(example = "50/1s")]
    pub rate_limit: Option<String>,
}

/// A group's lag in one partition.
#[derive(Serialize, ToSchema)]
pub struct PartitionLagOut {
    /// The partition.
    pub partition: u32,
    /// The partition's end.
    pub end: i64,
    /// The group's position.
    pub position: i64,
    /// Records not handed out yet.
    pub backlog: u64,
    /// Held by members now.
    pub in_flight: u64,
    /// Waiting for their next attempt.
    pub retrying: u64,
    /// Dead letters.
    pub dead: u64,
    /// Age of the oldest unconsumed record, in milliseconds.
    pub oldest_unconsumed_age_ms: Option<u64>,
}

/// A broadcast member's checkpoint.
#[derive(Serialize, ToSchema)]
pub struct MemberLagOut {
    /// The member.
    pub member: String,
    /// Records after its checkpoint.
    pub behind: u64,
    /// When it last checkpointed (RFC 3339).
    pub checkpointed_at: String,
}

/// A group and its lag.
#[derive(Serialize, ToSchema)]
pub struct GroupOut {
    /// The group's name.
    pub name: String,
    /// The topic.
    pub topic: String,
    /// Records not consumed yet.
    pub unconsumed: u64,
    /// Records not handed out yet.
    pub backlog: u64,
    /// Held by members now.
    pub in_flight: u64,
    /// Waiting for their next attempt.
    pub retrying: u64,
    /// Dead letters.
    pub dead: u64,
    /// Published records without offsets yet.
    pub unsequenced: u64,
    /// Age of the oldest unconsumed record, in milliseconds.
    pub oldest_unconsumed_age_ms: Option<u64>,
    /// Settings.
    pub config: GroupConfigOut,
    /// Per partition.
    pub partitions: Vec<PartitionLagOut>,
    /// Broadcast members with a checkpoint.
    pub members: Vec<MemberLagOut>,
}

/// The groups of a topic.
#[derive(Serialize, ToSchema)]
pub struct GroupsResponse {
    /// By name.
    pub groups: Vec<GroupOut>,
}

/// `PUT …/groups/{group}`: create a group at `start`, or update its retry settings.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct GroupConfigRequest {
    /// `cluster` (default) or `broadcast`; fixed at creation.
    pub mode: Option<String>,
    /// Where a new group starts: `earliest`, `latest` (default), an offset, or an RFC 3339
    /// time. Ignored for an existing group (use reset).
    pub start: Option<String>,
    /// Failed attempts before dead-lettering (default 16).
    #[schema(minimum = 1, maximum = 1000)]
    pub max_attempts: Option<u32>,
    /// Retry ladder such as `10s,30s,1m`, or `exp:BASE:MAX`.
    pub backoff: Option<String>,
    /// Report records held longer than this many milliseconds; 0 turns it off.
    #[schema(minimum = 0)]
    pub consume_timeout_ms: Option<u64>,
    /// Cluster groups: at most this many deliveries per window, every member together:
    /// `COUNT/DURATION` (`50/1s`); `none` removes the limit.
    #[schema(example = "50/1s")]
    pub rate_limit: Option<String>,
}

fn ms(d: Option<Duration>) -> Option<u64> {
    d.map(|d| d.as_millis() as u64)
}

pub(crate) fn group_out(lag: sqlmq::topic::GroupLag, c: &sqlmq::GroupConfig) -> GroupOut {
    GroupOut {
        name: lag.group,
        topic: lag.topic,
        unconsumed: lag.unconsumed,
        backlog: lag.backlog,
        in_flight: lag.in_flight,
        retrying: lag.retrying,
        dead: lag.dead,
        unsequenced: lag.unsequenced,
        oldest_unconsumed_age_ms: ms(lag.oldest_unconsumed_age),
        config: GroupConfigOut {
            mode: c.mode.to_string(),
            max_attempts: c.max_attempts,
            backoff: backoff_text(&c.backoff),
            consume_timeout_ms: ms(c.consume_timeout),
            rate_limit: c.rate_limit.as_ref().map(rate_limit_text),
        },
        partitions: lag
            .partitions
            .into_iter()
            .map(|p| PartitionLagOut {
                partition: p.partition,
                end: p.end,
                position: p.position,
                backlog: p.backlog,
                in_flight: p.in_flight,
                retrying: p.retrying,
                dead: p.dead,
                oldest_unconsumed_age_ms: ms(p.oldest_unconsumed_age),
            })
            .collect(),
        members: lag
            .members
            .into_iter()
            .map(|m| MemberLagOut {
                member: m.member,
                behind: m.behind,
                checkpointed_at: crate::body::rfc3339(m.checkpointed_at),
            })
            .collect(),
    }
}

/// Every group of `topic` with its lag.
pub(crate) async fn all<B: Backend>(state: &AppState<B>, topic: &str) -> ApiResult<Vec<GroupOut>> {
    let topic = state.topic(topic).await?;
    let mut out = Vec::new();
    for g in topic.groups().await? {
        out.push(group_out(g.lag().await?, g.config()));
    }
    Ok(out)
}

/// One group with its lag.
pub(crate) async fn one<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    group: &str,
) -> ApiResult<GroupOut> {
    let g = state.client.topic(topic).await?.group(group).await?;
    Ok(group_out(g.lag().await?, g.config()))
}

/// List a topic's groups with their lag.
#[utoipa::path(get, operation_id = "groups_list", path = "/v1/topics/{topic}/groups", tag = "groups",
    params(("topic" = String, Path, description = "Topic name")),
    responses((status = 200, description = "The groups", body = GroupsResponse)))]
pub async fn list<B: Backend>(
    State(state): State<AppState<B>>,
    Path(topic): Path<String>,
) -> ApiResult<Json<GroupsResponse>> {
    Ok(Json(GroupsResponse {
        groups: all(&state, &topic).await?,
    }))
}

/// A group's lag per partition and member.
#[utoipa::path(get, operation_id = "group_get", path = "/v1/topics/{topic}/groups/{group}", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    responses((status = 200, description = "The group", body = GroupOut)))]
pub async fn get<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): Path<(String, String)>,
) -> ApiResult<Json<GroupOut>> {
    Ok(Json(one(&state, &topic, &group).await?))
}

/// Create a group, or update its retry settings.
#[utoipa::path(put, operation_id = "group_put", path = "/v1/topics/{topic}/groups/{group}", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    request_body = GroupConfigRequest,
    responses((status = 200, description = "The group as it is now", body = GroupOut,
        links(
            ("GroupGet" = (operation_id = "group_get",
                parameters(("topic" = "$request.path.topic"), ("group" = "$request.path.group")))),
        ))))]
pub async fn put<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic_name, name)): Path<(String, String)>,
    Json(request): Json<GroupConfigRequest>,
) -> ApiResult<Json<GroupOut>> {
    let topic = state.client.topic(&topic_name).await?;
    sqlmq::admin::validate_name("group", &name)?;
    let existing = match topic.group(&name).await {
        Ok(g) => Some(g.config().clone()),
        Err(sqlmq::Error::UnknownGroup { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let mut config = match (&existing, request.mode.as_deref()) {
        (Some(c), _) => c.clone(),
        (None, Some(mode)) => sqlmq::GroupConfig::default().mode(mode.parse()?),
        (None, None) => sqlmq::GroupConfig::default(),
    };
    if let (Some(c), Some(mode)) = (&existing, request.mode.as_deref())
        && c.mode != mode.parse()?
    {
        return Err(sqlmq::Error::InvalidArgument(format!(
            "group {name} exists as a {} group; its mode cannot change",
            c.mode
        ))
        .into());
    }
    if let Some(n) = request.max_attempts {
        config = config.max_attempts(n);
    }
    if let Some(text) = &request.backoff {
        config = config.backoff(text.parse()?);
    }
    if let Some(ms) = request.consume_timeout_ms {
        config.consume_timeout = (ms > 0).then(|| Duration::from_millis(ms));
    }
    if let Some(text) = &request.rate_limit {
        config = config.rate_limit(match text.as_str() {
            "none" => None,
            text => Some(text.parse()?),
        });
    }
    let start: sqlmq::topic::StartAt = match &request.start {
        Some(s) => s.parse()?,
        None => sqlmq::topic::StartAt::Latest,
    };
    topic.create_group(&name, config, start).await?;
    state.handles.forget_group(&topic_name, &name);
    Ok(Json(one(&state, &topic_name, &name).await?))
}

/// Delete a group with its positions, leases, retries, dead letters and history.
#[utoipa::path(delete, operation_id = "group_delete", path = "/v1/topics/{topic}/groups/{group}", tag = "groups",
    params(("topic" = String, Path, description = "Topic name"),
           ("group" = String, Path, description = "Group name")),
    responses((status = 204, description = "Deleted")))]
pub async fn delete<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, group)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    state.handles.forget_group(&topic, &group);
    state
        .client
        .topic(&topic)
        .await?
        .delete_group(&group)
        .await?;
    state.handles.forget_group(&topic, &group);
    state
        .readers
        .lock()
        .await
        .retain(|(t, g, _), _| !(t == &topic && g == &group));
    Ok(StatusCode::NO_CONTENT)
}
