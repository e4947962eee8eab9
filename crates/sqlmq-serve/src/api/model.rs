//! Request and response bodies shared by queues and consumer groups: deliveries, receipts,
//! per-receipt results, dead letters and redrive requests.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::{encode, rfc3339};
use crate::error::ApiError;

/// Longest lease a receive or extend may ask for, in milliseconds (24 h).
pub const MAX_LEASE_MS: u64 = 86_400_000;
/// Default lease of a receive, in milliseconds.
pub const DEFAULT_LEASE_MS: u64 = 30_000;
/// Most receipts in one ack, nack or extend request.
pub const MAX_RECEIPTS: usize = 1000;

/// `POST …/receive`: claim up to `max` messages for `lease_ms`, waiting up to `wait_ms` for
/// the first one.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ReceiveRequest {
    /// Most messages to claim (default 1).
    #[schema(minimum = 1, maximum = 1000)]
    pub max: Option<u32>,
    /// Lease length in milliseconds (default 30 000, at most 24 h).
    #[schema(minimum = 1, maximum = 86400000)]
    pub lease_ms: Option<u64>,
    /// Long poll: wait up to this long for messages (default 0: answer at once).
    #[schema(minimum = 0, maximum = 20000)]
    pub wait_ms: Option<u64>,
}

impl ReceiveRequest {
    /// `(max, lease, wait)` checked against their ranges.
    pub(crate) fn checked(
        &self,
    ) -> Result<(usize, std::time::Duration, std::time::Duration), ApiError> {
        let max = self.max.unwrap_or(1);
        if !(1..=1000).contains(&max) {
            return Err(ApiError::invalid(format!(
                "max must be 1..=1000, got {max}"
            )));
        }
        let lease = lease(self.lease_ms.unwrap_or(DEFAULT_LEASE_MS))?;
        let wait = self.wait_ms.unwrap_or(0);
        if wait > 20_000 {
            return Err(ApiError::invalid(format!(
                "wait_ms must be 0..=20000, got {wait}"
            )));
        }
        Ok((max as usize, lease, std::time::Duration::from_millis(wait)))
    }
}

