//! Tracing one record through every consumer group of its topic.

use axum::extract::{Path, State};
use serde::Serialize;
use sqlmq::Backend;
use utoipa::ToSchema;

use super::records::RecordOut;
use crate::error::ApiResult;
use crate::extract::Json;
use crate::state::AppState;

/// One settled delivery of a record in a group.
#[derive(Serialize, ToSchema)]
pub struct EventOut {
    /// The attempt.
    pub attempt: u32,
    /// The member (process owner id) that held it.
    pub member: Option<String>,
    /// When it was handed out (RFC 3339).
    pub delivered_at: String,
    /// When it was settled (RFC 3339).
    pub at: String,
    /// `acked`, `failed`, `released`, `snoozed` or `dead`.
    pub outcome: String,
    /// The error, for a failure.
    pub error: Option<String>,
}

/// A record's state in one group.
#[derive(Serialize, ToSchema)]
pub struct GroupTraceOut {
    /// The group.
    pub group: String,
    /// `cluster` or `broadcast`.
    pub mode: String,
    /// `not_delivered`, `in_flight`, `waiting_retry`, `acked`, `dead`, `consumed` or
    /// `broadcast`.
    pub state: String,
    /// In flight: the member holding it.
    pub member: Option<String>,
    /// When the state began (in flight: handed out; retry: due; acked, dead: when), RFC 3339.
    pub at: Option<String>,
    /// In flight: when the lease ends (RFC 3339).
    pub lease_until: Option<String>,
    /// Attempts made.
    pub attempts: u32,
    /// Settled deliveries, oldest first.
    pub events: Vec<EventOut>,
    /// Broadcast: members whose checkpoint is past the record.
    pub read_by: Vec<String>,
}

/// A record's trace.
#[derive(Serialize, ToSchema)]
pub struct TraceOut {
    /// The record id.
    pub id: String,
    /// Its partition.
    pub partition: u32,
    /// Its offset (null while it waits for one).
    pub offset: Option<i64>,
    /// The record, once it has an offset.
    pub record: Option<RecordOut>,
    /// Its state in every group of the topic.
    pub groups: Vec<GroupTraceOut>,
}

fn group_out(g: sqlmq::inspect::GroupTrace) -> GroupTraceOut {
    use sqlmq::inspect::TraceState as S;
    let (state, member, at, lease_until) = match g.state {
        S::NotDelivered => ("not_delivered", None, None, None),
        S::InFlight {
            member,
            since,
            lease_until,
        } => ("in_flight", member, Some(since), Some(lease_until)),
        S::WaitingRetry { at } => ("waiting_retry", None, Some(at), None),
        S::Acked { at } => ("acked", None, Some(at), None),
        S::Dead { at } => ("dead", None, Some(at), None),
        S::Consumed => ("consumed", None, None, None),
        S::Broadcast => ("broadcast", None, None, None),
        _ => ("unknown", None, None, None),
    };
    GroupTraceOut {
        group: g.group,
        mode: g.mode.to_string(),
        state: state.to_owned(),
        member,
        at,
        lease_until,
        attempts: g.attempts,
        events: g
            .events
            .into_iter()
            .map(|e| EventOut {
                attempt: e.attempt,
                member: e.member,
                delivered_at: e.delivered_at,
                at: e.at,
                outcome: e.outcome,
                error: e.error,
            })
            .collect(),
        read_by: g.read_by,
    }
}

/// The trace of record `id` in `topic` (404 `message_not_found`).
pub(crate) async fn trace_record<B: Backend>(
    state: &AppState<B>,
    topic: &str,
    id: &str,
) -> ApiResult<TraceOut> {
    let id: sqlmq::MessageId = id.parse()?;
    let topic = state.topic(topic).await?;
    let trace = topic
        .trace(id)
        .await?
        .ok_or(sqlmq::Error::MessageNotFound(id))?;
    Ok(TraceOut {
        id: trace.id.to_string(),
        partition: trace.partition,
        offset: trace.offset,
        record: trace.record.map(RecordOut::from),
        groups: trace.groups.into_iter().map(group_out).collect(),
    })
}

/// Trace a record across every group: state, attempts, deliveries and errors.
#[utoipa::path(get, operation_id = "record_trace", path = "/v1/topics/{topic}/records/{id}/trace", tag = "records",
    params(("topic" = String, Path, description = "Topic name"),
           ("id" = String, Path, description = "Record id")),
    responses((status = 200, description = "The record's trace", body = TraceOut)))]
pub async fn trace<B: Backend>(
    State(state): State<AppState<B>>,
    Path((topic, id)): Path<(String, String)>,
) -> ApiResult<Json<TraceOut>> {
    Ok(Json(trace_record(&state, &topic, &id).await?))
}
