//! Claiming: `receive` (the settling methods are the shared consumption path, `consume/`).

use std::time::{Duration, Instant};

use super::Queue;
use crate::consume::check_claim;
use crate::domain::{Delivery, Result};
use crate::store::prelude::*;
use crate::store::rows::ClaimRequest;
use crate::store::{Backend, Server};
use crate::tx;

impl<B: Backend> Queue<B> {
    /// Claim up to `n` (1 to 1000) ready messages for `lease`. Returns at once, with an empty
    /// vector when nothing is ready or the queue is paused. Each delivery carries a new fencing
    /// token; settle it with `ack`/`nack` before the lease ends, or `extend` it.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let batch = q.receive(32, std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        check_claim(n, lease)?;
        self.client.require_schema()?;
        self.housekeeping_if_due().await?;
        self.claim(n, lease).await
    }

    /// The claim itself, without housekeeping (the worker runs maintenance as a service).
    pub(crate) async fn claim(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        let started = Instant::now();
        let consumer = self.consumer();
        // With one writer at a time the claim, a write, may wait for an open transaction (a
        // batch being sent, a handler's `ack_in`) or another process: a plain read first
        // spares an empty claim that wait. A server database claims directly: its claim is as
        // cheap as this read.
        if <B::Store as Server<B>>::ONE_WRITER && !self.anything_ready().await? {
            consumer.record_claim(started, 0);
            return Ok(Vec::new());
        }
        let store = self.store();
        let request = ClaimRequest {
            queue_id: self.id(),
            n,
            lease,
            owner: self.client.owner_id(),
        };
        let request = &request;
        let op = consumer.claim_op();
        let claimed = tx::run_own(self.pool(), op, |conn, _| {
            Box::pin(store.claim(conn, request, op))
        })
        .await?;
        consumer.record_claim(started, claimed.len());
        Ok(claimed)
    }

    /// Whether the queue has claimable messages (not paused, something ready), by the last
    /// committed state.
    async fn anything_ready(&self) -> Result<bool> {
        let signals = self.client.probe(&[self.id()]).await?;
        Ok(signals.iter().any(|s| s.ready))
    }
}
