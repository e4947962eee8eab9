//! A limited queue's claims: at most `max_in_flight` messages in flight and `rate_limit`
//! deliveries per window, every process together.
//!
//! A queue without limits claims as before, in its own two round trips, and pays nothing
//! for the feature but a look at its configuration every [`LIMITS_REFRESH`] while it claims.
//! A limited queue's claim is one transaction through its gate: the limits row locked (so the
//! claims of every process are counted one after the other), the leases counted, the
//! deliveries of the last window counted from `queue_deliveries` (rows older than the window
//! deleted first), then a claim of at most what is left, and a row recording it. The window
//! slides: every claim counts what was delivered in the window before it, so no interval of
//! the window's length holds more than the limit, wherever it starts. When the gate is shut —
//! nothing left — the handle claims nothing, without asking the database, until the window
//! frees (or, for in-flight, for [`FULL_RECHECK`]).

use std::time::{Duration, Instant};

use super::Queue;
use crate::domain::{Delivery, Error, Result};
use crate::store::Backend;
use crate::store::prelude::*;
use crate::store::rows::ClaimRequest;
use crate::tx;

/// How often a handle looks again at its queue's limits while it claims: a limit set, changed
/// or removed takes effect in every process within this time.
pub(super) const LIMITS_REFRESH: Duration = Duration::from_secs(2);
/// How long a handle whose queue had its most messages in flight waits before it asks again.
const FULL_RECHECK: Duration = Duration::from_millis(100);

/// What a handle knows of its queue's limits.
#[derive(Debug)]
pub(super) struct LimitState {
    /// When the limits were read.
    checked: Instant,
    limited: bool,
    /// Until when the gate is known to be shut.
    shut_until: Option<Instant>,
}

impl LimitState {
    pub(super) fn new(limited: bool) -> LimitState {
        LimitState {
            checked: Instant::now(),
            limited,
            shut_until: None,
        }
    }
}

impl<B: Backend> Queue<B> {
    /// Whether the queue has limits, by what this handle read at most [`LIMITS_REFRESH`] ago.
    pub(super) async fn limited(&self) -> Result<bool> {
        {
            let state = self.inner.limits.lock().expect("poisoned");
            if state.checked.elapsed() < LIMITS_REFRESH {
                return Ok(state.limited);
            }
        }
        let mut conn = self.client.reader().acquire().await?;
        let row = self.store().queue_by_id(&mut conn, self.id()).await?;
        let limited = row.is_some_and(|r| r.config.is_limited());
        let mut state = self.inner.limits.lock().expect("poisoned");
        state.checked = Instant::now();
        state.limited = limited;
        Ok(limited)
    }

    /// Refuse a lock-held claim (`receive_in`, `take_in`) of a limited queue: it would go
    /// around the gate.
    pub(super) async fn refuse_if_limited(&self, what: &str) -> Result<()> {
        if self.limited().await? {
            return Err(Error::InvalidArgument(format!(
                "queue {} has limits (max_in_flight or rate_limit), which {what} does not \
                 count: use receive or a worker",
                self.name()
            )));
        }
        Ok(())
    }

    /// Claim through the gate: at most what the limits leave.
    pub(super) async fn claim_limited(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        {
            let state = self.inner.limits.lock().expect("poisoned");
            if state.shut_until.is_some_and(|t| Instant::now() < t) {
                return Ok(Vec::new());
            }
        }
        let store = self.store();
        let id = self.id();
        let request = &self.claim_request(n, lease);
        let (claimed, shut_for) = tx::run(self.pool(), "claim_limited", |conn, _| {
            Box::pin(async move {
                let Some((max, rate)) = store.lock_limits(conn, id).await? else {
                    // The limits were removed since this handle looked.
                    return Ok((store.claim_in(conn, request).await?, None));
                };
                let mut allowed = request.n;
                if let Some(max) = max {
                    let busy = store.in_flight(conn, id).await?;
                    allowed = allowed.min(u64::from(max).saturating_sub(busy) as usize);
                    if allowed == 0 {
                        return Ok((Vec::new(), Some(FULL_RECHECK)));
                    }
                }
                let mut at = None;
                if let Some(rate) = rate {
                    let now = store.now_us(conn).await?;
                    let window = rate.per.as_micros() as i64;
                    let (used, oldest) = store.recent_deliveries(conn, id, now - window).await?;
                    let left = u64::from(rate.count).saturating_sub(used) as usize;
                    if left == 0 {
                        let frees = oldest.unwrap_or(now) + window - now;
                        return Ok((Vec::new(), Some(Duration::from_micros(frees.max(1) as u64))));
                    }
                    allowed = allowed.min(left);
                    at = Some(now);
                }
                let limited = ClaimRequest {
                    n: allowed,
                    ..*request
                };
                let claimed = store.claim_in(conn, &limited).await?;
                if let Some(now) = at
                    && !claimed.is_empty()
                {
                    store
                        .record_deliveries(conn, id, now, claimed.len())
                        .await?;
                }
                Ok((claimed, None))
            })
        })
        .await?;
        self.inner.limits.lock().expect("poisoned").shut_until =
            shut_for.map(|d| Instant::now() + d);
        Ok(claimed)
    }
}
