//! A queue's messages: send (atomically), receive (long poll), ack, nack, extend.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use sqlmq::Backend;
use sqlmq::source::Source;
use utoipa::ToSchema;

use super::consume;
use super::model::{
    AckRequest, ExtendRequest, NackRequest, ReceiveRequest, ReceiveResponse, SettleResponse,
};
use super::queues::at_most_a_year;
use crate::body::decode;
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::state::AppState;

/// Most messages in one send request.
pub const MAX_SEND_BATCH: usize = 10_000;

/// Declares a request body that is a message to send — `body` (text) or `body_base64`
/// (bytes), and the options of [`OutgoingMessage`] — after fields of its own, with
/// `take_message` that builds the library's message from those fields. One list of a
/// message's fields for a send and for a batch's members and callbacks: a flattened struct
/// would not refuse unknown fields, nor describe itself as one plain object.
macro_rules! message_request {
    (
        $(#[$attr:meta])*
        pub struct $name:ident { $( $(#[$fattr:meta])* pub $field:ident : $ty:ty, )* }
    ) => {
        $(#[$attr])*
        #[derive(serde::Deserialize, utoipa::ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $( $(#[$fattr])* pub $field: $ty, )*
            /// The body as text.
            pub body: Option<String>,
            /// The body as base64 (for bytes that are not text).
            pub body_base64: Option<String>,
            /// Headers, delivered with the message.
            pub headers: Option<std::collections::BTreeMap<String, String>>,
            /// Lower is delivered first (default 0).
            pub priority: Option<i16>,
            /// Not delivered before this many milliseconds from now.
            #[schema(minimum = 0, maximum = 31622400000_u64)]
            pub delay_ms: Option<u64>,
            /// Strict FIFO among messages with this key (1 to 128 bytes; 1 to 127 for a message
            /// in a batch or with dependencies).
            pub ordering_key: Option<String>,
            /// On a queue with a `concurrency_limit`, at most that many messages of this key at
            /// once (1 to 127 bytes; 1 to 126 for a message in a batch or with dependencies;
            /// not with `ordering_key`).
            pub concurrency_key: Option<String>,
            /// The tenant whose share of a fair queue's deliveries this message counts against
            /// (1 to 128 bytes): each key gets its weight's share whatever the others have
            /// waiting. Kept, without effect, on a queue that is not fair.
            pub fairness_key: Option<String>,
            /// Sending a message with the same key again within the queue's window is a no-op
            /// that returns the original id (1 to 128 bytes).
            pub idempotency_key: Option<String>,
            /// Replace the waiting message of this key (its body, headers and due time; the
            /// answer's `replaced` is true with its id), or, once that one was claimed, send
            /// anew under the key (1 to 128 bytes; not with `idempotency_key`, `ordering_key`,
            /// `concurrency_key`, nor in a batch).
            pub replace_key: Option<String>,
            /// With `replace_key`: deliver once, after the key has had no send for this many
            /// milliseconds (not with `delay_ms`).
            #[schema(minimum = 0, maximum = 31622400000_u64)]
            pub debounce_ms: Option<u64>,
            /// Use this message id (a UUID) instead of a generated one.
            pub id: Option<String>,
            /// Never delivered after this time (RFC 3339 with any offset, `…Z` or `…+01:00`):
            /// a claim that finds it later makes it a dead letter ("deadline passed"), and a
            /// worker stops a handler still running then.
            #[schema(example = "2026-11-22T10:00:00Z")]
            pub deadline: Option<String>,
            /// Each attempt may run this many milliseconds from its claim; past it a worker
            /// stops the handler and the message becomes a dead letter, never retried.
            #[schema(minimum = 1, maximum = 31622400000_u64)]
            pub run_timeout_ms: Option<u64>,
            /// Deliver only after every one of these messages (ids, of any queue) was acked; a
            /// dependency that becomes a dead letter holds it until redriven and acked, one
            /// that is cancelled cancels it. Each must still be stored (not acked yet, or
            /// dead), or have been acked within the last 7 days as a member of a batch or as
            /// another message's dependency; otherwise 422 `dependency_not_found`. At most 1000.
            #[schema(max_items = 1000)]
            pub depends_on: Option<Vec<String>>,
        }

        impl $name {
            /// The message its message fields describe (they are taken, left empty).
            pub(crate) fn take_message(&mut self) -> $crate::error::ApiResult<sqlmq::Message> {
                $crate::api::messages::MessageFields {
                    body: self.body.take(),
                    body_base64: self.body_base64.take(),
                    headers: self.headers.take(),
                    priority: self.priority.take(),
                    delay_ms: self.delay_ms.take(),
                    ordering_key: self.ordering_key.take(),
                    concurrency_key: self.concurrency_key.take(),
                    fairness_key: self.fairness_key.take(),
                    idempotency_key: self.idempotency_key.take(),
                    replace_key: self.replace_key.take(),
                    debounce_ms: self.debounce_ms.take(),
                    id: self.id.take(),
                    deadline: self.deadline.take(),
                    run_timeout_ms: self.run_timeout_ms.take(),
                    depends_on: self.depends_on.take(),
                }
                .into_message()
            }
        }
    };
}

pub(crate) use message_request;

/// A message's fields, as every request that sends one gives them.
pub(crate) struct MessageFields {
    pub(crate) body: Option<String>,
    pub(crate) body_base64: Option<String>,
    pub(crate) headers: Option<BTreeMap<String, String>>,
    pub(crate) priority: Option<i16>,
    pub(crate) delay_ms: Option<u64>,
    pub(crate) ordering_key: Option<String>,
    pub(crate) concurrency_key: Option<String>,
    pub(crate) fairness_key: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) replace_key: Option<String>,
    pub(crate) debounce_ms: Option<u64>,
    pub(crate) id: Option<String>,
    pub(crate) deadline: Option<String>,
    pub(crate) run_timeout_ms: Option<u64>,
    pub(crate) depends_on: Option<Vec<String>>,
}

impl MessageFields {
    pub(crate) fn into_message(self) -> ApiResult<sqlmq::Message> {
        let mut m = sqlmq::Message::new(decode(self.body, self.body_base64)?);
        if let Some(id) = self.id {
            m = m.with_id(id.parse()?);
        }
        if let Some(p) = self.priority {
            m = m.priority(p);
        }
        if let Some(ms) = self.delay_ms {
            m = m.delay(at_most_a_year("delay_ms", ms)?);
        }
        if let Some(k) = self.ordering_key {
            m = m.ordering_key(k);
        }
        if let Some(k) = self.concurrency_key {
            m = m.concurrency_key(k);
        }
        if let Some(k) = self.fairness_key {
            m = m.fairness_key(k);
        }
        if let Some(k) = self.idempotency_key {
            if self.replace_key.is_some() {
                return Err(ApiError::invalid(
                    "a message has an idempotency_key or a replace_key, not both",
                ));
            }
            m = m.idempotency_key(k);
        }
        match (self.replace_key, self.debounce_ms) {
            (Some(k), None) => m = m.replacing(k),
            (Some(k), Some(ms)) => {
                if self.delay_ms.is_some() {
                    return Err(ApiError::invalid(
                        "debounce_ms is the delay of a debounced message: not with delay_ms",
                    ));
                }
                m = m.debounce(k, at_most_a_year("debounce_ms", ms)?);
            }
            (None, Some(_)) => {
                return Err(ApiError::invalid("debounce_ms needs a replace_key"));
            }
            (None, None) => {}
        }
        for (k, v) in self.headers.unwrap_or_default() {
            m = m.header(k, v);
        }
        if let Some(ids) = self.depends_on {
            m = m.depends_on(ids_of("depends_on", &ids)?);
        }
        if let Some(text) = self.deadline {
            let at = crate::body::parse_rfc3339(&text).ok_or_else(|| {
                ApiError::invalid(format!(
                    "deadline: expected an RFC 3339 time (2026-11-22T10:00:00Z), got {text:?}"
                ))
            })?;
            m = m.deadline(at);
        }
        if let Some(ms) = self.run_timeout_ms {
            if ms == 0 {
                return Err(ApiError::invalid("run_timeout_ms must be at least 1"));
            }
            m = m.run_timeout(at_most_a_year("run_timeout_ms", ms)?);
        }
        Ok(m)
    }
}

/// Parse message ids given in `field`: at most 1000 (a message's dependencies).
pub(crate) fn ids_of(field: &str, texts: &[String]) -> ApiResult<Vec<sqlmq::MessageId>> {
    if texts.len() > 1000 {
        return Err(ApiError::invalid(format!(
            "{field} holds at most 1000 ids, got {}",
            texts.len()
        )));
    }
    texts
        .iter()
        .map(|t| t.parse().map_err(ApiError::from))
        .collect()
}

message_request! {
    /// One message to send: `body` (text) or `body_base64` (bytes), and options.
    pub struct OutgoingMessage {}
}

impl OutgoingMessage {
    pub(crate) fn into_message(mut self) -> ApiResult<sqlmq::Message> {
        self.take_message()
    }
}

/// `POST /v1/queues/{queue}/messages`: messages sent in one transaction (all or none).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    /// 1 to 10 000 messages.
    pub messages: Vec<OutgoingMessage>,
}

/// A sent message.
#[derive(Serialize, ToSchema)]
pub struct SentOut {
    /// Its id (the original's, for a duplicate).
    pub id: String,
    /// True when its idempotency key was already known: nothing was written.
    pub duplicate: bool,
    /// True when it replaced its `replace_key`'s waiting message: `id` is that message's.
    pub replaced: bool,
}

/// The sent messages, in the order given.
#[derive(Serialize, ToSchema)]
pub struct SendResponse {
    /// One per message.
    pub messages: Vec<SentOut>,
}

impl From<Vec<sqlmq::queue::Sent>> for SendResponse {
    fn from(sent: Vec<sqlmq::queue::Sent>) -> SendResponse {
        SendResponse {
            messages: sent
                .into_iter()
                .map(|s| SentOut {
                    id: s.id.to_string(),
                    duplicate: s.duplicate,
                    replaced: s.replaced,
                })
                .collect(),
        }
    }
}

/// Parse and size-check a batch.
pub(crate) fn batch<T, U>(
    items: Vec<T>,
    what: &str,
    convert: impl Fn(T) -> ApiResult<U>,
) -> ApiResult<Vec<U>> {
    if items.is_empty() || items.len() > MAX_SEND_BATCH {
        return Err(ApiError::invalid(format!(
            "{what} must hold 1 to {MAX_SEND_BATCH} entries, got {}",
            items.len()
        )));
    }
    items.into_iter().map(convert).collect()
}

/// Send messages atomically.
pub(crate) async fn send_messages<B: Backend>(
    state: &AppState<B>,
    name: &str,
    messages: Vec<sqlmq::Message>,
) -> ApiResult<Vec<sqlmq::queue::Sent>> {
    let queue = state.queue(name).await?;
    let sent = if messages.len() == 1 {
        vec![
            queue
                .send(messages.into_iter().next().expect("one"))
                .await?,
        ]
    } else {
        queue.send_batch(messages).await?
    };
    let new = sent.iter().filter(|s| !s.duplicate).count() as u64;
    state.count(name, new, 0);
    Ok(sent)
}

/// Send messages in one transaction: all of them or none.
#[utoipa::path(post, operation_id = "messages_send", path = "/v1/queues/{queue}/messages", tag = "messages",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = SendRequest,
    responses((status = 200, description = "The messages' ids", body = SendResponse,
        links(
            ("QueueMessageGet" = (operation_id = "queue_message_get",
                parameters(("queue" = "$request.path.queue"), ("id" = "$response.body#/messages/0/id")),
                description = "The first message sent, in whatever state it is now")),
            ("MessageCancel" = (operation_id = "message_cancel",
                parameters(("queue" = "$request.path.queue"), ("id" = "$response.body#/messages/0/id")),
                description = "Remove the first message sent while it waits")),
        ))))]
