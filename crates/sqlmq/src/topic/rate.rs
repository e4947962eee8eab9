//! A rate-limited cluster group's claims: at most `rate_limit` deliveries per window, every
//! member of every process together.
//!
//! As for a queue (`queue/limits.rs`), a group without a limit claims as before and pays only
//! a look at its row every [`LIMITS_REFRESH`] while it claims. A limited group's claim runs in
//! the same transaction as ever, after a gate: the group's `group_limits` row locked (so the
//! claims of every member are counted one after the other), the deliveries of the last window
//! counted from `group_deliveries` (older rows deleted first), then the claim of at most what
//! is left, and a row recording it. The window slides: every claim counts the window before
//! it, so no interval of the window's length holds more than the limit. When nothing is left,
//! the handle claims nothing, without asking the database, until the window frees.

use std::time::{Duration, Instant};

use super::group::Group;
use crate::domain::{RateLimit, Result, Room};
use crate::store::Backend;
use crate::store::SqlStore;

/// How often a handle looks again at its group's limit while it claims.
const LIMITS_REFRESH: Duration = Duration::from_secs(2);

/// What a handle knows of its group's limit.
#[derive(Debug)]
pub(crate) struct RateState {
    checked: Instant,
    rate: Option<RateLimit>,
    /// Until when the window is known to be used up.
    shut_until: Option<Instant>,
}

impl RateState {
    pub(crate) fn new(rate: Option<RateLimit>) -> RateState {
        RateState {
            checked: Instant::now(),
            rate,
            shut_until: None,
        }
    }
}

/// The gate's verdict for one claim.
pub(crate) enum Gate {
    /// No limit: claim as asked.
    Open,
    /// Claim at most this many, then record them at `now_us`.
    Allow { n: usize, now_us: i64 },
    /// Nothing left until this long from now.
    Shut(Duration),
}

impl<B: Backend> Group<B> {
    /// Whether the group has a rate limit, by what this handle read at most
    /// [`LIMITS_REFRESH`] ago; `false` also while the window is known to be used up (then
    /// [`Group::shut`] says so).
    pub(crate) async fn rate_limited(&self) -> Result<bool> {
        {
            let state = self.inner.rate.lock().expect("poisoned");
            if state.checked.elapsed() < LIMITS_REFRESH {
                return Ok(state.rate.is_some());
            }
        }
        let mut conn = self.topic.client.conns().read().await?;
        let row = self
            .topic
            .client
            .store()
            .group_by_id(&mut conn, self.id())
            .await?;
        let rate = row.and_then(|r| r.config.rate_limit);
        let mut state = self.inner.rate.lock().expect("poisoned");
        state.checked = Instant::now();
        state.rate = rate;
        Ok(rate.is_some())
    }

    /// Whether the window is known to be used up: claim nothing.
    pub(crate) fn shut(&self) -> bool {
        let state = self.inner.rate.lock().expect("poisoned");
        state.shut_until.is_some_and(|t| Instant::now() < t)
    }

    /// Remember that the window is used up for `d`.
    pub(crate) fn shut_for(&self, d: Duration) {
        self.inner.rate.lock().expect("poisoned").shut_until = Some(Instant::now() + d);
    }
}

/// Inside the claim's transaction: lock the group's limit and count its window.
pub(crate) async fn gate<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    group_id: i32,
    n: usize,
) -> Result<Gate> {
    let Some(rate) = store.lock_group_limit(conn, group_id).await? else {
        return Ok(Gate::Open); // removed since the handle looked
    };
    let now_us = B::now_us(store, conn).await?;
    let (used, oldest) = store
        .recent_group_deliveries(conn, group_id, now_us - rate.window_us())
        .await?;
    Ok(match rate.room(used, oldest, now_us) {
        Room::FreesIn(d) => Gate::Shut(d),
        Room::Left(left) => Gate::Allow {
            n: n.min(usize::try_from(left).unwrap_or(usize::MAX)),
            now_us,
        },
    })
}
