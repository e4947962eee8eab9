//! Durable runs over HTTP: a received message's steps, sleeps and event waits by name
//! (`/v1/queues/{queue}/runs/{receipt}/…`, the library's `Run`), a run's journal, and events:
//! emit one, list those runs wait for.
//!
//! A worker in another language drives its run as the library's handlers do: before each step
//! it asks for the step's recorded result (a completed step is not run again), after it records
//! it; a sleep or an event wait answers `suspended` when the run must stop until then — the
//! message is back in its queue, and the worker neither acks nor nacks it.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use sqlmq::flow::{Resumed, RunJournal};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::state::AppState;

/// One row of a run's journal.
#[derive(Serialize, ToSchema)]
pub struct RunStepOut {
    /// Its place in the run (0 for the first call).
    pub seq: u32,
    /// The step's name, the event's name, or the sleep's.
    pub name: String,
    /// `step`, `sleep` or `event`.
    pub kind: String,
    /// `waiting`, `done` or `timed_out`.
    pub state: String,
    /// When it was recorded (RFC 3339).
    pub recorded_at: String,
    /// A sleep's end or an event wait's deadline (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_at: Option<String>,
    /// Size of its result or event payload (JSON), in bytes.
    pub result_bytes: u64,
}

/// A durable run's journal.
#[derive(Serialize, ToSchema)]
pub struct JournalOut {
    /// Its steps, sleeps and event waits, in order (none for a message that made no durable
    /// call, or whose run ended with an ack).
    pub steps: Vec<RunStepOut>,
    /// The events it is suspended waiting for.
    pub waiting_for: Vec<String>,
}

impl From<RunJournal> for JournalOut {
    fn from(j: RunJournal) -> JournalOut {
        JournalOut {
            steps: j
                .steps
                .into_iter()
                .map(|s| RunStepOut {
                    seq: s.seq,
                    name: s.name,
                    kind: s.kind.to_string(),
                    state: s.state.to_string(),
                    recorded_at: humantime::format_rfc3339_millis(s.recorded_at).to_string(),
                    wake_at: s
                        .wake_at
                        .map(|t| humantime::format_rfc3339_millis(t).to_string()),
                    result_bytes: s.result_bytes,
                })
                .collect(),
            waiting_for: j.waiting_for,
        }
    }
}

/// A step's recorded result.
#[derive(Serialize, ToSchema)]
pub struct StepOut {
    /// The step's name.
    pub name: String,
    /// Its result, as recorded (any JSON).
    #[schema(value_type = Value)]
    pub result: serde_json::Value,
}

/// A step's result to record.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StepRequest {
    /// The result (any JSON, at most 256 KiB).
    #[schema(value_type = Value)]
    pub result: serde_json::Value,
}

/// A durable sleep.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SleepRequest {
    /// The sleep's name, unique among the run's sleeps.
    pub name: String,
    /// How long, from the first call (milliseconds).
    pub duration_ms: u64,
}

/// A durable event wait.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRequest {
    /// The event's name.
    pub event: String,
    /// The longest wait, from the first call (milliseconds).
    pub timeout_ms: u64,
}

/// Where a sleep or an event wait stands.
#[derive(Serialize, ToSchema)]
pub struct ResumedOut {
    /// `awake` (the sleep is over), `event` (it came: `payload`), `timed_out`, or `suspended`
    /// (stop: the message is back in its queue until then; do not ack or nack it).
    pub state: String,
    /// The event's payload, for `event`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub payload: Option<serde_json::Value>,
}

impl From<Resumed> for ResumedOut {
    fn from(r: Resumed) -> ResumedOut {
        let (state, payload) = match r {
            Resumed::Awake => ("awake", None),
            Resumed::Event { payload } => ("event", Some(json_of(&payload))),
            Resumed::TimedOut => ("timed_out", None),
            _ => ("suspended", None),
        };
        ResumedOut {
            state: state.to_owned(),
            payload,
        }
    }
}

/// An event to emit.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmitRequest {
    /// The payload (any JSON, at most 256 KiB; `null` when absent).
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    pub payload: serde_json::Value,
}

/// What an emit did.
#[derive(Serialize, ToSchema)]
pub struct EmitResponse {
    /// Whether this emit is the one kept (false: the event was emitted already; the first emit
    /// wins).
    pub kept: bool,
    /// Suspended runs this emit woke.
    pub woken: u64,
}