pub async fn send<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<SendRequest>,
) -> ApiResult<Json<SendResponse>> {
    let messages = batch(request.messages, "messages", OutgoingMessage::into_message)?;
    let sent = send_messages(&state, &name, messages).await?;
    Ok(Json(SendResponse::from(sent)))
}

/// Claim messages, waiting up to `wait_ms` for the first (long poll).
#[utoipa::path(post, operation_id = "messages_receive", path = "/v1/queues/{queue}/receive", tag = "messages",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = ReceiveRequest,
    responses((status = 200, description = "Claimed messages (empty when none came in time)", body = ReceiveResponse)))]
pub async fn receive<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<ReceiveRequest>,
) -> ApiResult<Json<ReceiveResponse>> {
    // Boxed: the lookup's future is 5 KiB, and thousands of waiting requests should not each
    // carry room for it while they wait.
    let lookup = Box::pin(state.queue(&name));
    let queue = lookup.await?;
    consume::receive(&state, Source::Queue(queue), request).await
}

/// Ack claimed messages (one transaction), some with a result to keep for the messages that
/// depend on them (each in a transaction of its own); per-receipt results.
#[utoipa::path(post, operation_id = "messages_ack", path = "/v1/queues/{queue}/ack", tag = "messages",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = AckRequest,
    responses((status = 200, description = "Per-receipt results", body = SettleResponse)))]
