//! Batches and workflows: create one (members to any queues, callbacks, steps with their
//! dependencies), follow its progress, add members to an open one, seal it.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use utoipa::ToSchema;

use super::messages::{MAX_SEND_BATCH, OutgoingMessage, SendResponse, message_request};
use crate::body::rfc3339;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Query};
use crate::state::AppState;

message_request! {
    /// A member of a batch: a message to `queue`; in a workflow, a named `step` delivered only
    /// after the steps named in `after` were acked.
    pub struct BatchMember {
        /// The queue it is sent to (it must exist).
        pub queue: String,
        /// Its step name in a workflow (1 to 128 bytes, unique in the batch), which `after`
        /// of other members names.
        pub step: Option<String>,
        /// Deliver only after these steps of the batch were acked (the member must have a
        /// `step` name itself); a cycle is refused.
        #[schema(max_items = 1000)]
        pub after: Option<Vec<String>>,
    }
}

message_request! {
    /// A callback of a batch: a message sent to `queue`, exactly once, when the batch finishes
    /// (it carries the header `sqlmq-batch` with the batch's id). Takes no `depends_on`.
    pub struct BatchCallback {
        /// The queue it is sent to (it must exist).
        pub queue: String,
    }
}

/// `POST /v1/batches`: members sent in one transaction (all or none), with optional callbacks.
#[derive(serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBatchRequest {
    /// 0 to 10 000 members, in order (a workflow's steps may come in any order).
    #[schema(max_items = 10000)]
    pub members: Vec<BatchMember>,
    /// Sent when every member was acked.
    pub on_success: Option<BatchCallback>,
    /// Sent when every member has finished and at least one was not acked (it became a dead
    /// letter or was cancelled).
    pub on_failure: Option<BatchCallback>,
    /// Sent when every member has finished, acked or not.
    pub on_complete: Option<BatchCallback>,
    /// Keep the batch open for more members (`POST /v1/batches/{id}/messages`) until it is
    /// sealed (`POST /v1/batches/{id}/seal`); it cannot finish before. Default false.
    #[serde(default)]
    pub open: bool,
}

/// A created batch.
#[derive(Serialize, ToSchema)]
pub struct BatchCreatedOut {
    /// The batch id (a UUID).
    pub id: String,
    /// The members' message ids, in the order given.
    pub members: Vec<String>,
    /// The members' message ids by step name.
    pub steps: BTreeMap<String, String>,
}

/// `POST /v1/batches/{id}/messages`: more members for an open batch, sent to one queue in one
/// transaction.
#[derive(serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddToBatchRequest {
    /// The queue they are sent to.
    pub queue: String,
    /// 1 to 10 000 messages.
    pub messages: Vec<OutgoingMessage>,
}

/// Where a batch is in its life.
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum BatchStateOut {
    /// Members may still be added.
    Open,
    /// No more members; finishes when none is pending.
    Sealed,
    /// Every member finished; its callbacks were sent (or cancelled).
    Finished,
}

impl From<sqlmq::flow::BatchState> for BatchStateOut {
    fn from(s: sqlmq::flow::BatchState) -> BatchStateOut {
        match s {
            sqlmq::flow::BatchState::Open => BatchStateOut::Open,
            sqlmq::flow::BatchState::Sealed => BatchStateOut::Sealed,
            sqlmq::flow::BatchState::Finished => BatchStateOut::Finished,
        }
    }
}

/// What a message is to its batch.
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum RoleOut {
    /// A member, counted in the batch's progress.
    Member,
    /// The callback sent when every member was acked.
    OnSuccess,
    /// The callback sent when every member has finished.
    OnComplete,
    /// The callback sent when every member has finished and one at least was not acked.
    OnFailure,
}

impl From<sqlmq::flow::Role> for RoleOut {
    fn from(r: sqlmq::flow::Role) -> RoleOut {
        match r {
            sqlmq::flow::Role::Member => RoleOut::Member,
            sqlmq::flow::Role::OnSuccess => RoleOut::OnSuccess,
            sqlmq::flow::Role::OnComplete => RoleOut::OnComplete,
            sqlmq::flow::Role::OnFailure => RoleOut::OnFailure,
        }
    }
}

