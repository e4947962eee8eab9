//! Consuming through HTTP, the same for a queue and a cluster-mode consumer group: long-poll
//! receive, then per-receipt ack, nack and extend.

use std::time::Duration;

use sqlmq::Backend;

use super::model::{
    AckRequest, DeliveryOut, ExtendRequest, NackOutcome, NackRequest, ReceiptResult,
    ReceiveRequest, ReceiveResponse, SettleResponse, SettleStatus, lease, receipts,
};
use crate::error::ApiResult;
use crate::extract::Json;
use crate::longpoll::wait_for;
use crate::state::AppState;

/// A queue or a cluster group: what `receive`, `ack`, `nack` and `extend` act on.
pub(crate) enum Consumer<B: Backend> {
    Queue(sqlmq::Queue<B>),
    Group(sqlmq::Group<B>),
}

impl<B: Backend> Consumer<B> {
    /// The wakeup subject that sends or publishes through this server fire.
    fn subject(&self) -> String {
        match self {
            Consumer::Queue(q) => format!("q:{}", q.name()),
            Consumer::Group(g) => format!("t:{}", g.topic().name()),
        }
    }

    /// The traffic counter's key.
    fn traffic_key(&self) -> String {
        match self {
            Consumer::Queue(q) => q.name().to_owned(),
            Consumer::Group(g) => format!("{}/{}", g.topic().name(), g.name()),
        }
    }

    async fn receive(&self, n: usize, lease: Duration) -> sqlmq::Result<Vec<sqlmq::Delivery>> {
        match self {
            Consumer::Queue(q) => q.receive(n, lease).await,
            Consumer::Group(g) => g.receive(n, lease).await,
        }
    }

    async fn ack_batch(&self, receipts: &[sqlmq::Receipt]) -> sqlmq::Result<sqlmq::AckReport> {
        match self {
            Consumer::Queue(q) => q.ack_batch(receipts).await,
            Consumer::Group(g) => g.ack_batch(receipts).await,
        }
    }

    async fn nack(
        &self,
        receipt: sqlmq::Receipt,
        retry_in: Option<Duration>,
        error: &str,
    ) -> sqlmq::Result<sqlmq::NackOutcome> {
        match self {
            Consumer::Queue(q) => q.nack(receipt, retry_in, error).await,
            Consumer::Group(g) => g.nack(receipt, retry_in, error).await,
        }
    }

    async fn extend(&self, receipt: sqlmq::Receipt, lease: Duration) -> sqlmq::Result<()> {
        match self {
            Consumer::Queue(q) => q.extend(receipt, lease).await,
            Consumer::Group(g) => g.extend(receipt, lease).await,
        }
    }
}

/// Long-poll receive.
pub(crate) async fn receive<B: Backend>(
    state: &AppState<B>,
    consumer: Consumer<B>,
    request: ReceiveRequest,
) -> ApiResult<Json<ReceiveResponse>> {
    let (max, lease, wait) = request.checked()?;
    let wait = wait.min(state.max_wait);
    let notify = state.wakeups.get(&consumer.subject());
    let found = wait_for(notify, wait, state.poll, &state.shutdown, || {
        consumer.receive(max, lease)
    })
    .await?;
    Ok(Json(ReceiveResponse {
        messages: found.into_iter().map(DeliveryOut::from).collect(),
    }))
}

fn result(receipt: &str, lost: bool) -> ReceiptResult {
    ReceiptResult {
        receipt: receipt.to_owned(),
        result: if lost {
            SettleStatus::LeaseLost
        } else {
            SettleStatus::Ok
        },
        outcome: None,
        retry_in_ms: None,
    }
}

/// Ack in one transaction; per-receipt results.
pub(crate) async fn ack<B: Backend>(
    state: &AppState<B>,
    consumer: Consumer<B>,
    request: AckRequest,
) -> ApiResult<Json<SettleResponse>> {
    let parsed = receipts(&request.receipts)?;
    let mut unique = parsed.clone();
    unique.sort_by_key(|r| (r.id, r.token));
    unique.dedup();
    let report = consumer.ack_batch(&unique).await?;
    state.count(&consumer.traffic_key(), 0, report.acked as u64);
    let results = request
        .receipts
        .iter()
        .zip(&parsed)
        .map(|(text, r)| result(text, report.lost.contains(r)))
        .collect();
    Ok(Json(SettleResponse { results }))
}

/// Nack each receipt.
pub(crate) async fn nack<B: Backend>(
    consumer: Consumer<B>,
    request: NackRequest,
) -> ApiResult<Json<SettleResponse>> {
    let parsed = receipts(&request.receipts)?;
    let error = request.error.as_deref().unwrap_or("nacked");
    let retry_in = request
        .retry_in_ms
        .map(|ms| super::queues::at_most_a_year("retry_in_ms", ms))
        .transpose()?;
    let mut results = Vec::with_capacity(parsed.len());
    for (text, r) in request.receipts.iter().zip(parsed) {
        results.push(match consumer.nack(r, retry_in, error).await {
            Ok(outcome) => {
                let mut res = result(text, false);
                match outcome {
                    sqlmq::NackOutcome::Retry { after } => {
                        res.outcome = Some(NackOutcome::Retry);
                        res.retry_in_ms = Some(after.as_millis() as u64);
                    }
                    _ => res.outcome = Some(NackOutcome::Dead),
                }
                res
            }
            Err(sqlmq::Error::LeaseLost { .. }) => result(text, true),
            Err(e) => return Err(e.into()),
        });
    }
    Ok(Json(SettleResponse { results }))
}

/// Extend each receipt's lease.
pub(crate) async fn extend<B: Backend>(
    consumer: Consumer<B>,
    request: ExtendRequest,
) -> ApiResult<Json<SettleResponse>> {
    let parsed = receipts(&request.receipts)?;
    let lease = lease(request.lease_ms)?;
    let mut results = Vec::with_capacity(parsed.len());
    for (text, r) in request.receipts.iter().zip(parsed) {
        results.push(match consumer.extend(r, lease).await {
            Ok(()) => result(text, false),
            Err(sqlmq::Error::LeaseLost { .. }) => result(text, true),
            Err(e) => return Err(e.into()),
        });
    }
    Ok(Json(SettleResponse { results }))
}
