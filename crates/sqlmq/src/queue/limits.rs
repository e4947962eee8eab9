//! A limited queue's claims: at most `max_in_flight` messages in flight and `rate_limit`
//! deliveries per window, every process together.
//!
//! A queue without limits claims as before, in its own round trip (or two), and pays nothing
//! for the feature but a look at its configuration every [`LIMITS_REFRESH`] while it claims.
//! A limited queue's claim is one transaction through its gate: one statement locks the limits
//! row (so the claims of every process are counted one after the other) and reads, beside it,
//! the leases, the clock and the deliveries of the last window from `queue_deliveries`; then a
//! claim of at most what is left, and a row recording it. Rows that left the window are
//! deleted by each handle once a second, not by every claim. The window
//! slides: every claim counts what was delivered in the window before it, so no interval of
//! the window's length holds more than the limit, wherever it starts. When the gate is shut —
//! nothing left — the handle claims nothing, without asking the database, until the window
//! frees (or, for in-flight, for [`FULL_RECHECK`]).

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use super::Queue;
use crate::domain::{Delivery, Error, RateLimit, Result, Room};
use crate::store::SqlStore;
use crate::store::rows::ClaimRequest;
use crate::store::{Backend, WHOLE_QUEUE, slot_key};
use crate::tx;

/// How often a handle looks again at its queue's limits while it claims: a limit set, changed
/// or removed takes effect in every process within this time.
pub(super) const LIMITS_REFRESH: Duration = Duration::from_secs(2);
/// How long a handle whose queue had its most messages in flight waits before it asks again.
const FULL_RECHECK: Duration = Duration::from_millis(100);

/// How often a handle deletes its queue's deliveries that left the rate window.
const PRUNE_EVERY: Duration = Duration::from_secs(1);

/// A concurrency key's deliveries within the window, as one gate pass counts them.
#[derive(Default)]
struct KeyPace {
    left: u64,
    oldest: Option<i64>,
    delivered: usize,
    deferred: u64,
}

/// Keep of `claimed` what each concurrency key's rate allows at `now`; put the rest back, due
/// when their key's window frees — the later ones a window further for every `count` ahead of
/// them, so that a key's backlog is not claimed and put back again at every window — and
/// record each key's deliveries. Messages without a concurrency key pass.
async fn pace_keys<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    queue_id: i32,
    rate: RateLimit,
    now: i64,
    claimed: Vec<Delivery>,
) -> Result<Vec<Delivery>> {
    let window = rate.window_us();
    let count = u64::from(rate.count);
    let mut keys: BTreeMap<String, KeyPace> = BTreeMap::new();
    let mut delivered = Vec::with_capacity(claimed.len());
    let mut deferred = Vec::new();
    for d in claimed {
        let Some(key) = d.concurrency_key.as_deref().map(slot_key) else {
            delivered.push(d);
            continue;
        };
        if !keys.contains_key(&key) {
            let (used, oldest) = store
                .recent_deliveries(conn, queue_id, key.as_bytes(), now - window)
                .await?;
            let pace = KeyPace {
                left: count.saturating_sub(used),
                oldest,
                ..KeyPace::default()
            };
            keys.insert(key.clone(), pace);
        }
        let pace = keys.get_mut(&key).expect("inserted above");
        if pace.left > 0 {
            pace.left -= 1;
            pace.delivered += 1;
            delivered.push(d);
        } else {
            let frees = rate.frees_in(pace.oldest, now).as_micros() as i64;
            let delay = frees + (pace.deferred / count) as i64 * window;
            pace.deferred += 1;
            deferred.push((d, delay));
        }
    }
    if !deferred.is_empty() {
        metrics::counter!(crate::telemetry::catalogue::KEY_RATE_DEFERRALS.name())
            .increment(deferred.len() as u64);
        store.put_back(conn, queue_id, &deferred).await?;
    }
    for (key, pace) in &keys {
        if pace.delivered > 0 {
            store
                .record_deliveries(conn, queue_id, key.as_bytes(), now, pace.delivered)
                .await?;
        }
    }
    Ok(delivered)
}

/// What a handle knows of its queue's limits.
#[derive(Debug)]
pub(super) struct LimitState {
    /// When the limits were read.
    checked: Instant,
    limited: bool,
    /// Until when the gate is known to be shut.
    shut_until: Option<Instant>,
    /// When this handle last deleted deliveries that left the window.
    pruned: Instant,
}

impl LimitState {
    pub(super) fn new(limited: bool) -> LimitState {
        LimitState {
            checked: Instant::now(),
            limited,
            shut_until: None,
            pruned: Instant::now(),
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
        let mut conn = self.client.conns().read().await?;
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
                "queue {} has limits (max_in_flight, rate_limit or rate_limit_per_key), which {what} does not \
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
        // Deliveries older than the window no longer count (the gate's read skips them by its
        // index range); deleting them is housekeeping, done by each handle once a second.
        let prune = {
            let mut state = self.inner.limits.lock().expect("poisoned");
            let due = state.pruned.elapsed() >= PRUNE_EVERY;
            if due {
                state.pruned = Instant::now();
            }
            due
        };
        let (claimed, shut_for) = tx::run(self.conns(), "claim_limited", |conn, _| {
            Box::pin(async move {
                let Some(read) = store.gate(conn, id).await? else {
                    // The limits were removed since this handle looked.
                    return Ok((B::claim_in(store, conn, request).await?, None));
                };
                let (limits, now) = (read.limits, read.now_us);
                let mut allowed = request.n;
                if let Some(max) = limits.max_in_flight {
                    allowed = allowed.min(u64::from(max).saturating_sub(read.in_flight) as usize);
                    if allowed == 0 {
                        return Ok((Vec::new(), Some(FULL_RECHECK)));
                    }
                }
                if let Some(rate) = limits.rate {
                    if prune {
                        store
                            .forget_deliveries(conn, id, WHOLE_QUEUE, now - rate.window_us())
                            .await?;
                    }
                    match rate.room(read.delivered, read.oldest_us, now) {
                        Room::FreesIn(d) => return Ok((Vec::new(), Some(d))),
                        Room::Left(left) => {
                            allowed = allowed.min(usize::try_from(left).unwrap_or(usize::MAX));
                        }
                    }
                }
                let limited = ClaimRequest {
                    n: allowed,
                    ..*request
                };
                let mut claimed = B::claim_in(store, conn, &limited).await?;
                if let Some(rate) = limits.rate_per_key {
                    claimed = pace_keys::<B>(store, conn, id, rate, now, claimed).await?;
                }
                if limits.rate.is_some() && !claimed.is_empty() {
                    store
                        .record_deliveries(conn, id, WHOLE_QUEUE, now, claimed.len())
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
