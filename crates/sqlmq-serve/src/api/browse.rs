//! A queue's messages looked at: by state a page at a time, by key, one by id in any state.
//! Reading takes no lease and no lock.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use sqlmq::inspect::MessageState;
use utoipa::{IntoParams, ToSchema};

use super::model::AttemptErrorOut;
use crate::body::{encode, rfc3339};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Json, Query};
use crate::state::AppState;

/// A state a listing can ask for (dead letters have `GET /v1/queues/{queue}/dead`).
#[derive(Deserialize, Serialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum ListedState {
    /// Waiting to be claimed now.
    Ready,
    /// Waiting for a delay or a retry's backoff.
    Scheduled,
    /// Waiting behind an earlier message of its ordering key.
    Blocked,
    /// Held by a consumer.
    InFlight,
    /// Waiting for its dependencies to be acked, or for its batch to finish (a callback).
    Waiting,
}

impl From<ListedState> for MessageState {
    fn from(s: ListedState) -> MessageState {
        match s {
            ListedState::Ready => MessageState::Ready,
            ListedState::Scheduled => MessageState::Scheduled,
            ListedState::Blocked => MessageState::Blocked,
            ListedState::InFlight => MessageState::InFlight,
            ListedState::Waiting => MessageState::Waiting,
        }
    }
}

/// Which messages: a page of one state, or those of a key.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// The state to list (default `ready`), in the order it hands messages out.
    pub state: Option<ListedState>,
    /// The `next` of the previous page.
    #[param(max_length = 400)]
    pub after: Option<String>,
    /// Instead of a state: the messages of this ordering key (its head, then its line) and the
    /// one this idempotency key names, in any state but dead.
    #[param(min_length = 1, max_length = 128)]
    pub key: Option<String>,
    /// Most messages (default 100, at most 10 000).
    #[param(minimum = 1, maximum = 10000, default = 100)]
    pub limit: Option<usize>,
}

/// A queue's message as it is now.
#[derive(Serialize, ToSchema)]
pub struct QueuedMessageOut {
    /// The message id.
    pub id: String,
    /// `ready`, `scheduled`, `blocked`, `waiting`, `in_flight`, `cancelling` or `dead`.
    pub state: String,
    /// Lower is claimed first.
    pub priority: i16,
    /// Attempts made (a claimed message counts its current one).
    pub attempts: u32,
    /// When it was sent (RFC 3339).
    pub enqueued_at: String,
    /// Scheduled or blocked: when its delay ends (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// In flight: when its lease ends (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<String>,
    /// In flight: when it was claimed (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<String>,
    /// In flight: the consumer holding it, when it said who it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Dead: when it died (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub died_at: Option<String>,
    /// Its ordering key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    /// Its concurrency key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// Its deadline (RFC 3339), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// How long each attempt may run (milliseconds), if limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<u64>,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// The errors of its failed attempts, oldest first.
    pub errors: Vec<AttemptErrorOut>,
    /// The body, when it is UTF-8 text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// In flight: the progress its handler reported last (any JSON), when it did (only a
    /// message looked up by id says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Value>,
}

impl From<sqlmq::inspect::QueuedMessage> for QueuedMessageOut {
    fn from(m: sqlmq::inspect::QueuedMessage) -> QueuedMessageOut {
        let (body, body_base64) = encode(m.body);
        QueuedMessageOut {
            id: m.id.to_string(),
            state: m.state.to_string(),
            priority: m.priority,
            attempts: m.attempts,
            enqueued_at: rfc3339(m.enqueued_at),
            run_at: m.run_at.map(rfc3339),
            lease_until: m.lease_until.map(rfc3339),
            claimed_at: m.claimed_at.map(rfc3339),
            owner: m.owner,
            died_at: m.died_at.map(rfc3339),
            ordering_key: m.ordering_key,
            concurrency_key: m.concurrency_key,
            deadline: m.deadline.map(rfc3339),
            run_timeout_ms: m.run_timeout.map(|t| t.as_millis() as u64),
            headers: m.headers,
            errors: m.errors.into_iter().map(AttemptErrorOut::from).collect(),
            body,
            body_base64,
            progress: None,
        }
    }
}

/// A page of messages.
#[derive(Serialize, ToSchema)]
pub struct MessagesPage {
    /// The messages.
    pub messages: Vec<QueuedMessageOut>,
    /// Give it as `after` for the next page; absent on the last page (and for a key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// List a queue's messages in one state, a page at a time, or those of a key. Takes no lease:
/// what it shows may have moved on by the time it is read.
#[utoipa::path(get, operation_id = "queue_messages_list", path = "/v1/queues/{queue}/messages", tag = "messages",
    params(("queue" = String, Path, description = "Queue name"), MessagesQuery),
    responses((status = 200, description = "Messages in the order their state hands them out", body = MessagesPage)))]
pub async fn list<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Query(query): Query<MessagesQuery>,
) -> ApiResult<Json<MessagesPage>> {
    let limit = query.limit.unwrap_or(100);
    let queue = state.queue(&name).await?;
    let page = match (query.key, query.state, query.after) {
        (Some(key), None, None) => MessagesPage {
            messages: queue
                .messages_by_key(&key, limit)
                .await?
                .into_iter()
                .map(Into::into)
                .collect(),
            next: None,
        },
        (Some(_), _, _) => {
            return Err(ApiError::invalid(
                "key lists every state at once: give key without state and after",
            ));
        }
        (None, listed, after) => {
            let listed = listed.unwrap_or(ListedState::Ready);
            let page = queue.browse(listed.into(), after.as_deref(), limit).await?;
            MessagesPage {
                messages: page.messages.into_iter().map(Into::into).collect(),
                next: page.next,
            }
        }
    };
    Ok(Json(page))
}

/// One message of the queue, in whatever state it is (dead letters included).
#[utoipa::path(get, operation_id = "queue_message_get", path = "/v1/queues/{queue}/messages/{id}", tag = "messages",
    params(("queue" = String, Path, description = "Queue name"),
           ("id" = String, Path, description = "Message id")),
    responses((status = 200, description = "The message", body = QueuedMessageOut)))]
pub async fn get<B: Backend>(
    State(state): State<AppState<B>>,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<Json<QueuedMessageOut>> {
    let id: sqlmq::MessageId = id.parse()?;
    let queue = state.queue(&name).await?;
    match queue.message(id).await? {
        Some(m) => {
            let mut out = QueuedMessageOut::from(m);
            out.progress = queue.progress(id).await?.map(|p| p.value);
            Ok(Json(out))
        }
        None => Err(ApiError::not_found(format!(
            "queue {name:?} has no message {id} (never sent here, or acked, cancelled or purged)"
        ))),
    }
}