/// A lease length checked against 1 ms ..= 24 h.
pub(crate) fn lease(ms: u64) -> Result<std::time::Duration, ApiError> {
    if !(1..=MAX_LEASE_MS).contains(&ms) {
        return Err(ApiError::invalid(format!(
            "lease_ms must be 1..={MAX_LEASE_MS}, got {ms}"
        )));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// A claimed message (or record): process it, then ack or nack its `receipt` before
/// `lease_expires_at`.
#[derive(Serialize, ToSchema)]
pub struct DeliveryOut {
    /// The message id (UUIDv7).
    pub id: String,
    /// What to ack, nack or extend with: `ID:TOKEN` (the token fences this claim).
    pub receipt: String,
    /// 1 for the first delivery.
    pub attempt: u32,
    /// The body, when it is UTF-8 text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers given at send time.
    pub headers: BTreeMap<String, String>,
    /// Priority (lower first).
    pub priority: i16,
    /// Ordering key (queues) or record key (topics).
    pub ordering_key: Option<String>,
    /// Concurrency key (queues), if it was sent with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// Idempotency key, if it was sent with one.
    pub idempotency_key: Option<String>,
    /// When it was sent (RFC 3339).
    pub enqueued_at: String,
    /// When the lease ends unless extended (RFC 3339).
    pub lease_expires_at: String,
    /// The message's deadline (RFC 3339), if it has one: settle it before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// How long each attempt may run (milliseconds), if limited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<u64>,
    /// Topic records: the partition.
    pub partition: Option<u32>,
    /// Topic records: the offset.
    pub offset: Option<i64>,
}

impl From<sqlmq::Delivery> for DeliveryOut {
    fn from(d: sqlmq::Delivery) -> DeliveryOut {
        let receipt = d.receipt().to_string();
        let (body, body_base64) = encode(d.body);
        DeliveryOut {
            id: d.id.to_string(),
            receipt,
            attempt: d.attempt,
            body,
            body_base64,
            headers: d.headers,
            priority: d.priority,
            ordering_key: d.ordering_key,
            concurrency_key: d.concurrency_key,
            idempotency_key: d.idempotency_key,
            enqueued_at: rfc3339(d.enqueued_at),
            lease_expires_at: rfc3339(d.lease_expires_at),
            deadline: d.deadline.map(rfc3339),
            run_timeout_ms: d.run_timeout.map(|t| t.as_millis() as u64),
            partition: d.partition,
            offset: d.offset,
        }
    }
}

/// What a receive claimed (empty when nothing came within `wait_ms`).
#[derive(Serialize, ToSchema)]
pub struct ReceiveResponse {
    /// The claimed messages.
    pub messages: Vec<DeliveryOut>,
}

/// `POST …/ack`: receipts to ack, some of them with a result.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// Receipts (`ID:TOKEN`), 1 to 1000.
    pub receipts: Vec<String>,
    /// Queues only: a result to keep for some of the receipts, by receipt (each one of
    /// `receipts`): UTF-8 text of at most 65 536 bytes, kept for 7 days for the messages that
    /// depend on this one (`GET /v1/messages/{id}/dependencies`) and for
    /// `GET /v1/messages/{id}/result`. Receipts without a result are acked together in one
    /// transaction, each one with a result in a transaction of its own.
    #[schema(example = json!({"01a209cb-5b43-778c-a723-afcb3faf372d:1": "{\"width\":640}"}))]
    pub results: Option<BTreeMap<String, String>>,
}

/// Most bytes of one ack's result.
pub const MAX_RESULT_BYTES: usize = sqlmq::flow::MAX_RESULT_BYTES;

impl AckRequest {
    /// The results given, by parsed receipt: each names a receipt of the request and fits
    /// [`MAX_RESULT_BYTES`].
    pub(crate) fn results(
        &self,
        parsed: &[sqlmq::queue::Receipt],
    ) -> Result<HashMap<sqlmq::queue::Receipt, Vec<u8>>, ApiError> {
        let mut out = HashMap::new();
        for (text, result) in self.results.iter().flatten() {
            let receipt: sqlmq::queue::Receipt = text.parse()?;
            if !parsed.contains(&receipt) {
                return Err(ApiError::invalid(format!(
                    "results names receipt {text:?}, which is not one of receipts"
                )));
            }
            if result.len() > MAX_RESULT_BYTES {
                return Err(ApiError::new(
                    axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!(
                        "the result for {text} is {} bytes, more than {MAX_RESULT_BYTES}",
                        result.len()
                    ),
                ));
            }
            out.insert(receipt, result.clone().into_bytes());
        }
        Ok(out)
    }
}

/// `POST …/nack`: receipts to retry later (or dead-letter after the last attempt).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    /// Receipts (`ID:TOKEN`), 1 to 1000.
    pub receipts: Vec<String>,
    /// The error, kept in the message's history (default "nacked").
    pub error: Option<String>,
    /// Retry after this long; default: the queue's backoff or the group's ladder.
    #[schema(minimum = 0)]
    pub retry_in_ms: Option<u64>,
}

/// `POST …/extend`: receipts whose leases to extend.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// Receipts (`ID:TOKEN`), 1 to 1000.
    pub receipts: Vec<String>,
    /// New lease length from now, in milliseconds.
    #[schema(minimum = 1, maximum = 86400000)]
    pub lease_ms: u64,
}

/// Parse receipts, 1 to [`MAX_RECEIPTS`] of them; a malformed one fails the whole request.
pub(crate) fn receipts(texts: &[String]) -> Result<Vec<sqlmq::queue::Receipt>, ApiError> {
    if texts.is_empty() || texts.len() > MAX_RECEIPTS {
        return Err(ApiError::invalid(format!(
            "receipts must hold 1 to {MAX_RECEIPTS} receipts, got {}",
            texts.len()
        )));
    }
    texts
        .iter()
        .map(|t| t.parse::<sqlmq::queue::Receipt>().map_err(ApiError::from))
        .collect()
}

/// The outcome for one receipt.
#[derive(Serialize, ToSchema, Debug, PartialEq, Eq)]
pub struct ReceiptResult {
    /// The receipt, as given.
    pub receipt: String,
    /// `ok`, or `lease_lost` when the lease had ended or was taken over (nothing was done).
    pub result: SettleStatus,
    /// Nack only: `retry` or `dead` (no attempts left).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<NackOutcome>,
    /// Nack only, `retry`: milliseconds until the next attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

/// Whether a receipt's lease was still held.
#[derive(Serialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SettleStatus {
    /// Done.
    Ok,
    /// The lease had ended or another consumer holds the message now: nothing was done.
    LeaseLost,
}

/// What a nack did.
#[derive(Serialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NackOutcome {
    /// Delivered again later.
    Retry,
    /// No attempts left: now a dead letter.
    Dead,
}