/// Where one message of a batch is.
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum StepStateOut {
    /// Waiting for dependencies not acked yet (a callback: for the batch to finish).
    Waiting,
    /// Held behind a dependency that became a dead letter: it runs once that one is redriven
    /// and acked.
    Held,
    /// Deliverable or delivered: ready, scheduled, in flight, or in its key's line.
    Pending,
    /// Acked.
    Succeeded,
    /// A dead letter.
    Dead,
    /// Cancelled (by hand, with a cancelled dependency, or a callback whose condition did
    /// not hold).
    Cancelled,
}

impl From<sqlmq::flow::StepState> for StepStateOut {
    fn from(s: sqlmq::flow::StepState) -> StepStateOut {
        match s {
            sqlmq::flow::StepState::Waiting => StepStateOut::Waiting,
            sqlmq::flow::StepState::Held => StepStateOut::Held,
            sqlmq::flow::StepState::Pending => StepStateOut::Pending,
            sqlmq::flow::StepState::Succeeded => StepStateOut::Succeeded,
            sqlmq::flow::StepState::Dead => StepStateOut::Dead,
            sqlmq::flow::StepState::Cancelled => StepStateOut::Cancelled,
        }
    }
}

impl StepStateOut {
    /// Its name as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStateOut::Waiting => "waiting",
            StepStateOut::Held => "held",
            StepStateOut::Pending => "pending",
            StepStateOut::Succeeded => "succeeded",
            StepStateOut::Dead => "dead",
            StepStateOut::Cancelled => "cancelled",
        }
    }
}

/// One message of a batch: a member (a workflow's step) or a callback.
#[derive(Serialize, ToSchema)]
pub struct BatchStepOut {
    /// The message id.
    pub id: String,
    /// Its queue.
    pub queue: String,
    /// Its step name, for a workflow's step.
    pub step: Option<String>,
    /// Member or callback.
    pub role: RoleOut,
    /// Where it is.
    pub state: StepStateOut,
    /// The ids of the messages it waits for.
    pub depends_on: Vec<String>,
    /// Whether its ack left a result (`GET /v1/messages/{id}/result`).
    pub has_result: bool,
}

/// A batch's progress: counts of its members, and each member and callback.
#[derive(Serialize, ToSchema)]
pub struct BatchOut {
    /// The batch id.
    pub id: String,
    /// `open`, `sealed` or `finished`.
    pub state: BatchStateOut,
    /// Members added.
    pub members: u64,
    /// Members not finished yet.
    pub pending: u64,
    /// Members acked.
    pub succeeded: u64,
    /// Members that became dead letters.
    pub dead: u64,
    /// Members cancelled.
    pub cancelled: u64,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When its last member finished (RFC 3339).
    pub finished_at: Option<String>,
    /// Its members and callbacks, in the order they were sent.
    pub steps: Vec<BatchStepOut>,
}

impl From<sqlmq::flow::BatchStatus> for BatchOut {
    fn from(b: sqlmq::flow::BatchStatus) -> BatchOut {
        BatchOut {
            id: b.id.to_string(),
            state: b.state.into(),
            members: b.members,
            pending: b.pending,
            succeeded: b.succeeded,
            dead: b.dead,
            cancelled: b.cancelled,
            created_at: rfc3339(b.created_at),
            finished_at: b.finished_at.map(rfc3339),
            steps: b
                .steps
                .into_iter()
                .map(|s| BatchStepOut {
                    id: s.id.to_string(),
                    queue: s.queue,
                    step: s.step,
                    role: s.role.into(),
                    state: s.state.into(),
                    depends_on: s.depends_on.iter().map(ToString::to_string).collect(),
                    has_result: s.has_result,
                })
                .collect(),
        }
    }
}

