//! Consuming through HTTP, the same for a queue and a cluster-mode consumer group: long-poll
//! receive, then per-receipt ack, nack and extend.

use std::collections::HashSet;

use sqlmq::Backend;
use sqlmq::source::Source;

use super::model::{
    AckRequest, DeliveryOut, ExtendRequest, NackOutcome, NackRequest, ReceiptResult,
    ReceiveRequest, ReceiveResponse, SettleResponse, SettleStatus, lease, receipts,
};
use crate::error::{ApiError, ApiResult};
use crate::extract::Json;
use crate::state::AppState;

/// Long-poll receive: the library's `receive_wait`, in which every waiting request of this
/// server shares one probe of the database; on shutdown the wait ends at once, empty.
pub(crate) async fn receive<B: Backend>(
    state: &AppState<B>,
    consumer: Source<B>,
    request: ReceiveRequest,
) -> ApiResult<Json<ReceiveResponse>> {
    let (max, lease, wait) = request.checked()?;
    let wait = wait.min(state.max_wait);
    let found = tokio::select! {
        found = consumer.receive_wait(max, lease, wait) => found?,
        _ = state.shutdown.cancelled() => Vec::new(),
    };
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

/// Ack in one transaction (a receipt with a result in one of its own); per-receipt results.
pub(crate) async fn ack<B: Backend>(
    state: &AppState<B>,
    consumer: Source<B>,
    request: AckRequest,
) -> ApiResult<Json<SettleResponse>> {
    let parsed = receipts(&request.receipts)?;
    let results = request.results(&parsed)?;
    let queue = match &consumer {
        Source::Queue(q) => Some(q),
        _ if results.is_empty() => None,
        _ => {
            return Err(ApiError::invalid(
                "results are kept for queue messages only: a group's ack takes none",
            ));
        }
    };
    let mut unique = parsed.clone();
    unique.sort_by_key(|r| (r.id, r.token));
    unique.dedup();
    let (with_result, plain): (Vec<_>, Vec<_>) =
        unique.into_iter().partition(|r| results.contains_key(r));
    let mut lost = HashSet::new();
    let mut acked = 0;
    if !plain.is_empty() {
        let report = consumer.ack_batch(&plain).await?;
        acked += report.acked as u64;
        lost.extend(report.lost);
    }
    for r in with_result {
        let queue = queue.expect("results were refused for a group");
        match queue.ack_with_result(r, results[&r].clone()).await {
            Ok(()) => acked += 1,
            Err(sqlmq::Error::LeaseLost { .. }) => {
                lost.insert(r);
            }
            Err(e) => return Err(e.into()),
        }
    }
    state.count(&consumer.name(), 0, acked);
    let results = request
        .receipts
        .iter()
        .zip(&parsed)
        .map(|(text, r)| result(text, lost.contains(r)))
        .collect();
    Ok(Json(SettleResponse { results }))
}

/// Nack each receipt.
pub(crate) async fn nack<B: Backend>(
    consumer: Source<B>,
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
                    sqlmq::queue::NackOutcome::Retry { after } => {
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
    consumer: Source<B>,
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