/// Per-receipt results of an ack, nack or extend, in the order given.
#[derive(Serialize, ToSchema)]
pub struct SettleResponse {
    /// One per receipt.
    pub results: Vec<ReceiptResult>,
}

/// One attempt's error in a dead letter's history.
#[derive(Serialize, ToSchema)]
pub struct AttemptErrorOut {
    /// The attempt.
    pub attempt: u32,
    /// When (RFC 3339).
    pub at: String,
    /// The error text.
    pub error: String,
}

impl From<sqlmq::inspect::AttemptError> for AttemptErrorOut {
    fn from(e: sqlmq::inspect::AttemptError) -> AttemptErrorOut {
        AttemptErrorOut {
            attempt: e.attempt,
            at: e.at,
            error: e.error,
        }
    }
}

/// A dead letter with its error history.
#[derive(Serialize, ToSchema)]
pub struct DeadLetterOut {
    /// The message id.
    pub id: String,
    /// Attempts made.
    pub attempts: u32,
    /// When it died (RFC 3339).
    pub died_at: String,
    /// When it was sent (RFC 3339).
    pub enqueued_at: String,
    /// The last errors, oldest first.
    pub errors: Vec<AttemptErrorOut>,
    /// Topic records: the partition.
    pub partition: Option<u32>,
    /// Topic records: the offset.
    pub offset: Option<i64>,
    /// Ordering key (queues) or record key (topics).
    pub ordering_key: Option<String>,
    /// Concurrency key (queues), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// The body, when it is UTF-8 text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl From<sqlmq::queue::DeadLetter> for DeadLetterOut {
    fn from(d: sqlmq::queue::DeadLetter) -> DeadLetterOut {
        let (body, body_base64) = encode(d.body);
        DeadLetterOut {
            id: d.id.to_string(),
            attempts: d.attempts,
            died_at: rfc3339(d.died_at),
            enqueued_at: rfc3339(d.enqueued_at),
            errors: d.errors.into_iter().map(AttemptErrorOut::from).collect(),
            partition: d.partition,
            offset: d.offset,
            ordering_key: d.ordering_key,
            concurrency_key: d.concurrency_key,
            headers: d.headers,
            body,
            body_base64,
        }
    }
}

/// Dead letters, oldest first.
#[derive(Serialize, ToSchema)]
pub struct DeadLettersResponse {
    /// The dead letters.
    pub dead_letters: Vec<DeadLetterOut>,
}

impl From<Vec<sqlmq::queue::DeadLetter>> for DeadLettersResponse {
    fn from(list: Vec<sqlmq::queue::DeadLetter>) -> DeadLettersResponse {
        DeadLettersResponse {
            dead_letters: list.into_iter().map(DeadLetterOut::from).collect(),
        }
    }
}

/// `?limit=` of a listing.
#[derive(Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Most entries to return (default 100, at most 10 000).
    #[param(minimum = 1, maximum = 10000, default = 100)]
    pub limit: Option<usize>,
}

impl ListQuery {
    pub(crate) fn checked(&self) -> Result<usize, ApiError> {
        match self.limit.unwrap_or(100) {
            n @ 1..=10_000 => Ok(n),
            n => Err(ApiError::invalid(format!(
                "limit must be 1..=10000, got {n}"
            ))),
        }
    }
}

/// `POST …/dead/redrive` (or `…/retries/retry-now`): the ids, or `all`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IdsRequest {
    /// Message ids.
    pub ids: Option<Vec<String>>,
    /// Every one instead of `ids`.
    pub all: Option<bool>,
}

/// What `IdsRequest` selects.
pub(crate) enum Selection {
    Ids(Vec<sqlmq::MessageId>),
    All,
}

impl IdsRequest {
    pub(crate) fn selection(&self) -> Result<Selection, ApiError> {
        match (&self.ids, self.all.unwrap_or(false)) {
            (Some(_), true) => Err(ApiError::invalid("give either ids or all, not both")),
            (None, true) => Ok(Selection::All),
            (Some(ids), false) if !ids.is_empty() && ids.len() <= 10_000 => Ok(Selection::Ids(
                ids.iter()
                    .map(|s| s.parse().map_err(ApiError::from))
                    .collect::<Result<_, _>>()?,
            )),
            _ => Err(ApiError::invalid(
                "give ids (1 to 10000 message ids) or \"all\": true",
            )),
        }
    }
}

/// How many messages an operation affected.
#[derive(Serialize, ToSchema)]
pub struct CountResponse {
    /// The count.
    pub count: u64,
}