/// The library's batch for a request.
fn batch_of(request: CreateBatchRequest) -> ApiResult<sqlmq::flow::Batch> {
    if request.members.len() > MAX_SEND_BATCH {
        return Err(ApiError::invalid(format!(
            "members must hold at most {MAX_SEND_BATCH} entries, got {}",
            request.members.len()
        )));
    }
    let mut batch = sqlmq::flow::Batch::new();
    for (i, mut member) in request.members.into_iter().enumerate() {
        let message = member.take_message()?;
        let after = member.after.unwrap_or_default();
        batch = match member.step {
            Some(step) => {
                let after: Vec<&str> = after.iter().map(String::as_str).collect();
                batch.step(step, member.queue, message, &after)
            }
            None if !after.is_empty() => {
                return Err(ApiError::invalid(format!(
                    "member {i} has after but no step name: only a named step waits for steps"
                )));
            }
            None => batch.add(member.queue, message),
        };
    }
    type Attach = fn(sqlmq::flow::Batch, String, sqlmq::Message) -> sqlmq::flow::Batch;
    let callbacks: [(&str, Option<BatchCallback>, Attach); 3] = [
        ("on_success", request.on_success, |b, q, m| {
            b.on_success(q, m)
        }),
        ("on_failure", request.on_failure, |b, q, m| {
            b.on_failure(q, m)
        }),
        ("on_complete", request.on_complete, |b, q, m| {
            b.on_complete(q, m)
        }),
    ];
    for (role, callback, attach) in callbacks {
        let Some(mut callback) = callback else {
            continue;
        };
        if callback.depends_on.is_some() {
            return Err(ApiError::invalid(format!(
                "{role} takes no depends_on: a callback waits for its batch"
            )));
        }
        let message = callback.take_message()?;
        batch = attach(batch, callback.queue, message);
    }
    Ok(if request.open { batch.open() } else { batch })
}

/// Create a batch: its members (to any queues) and callbacks in one transaction. A workflow is
/// a batch whose members name their `step` and the steps they come `after`.
#[utoipa::path(post, operation_id = "batch_create", path = "/v1/batches", tag = "batches",
    request_body = CreateBatchRequest,
    responses((status = 201, description = "The batch and its members' ids", body = BatchCreatedOut,
        links(
            ("BatchGet" = (operation_id = "batch_get",
                parameters(("id" = "$response.body#/id")),
                description = "The batch's progress")),
            ("BatchAddMessages" = (operation_id = "batch_add_messages",
                parameters(("id" = "$response.body#/id")),
                description = "Add members while it is open")),
            ("BatchSeal" = (operation_id = "batch_seal",
                parameters(("id" = "$response.body#/id")),
                description = "Seal it: no more members")),
        ))))]
pub async fn create<B: Backend>(
    State(state): State<AppState<B>>,
    Json(request): Json<CreateBatchRequest>,
) -> ApiResult<(StatusCode, Json<BatchCreatedOut>)> {
    let mut per_queue: BTreeMap<String, u64> = BTreeMap::new();
    for m in &request.members {
        *per_queue.entry(m.queue.clone()).or_default() += 1;
    }
    let created = state.client.create_batch(batch_of(request)?).await?;
    for (queue, n) in per_queue {
        state.count(&queue, n, 0);
    }
    Ok((
        StatusCode::CREATED,
        Json(BatchCreatedOut {
            id: created.id.to_string(),
            members: created.members.iter().map(ToString::to_string).collect(),
            steps: created
                .steps
                .into_iter()
                .map(|(step, id)| (step, id.to_string()))
                .collect(),
        }),
    ))
}

/// `GET /v1/batches`: which batches, and how many.
#[derive(Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BatchListQuery {
    /// `open`, `sealed` or `finished`; without it, the unfinished ones (open, then sealed)
    /// followed by the ones finished most recently.
    pub state: Option<String>,
    /// Most batches to return (default 100, at most 1 000).
    #[param(minimum = 1, maximum = 1000, default = 100)]
    pub limit: Option<usize>,
}