/// An event runs wait for.
#[derive(Serialize, ToSchema)]
pub struct AwaitedEventOut {
    /// The event's name.
    pub name: String,
    /// How many runs wait for it.
    pub runs: u64,
    /// When the longest-waiting began to wait (RFC 3339).
    pub since: String,
}

/// The events runs wait for.
#[derive(Serialize, ToSchema)]
pub struct AwaitedEventsResponse {
    /// The longest awaited first (at most 1000).
    pub events: Vec<AwaitedEventOut>,
}

/// Stored JSON bytes as a JSON value (a string of them should they hold none).
fn json_of(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn run_of<B: Backend>(queue: &sqlmq::Queue<B>, receipt: &str) -> ApiResult<sqlmq::queue::Run<B>> {
    let receipt: sqlmq::queue::Receipt = receipt.parse()?;
    Ok(queue.run(receipt))
}

fn duration(field: &str, ms: u64) -> ApiResult<std::time::Duration> {
    // Ten years, the longest delay: beyond it the library refuses with the same words.
    const MAX_MS: u64 = 10 * 366 * 24 * 3600 * 1000;
    if ms > MAX_MS {
        return Err(ApiError::invalid(format!(
            "{field} must be at most {MAX_MS} (10 years), got {ms}"
        )));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// A message's durable run: its steps, sleeps and event waits, and what it waits for.
#[utoipa::path(get, operation_id = "message_journal", path = "/v1/messages/{id}/journal", tag = "runs",
    params(("id" = String, Path, description = "Message id")),
    responses((status = 200, description = "The run's journal", body = JournalOut)))]
pub async fn journal<B: Backend>(
    State(state): State<AppState<B>>,
    Path(id): Path<String>,
) -> ApiResult<Json<JournalOut>> {
    let id: sqlmq::MessageId = id.parse()?;
    Ok(Json(state.client.journal(id).await?.into()))
}

/// A step's recorded result; 404 when the step has not completed (run it, then record it).
#[utoipa::path(get, operation_id = "run_step_get", path = "/v1/queues/{queue}/runs/{receipt}/steps/{name}", tag = "runs",
    params(("queue" = String, Path, description = "Queue name"),
           ("receipt" = String, Path, description = "The delivery's receipt (ID:TOKEN)"),
           ("name" = String, Path, description = "Step name")),
    responses((status = 200, description = "The recorded result", body = StepOut)))]
pub async fn step<B: Backend>(
    State(state): State<AppState<B>>,
    Path((queue, receipt, name)): Path<(String, String, String)>,
) -> ApiResult<Json<StepOut>> {
    let run = run_of(&state.queue(&queue).await?, &receipt)?;
    match run.step(&name).await? {
        Some(result) => Ok(Json(StepOut {
            result: json_of(&result),
            name,
        })),
        None => Err(ApiError::not_found(format!(
            "step {name:?} has not completed in this run"
        ))),
    }
}

/// Record a completed step's result while the receipt's lease holds (409 `lease_lost`
/// otherwise). Answers the result that stands: this one, or the one recorded before.
#[utoipa::path(put, operation_id = "run_step_record", path = "/v1/queues/{queue}/runs/{receipt}/steps/{name}", tag = "runs",
    params(("queue" = String, Path, description = "Queue name"),
           ("receipt" = String, Path, description = "The delivery's receipt (ID:TOKEN)"),
           ("name" = String, Path, description = "Step name")),
    request_body = StepRequest,
    responses((status = 200, description = "The result that stands", body = StepOut)))]
pub async fn record_step<B: Backend>(
    State(state): State<AppState<B>>,
    Path((queue, receipt, name)): Path<(String, String, String)>,
    Json(request): Json<StepRequest>,
) -> ApiResult<Json<StepOut>> {
    let run = run_of(&state.queue(&queue).await?, &receipt)?;
    let bytes =
        serde_json::to_vec(&request.result).map_err(|e| ApiError::invalid(e.to_string()))?;
    let standing = run.record_step(&name, &bytes).await?;
    Ok(Json(StepOut {
        result: json_of(&standing),
        name,
    }))
}

