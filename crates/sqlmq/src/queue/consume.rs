//! Claiming: `receive` (the settling methods are the shared consumption path, `consume/`).

use std::time::{Duration, Instant};

use super::Queue;
use crate::consume::check_claim;
use crate::domain::{Delivery, Result};
use crate::store::Backend;
use crate::store::prelude::*;
use crate::store::rows::ClaimRequest;
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
        let store = self.store();
        let request = ClaimRequest {
            queue_id: self.id(),
            n,
            lease,
            owner: self.client.owner_id(),
        };
        let request = &request;
        let consumer = self.consumer();
        let claimed = tx::run(self.pool(), consumer.claim_op(), |conn, _| {
            Box::pin(store.claim(conn, request))
        })
        .await?;
        consumer.record_claim(started, claimed.len());
        Ok(claimed)
    }
}