pub async fn ack<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<AckRequest>,
) -> ApiResult<Json<SettleResponse>> {
    let queue = state.queue(&name).await?;
    consume::ack(&state, Source::Queue(queue), request).await
}

/// Nack claimed messages: retry later, or dead-letter after the last attempt.
#[utoipa::path(post, operation_id = "messages_nack", path = "/v1/queues/{queue}/nack", tag = "messages",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = NackRequest,
    responses((status = 200, description = "Per-receipt results", body = SettleResponse)))]
pub async fn nack<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<NackRequest>,
) -> ApiResult<Json<SettleResponse>> {
    let queue = state.queue(&name).await?;
    consume::nack(Source::Queue(queue), request).await
}

/// Extend the leases of claimed messages.
#[utoipa::path(post, operation_id = "messages_extend", path = "/v1/queues/{queue}/extend", tag = "messages",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = ExtendRequest,
    responses((status = 200, description = "Per-receipt results", body = SettleResponse)))]
pub async fn extend<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<ExtendRequest>,
) -> ApiResult<Json<SettleResponse>> {
    let queue = state.queue(&name).await?;
    consume::extend(Source::Queue(queue), request).await
}

/// Cancel a message in any state: 204 when it was waiting (ready, delayed, blocked behind its
/// key, or dead) and is gone; 202 when a consumer holds it: its handler is told, every
/// settlement of its receipt fails with 409 `cancelled`, and it is removed when the handler
/// ends or its lease would have ended, never delivered again.
#[utoipa::path(delete, operation_id = "message_cancel", path = "/v1/queues/{queue}/messages/{id}", tag = "messages",
    params(("queue" = String, Path, description = "Queue name"),
           ("id" = String, Path, description = "Message id")),
    responses((status = 204, description = "Removed"),
              (status = 202, description = "In flight: cancelled where it runs")))]