/// Sleep durably: `suspended` the first time (the message is back in its queue until then,
/// its attempt not spent), `awake` once the time has passed.
#[utoipa::path(post, operation_id = "run_sleep", path = "/v1/queues/{queue}/runs/{receipt}/sleep", tag = "runs",
    params(("queue" = String, Path, description = "Queue name"),
           ("receipt" = String, Path, description = "The delivery's receipt (ID:TOKEN)")),
    request_body = SleepRequest,
    responses((status = 200, description = "Where the sleep stands", body = ResumedOut)))]
pub async fn sleep<B: Backend>(
    State(state): State<AppState<B>>,
    Path((queue, receipt)): Path<(String, String)>,
    Json(request): Json<SleepRequest>,
) -> ApiResult<Json<ResumedOut>> {
    let run = run_of(&state.queue(&queue).await?, &receipt)?;
    let d = duration("duration_ms", request.duration_ms)?;
    Ok(Json(run.sleep(&request.name, d).await?.into()))
}

/// Wait durably for an event: `event` with its payload when it came, `timed_out` when the
/// deadline passed first, `suspended` until either (an emit puts the message back in line at
/// once).
#[utoipa::path(post, operation_id = "run_wait", path = "/v1/queues/{queue}/runs/{receipt}/wait", tag = "runs",
    params(("queue" = String, Path, description = "Queue name"),
           ("receipt" = String, Path, description = "The delivery's receipt (ID:TOKEN)")),
    request_body = WaitRequest,
    responses((status = 200, description = "Where the wait stands", body = ResumedOut)))]
pub async fn wait<B: Backend>(
    State(state): State<AppState<B>>,
    Path((queue, receipt)): Path<(String, String)>,
    Json(request): Json<WaitRequest>,
) -> ApiResult<Json<ResumedOut>> {
    let run = run_of(&state.queue(&queue).await?, &receipt)?;
    let timeout = duration("timeout_ms", request.timeout_ms)?;
    Ok(Json(
        run.wait_for_event(&request.event, timeout).await?.into(),
    ))
}

/// Ack the run's message and forget its journal, in one transaction (409 `lease_lost` when the
/// receipt no longer holds the lease).
#[utoipa::path(post, operation_id = "run_ack", path = "/v1/queues/{queue}/runs/{receipt}/ack", tag = "runs",
    params(("queue" = String, Path, description = "Queue name"),
           ("receipt" = String, Path, description = "The delivery's receipt (ID:TOKEN)")),
    responses((status = 204, description = "Acked")))]
pub async fn ack<B: Backend>(
    State(state): State<AppState<B>>,
    Path((queue, receipt)): Path<(String, String)>,
) -> ApiResult<axum::http::StatusCode> {
    let run = run_of(&state.queue(&queue).await?, &receipt)?;
    run.ack().await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Emit an event: kept for the flow retention (7 days by default; the first emit of a name
/// wins), and every run waiting for it woken. Emitting a name nobody waits for is not an
/// error.
#[utoipa::path(post, operation_id = "event_emit", path = "/v1/events/{name}", tag = "runs",
    params(("name" = String, Path, description = "Event name")),
    request_body = EmitRequest,
    responses((status = 200, description = "What the emit did", body = EmitResponse)))]
pub async fn emit<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<EmitRequest>,
) -> ApiResult<Json<EmitResponse>> {
    let emitted = state.client.emit_event(&name, &request.payload).await?;
    Ok(Json(EmitResponse {
        kept: emitted.kept,
        woken: emitted.woken,
    }))
}

/// The events suspended runs wait for, the longest awaited first.
#[utoipa::path(get, operation_id = "events_awaited", path = "/v1/events", tag = "runs",
    responses((status = 200, description = "The awaited events", body = AwaitedEventsResponse)))]
pub async fn awaited<B: Backend>(
    State(state): State<AppState<B>>,
) -> ApiResult<Json<AwaitedEventsResponse>> {
    let events = state.client.awaited_events(1000).await?;
    Ok(Json(AwaitedEventsResponse {
        events: events
            .into_iter()
            .map(|e| AwaitedEventOut {
                name: e.name,
                runs: e.runs,
                since: humantime::format_rfc3339_millis(e.since).to_string(),
            })
            .collect(),
    }))
}
