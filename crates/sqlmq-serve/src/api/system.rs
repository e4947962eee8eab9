//! Probes, `/metrics` and the worker processes.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sqlmq::Backend;
use utoipa::ToSchema;

use crate::body::rfc3339;
use crate::error::ApiResult;
use crate::extract::Json;
use crate::gauges::render_gauges;
use crate::state::AppState;

/// A probe's answer.
#[derive(Serialize, ToSchema)]
pub struct HealthOut {
    /// `ok` or `ready`.
    pub status: String,
    /// Readiness: the schema version found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i64>,
    /// Readiness: the database server's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Readiness: whether waiting long polls wake on the database's commits (`live`), or why
    /// not (`off: binlog_format is MIXED; …`); they poll meanwhile, so this never makes the
    /// server unready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifications: Option<String>,
}

/// The process is up (it does not look at the database).
#[utoipa::path(get, operation_id = "healthz", path = "/healthz", tag = "system",
    responses((status = 200, description = "Up", body = HealthOut)))]
pub async fn healthz() -> Json<HealthOut> {
    Json(HealthOut {
        status: "ok".into(),
        schema_version: None,
        server: None,
        notifications: None,
    })
}

/// The database answers and its schema is the one this build needs (503 otherwise, with the
/// cause: unreachable, at its connection limit, out of space, or the schema).
#[utoipa::path(get, operation_id = "readyz", path = "/readyz", tag = "system",
    responses((status = 200, description = "Ready", body = HealthOut)))]
pub async fn readyz<B: Backend>(State(state): State<AppState<B>>) -> ApiResult<Json<HealthOut>> {
    // One cheap query that also checks the schema version.
    let outage = state.client.outage();
    let started = std::time::Instant::now();
    if let Err(e) = state.client.queue_configs().await {
        outage.failed_since(&e, started);
        return Err(e.into());
    }
    outage.succeeded();
    Ok(Json(HealthOut {
        status: "ready".into(),
        schema_version: Some(state.client.schema_version()),
        server: Some(state.client.server().version.clone()),
        notifications: Some(state.client.notifications().to_string()),
    }))
}

/// Prometheus text format: the library's counters and histograms, then the database gauges
/// of the last background refresh.
#[utoipa::path(get, operation_id = "metrics", path = "/metrics", tag = "system",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
pub async fn metrics<B: Backend>(State(state): State<AppState<B>>) -> Response {
    let mut text = state
        .prometheus
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&render_gauges(&state.snapshot()));
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// A registered worker process.
#[derive(Serialize, ToSchema)]
pub struct ProcessOut {
    /// `host:pid:random`.
    pub id: String,
    /// What kind of process.
    pub kind: String,
    /// Host name.
    pub host: String,
    /// Process id on its host.
    pub pid: i32,
    /// Ids of the queues it consumes.
    pub queue_ids: Vec<i32>,
    /// When it registered (RFC 3339).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339).
    pub heartbeat_at: String,
    /// Milliseconds since its last heartbeat.
    pub heartbeat_age_ms: u64,
}

/// Worker processes.
#[derive(Serialize, ToSchema)]
pub struct ProcessesResponse {
    /// Every registered process.
    pub processes: Vec<ProcessOut>,
}

pub(crate) fn process_out(p: sqlmq::admin::ProcessInfo) -> ProcessOut {
    ProcessOut {
        id: p.id,
        kind: p.kind,
        host: p.host,
        pid: p.pid,
        queue_ids: p.queue_ids,
        started_at: rfc3339(p.started_at),
        heartbeat_at: rfc3339(p.heartbeat_at),
        heartbeat_age_ms: p.silent_for.as_millis() as u64,
    }
}

/// Worker processes: host, pid, queues, heartbeat age.
#[utoipa::path(get, operation_id = "processes_list", path = "/v1/processes", tag = "system",
    responses((status = 200, description = "Registered processes", body = ProcessesResponse)))]
pub async fn processes<B: Backend>(
    State(state): State<AppState<B>>,
) -> ApiResult<Json<ProcessesResponse>> {
    let list = state.client.processes().await?;
    Ok(Json(ProcessesResponse {
        processes: list.into_iter().map(process_out).collect(),
    }))
}