pub async fn cancel<B: Backend>(
    State(state): State<AppState<B>>,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<axum::http::StatusCode> {
    let id: sqlmq::MessageId = id.parse()?;
    Ok(match state.queue(&name).await?.cancel(id).await? {
        sqlmq::queue::Cancelled::Removed => axum::http::StatusCode::NO_CONTENT,
        sqlmq::queue::Cancelled::Running => axum::http::StatusCode::ACCEPTED,
    })
}

/// `POST …/progress`: a received message's progress.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressRequest {
    /// The delivery's receipt (`ID:TOKEN`).
    pub receipt: String,
    /// How far its handling got: any JSON of at most 4 KiB, shown with the message until it
    /// is settled.
    pub value: serde_json::Value,
}

/// Report how far the handling of a received message got: kept with the in-flight message
/// (`progress` of `GET …/messages/{id}`) until it is settled. 409 `lease_lost` or `cancelled`
/// when the receipt no longer holds its lease.
#[utoipa::path(post, operation_id = "message_progress", path = "/v1/queues/{queue}/progress", tag = "messages",
    params(("queue" = String, Path, description = "Queue name")),
    request_body = ProgressRequest,
    responses((status = 204, description = "Kept")))]
pub async fn progress<B: Backend>(
    State(state): State<AppState<B>>,
    Path(name): Path<String>,
    Json(request): Json<ProgressRequest>,
) -> ApiResult<axum::http::StatusCode> {
    let receipt: sqlmq::queue::Receipt = request.receipt.parse()?;
    state
        .queue(&name)
        .await?
        .set_progress(receipt, &request.value)
        .await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