impl BatchListQuery {
    /// The state asked for, and the limit (checked by `Client::batches`).
    pub(crate) fn checked(&self) -> ApiResult<(Option<sqlmq::flow::BatchState>, usize)> {
        let state = match self.state.as_deref() {
            None | Some("") => None,
            Some("open") => Some(sqlmq::flow::BatchState::Open),
            Some("sealed") => Some(sqlmq::flow::BatchState::Sealed),
            Some("finished") => Some(sqlmq::flow::BatchState::Finished),
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "state must be open, sealed or finished, got {other:?}"
                )));
            }
        };
        Ok((state, self.limit.unwrap_or(100)))
    }
}

/// A list of batches, each with its counts (`steps` empty: `GET /v1/batches/{id}` has them).
#[derive(Serialize, ToSchema)]
pub struct BatchListResponse {
    /// The batches, the newest first (unfinished ones before finished ones).
    pub batches: Vec<BatchOut>,
}

/// Batches and workflows with their counts, the newest first: the unfinished ones, then those
/// finished most recently (kept 7 days), or those of one `state`.
#[utoipa::path(get, operation_id = "batch_list", path = "/v1/batches", tag = "batches",
    params(BatchListQuery),
    responses((status = 200, description = "Batches, each without its steps", body = BatchListResponse)))]
pub async fn list<B: Backend>(
    State(state): State<AppState<B>>,
    Query(query): Query<BatchListQuery>,
) -> ApiResult<Json<BatchListResponse>> {
    Ok(Json(listed(&state, &query).await?))
}

/// The batches `query` asks for.
pub(crate) async fn listed<B: Backend>(
    state: &AppState<B>,
    query: &BatchListQuery,
) -> ApiResult<BatchListResponse> {
    let (which, limit) = query.checked()?;
    let batches = state.client.batches(which, limit).await?;
    Ok(BatchListResponse {
        batches: batches.into_iter().map(BatchOut::from).collect(),
    })
}

/// A batch's progress, by id.
pub(crate) async fn status<B: Backend>(state: &AppState<B>, id: &str) -> ApiResult<BatchOut> {
    let id: sqlmq::flow::BatchId = id.parse()?;
    Ok(state.client.batch(id).await?.into())
}

/// A batch's progress: state, counts, and each member and callback with its state and
/// dependencies.
#[utoipa::path(get, operation_id = "batch_get", path = "/v1/batches/{id}", tag = "batches",
    params(("id" = String, Path, description = "Batch id")),
    responses((status = 200, description = "The batch", body = BatchOut)))]
pub async fn get<B: Backend>(
    State(state): State<AppState<B>>,
    Path(id): Path<String>,
) -> ApiResult<Json<BatchOut>> {
    Ok(Json(status(&state, &id).await?))
}

/// Add members to an open batch (one queue, one transaction); 409 `batch_sealed` once it is
/// sealed.
#[utoipa::path(post, operation_id = "batch_add_messages", path = "/v1/batches/{id}/messages", tag = "batches",
    params(("id" = String, Path, description = "Batch id")),
    request_body = AddToBatchRequest,
    responses((status = 200, description = "The messages' ids", body = SendResponse)))]
pub async fn add<B: Backend>(
    State(state): State<AppState<B>>,
    Path(id): Path<String>,
    Json(request): Json<AddToBatchRequest>,
) -> ApiResult<Json<SendResponse>> {
    let id: sqlmq::flow::BatchId = id.parse()?;
    let messages =
        super::messages::batch(request.messages, "messages", OutgoingMessage::into_message)?;
    let sent = state
        .client
        .add_to_batch(id, &request.queue, messages)
        .await?;
    let new = sent.iter().filter(|s| !s.duplicate).count() as u64;
    state.count(&request.queue, new, 0);
    Ok(Json(SendResponse::from(sent)))
}

/// Seal a batch: no more members; it finishes once none is pending. Sealing a sealed or
/// finished batch does nothing.
#[utoipa::path(post, operation_id = "batch_seal", path = "/v1/batches/{id}/seal", tag = "batches",
    params(("id" = String, Path, description = "Batch id")),
    responses((status = 204, description = "Sealed")))]
pub async fn seal<B: Backend>(
    State(state): State<AppState<B>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id: sqlmq::flow::BatchId = id.parse()?;
    state.client.seal_batch(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
