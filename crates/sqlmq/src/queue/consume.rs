//! Claiming: `receive` (the settling methods are the shared consumption path, `consume/`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Queue;
use crate::client::{Maintain, Watched};
use crate::consume::{check_claim, check_take};
use crate::domain::{DEADLINE_PASSED, Delivery, Result, TAKEN_TOKEN, overdue};
use crate::store::Backend;
use crate::store::rows::ClaimRequest;
use crate::telemetry;
use crate::tx;

/// Claims made again after one that found only messages past their deadline.
const OVERDUE_RECLAIMS: usize = 4;
/// The lease of a message a take found past its deadline: only held until its dead-lettering,
/// in the same transaction, which ends it.
const LATE_LEASE: Duration = Duration::from_secs(60);

/// The limits of a claim, the same on every backend (declared on the default backend's
/// `Queue` so that `Queue::MAX_RECEIVE` needs no type annotation).
impl Queue {
    /// Most messages one claim may ask for: 1000. It bounds `n` of [`Queue::receive`],
    /// [`Queue::receive_in`], [`Queue::take_in`], [`Group::receive`](crate::Group::receive) and
    /// [`BroadcastReader::poll`](crate::topic::BroadcastReader::poll), and a worker's
    /// [`max_batch`](crate::worker::WorkerBuilder::max_batch).
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// use sqlmq::Queue;
    /// assert_eq!(Queue::MAX_RECEIVE, 1000);
    /// let all_we_may = q.receive(Queue::MAX_RECEIVE, std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub const MAX_RECEIVE: usize = crate::consume::MAX_RECEIVE;

    /// Longest lease one claim or extension may take: 24 h. It bounds the `lease` of
    /// [`Queue::receive`], [`Queue::receive_in`], [`Group::receive`](crate::Group::receive) and
    /// of the `extend` methods, and a worker's [`lease`](crate::worker::WorkerBuilder::lease).
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// use sqlmq::Queue;
    /// assert_eq!(Queue::MAX_LEASE, std::time::Duration::from_secs(24 * 3600));
    /// let overnight = q.receive(1, Queue::MAX_LEASE).await?;
    /// # Ok(()) }
    /// ```
    pub const MAX_LEASE: Duration = crate::consume::MAX_LEASE;
}

impl<B: Backend> Queue<B> {
    /// Claim up to `n` (1 to 1000, [`Queue::MAX_RECEIVE`]) ready messages for `lease` (at most
    /// [`Queue::MAX_LEASE`]). Returns at once, with an empty
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

    /// [`receive`](Queue::receive), waiting up to `wait` for the first message: a long poll.
    /// Returns as soon as it claimed something, or empty after `wait`.
    ///
    /// Waiting costs the database nothing per caller: the callers of one client wait in a
    /// line per queue, first come first served, and one prober per client looks at every
    /// queue with a line in one statement per tick (10 ms after work, doubling to 60 ms,
    /// [`Client::set_probe_interval`](crate::Client::set_probe_interval)). A send through the
    /// same client answers at once; one from another process within a tick. A wait that ends
    /// early (its future dropped) leaves the line and claims nothing.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// use std::time::Duration;
    /// let batch = q.receive_wait(10, Duration::from_secs(30), Duration::from_secs(20)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive_wait(
        &self,
        n: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        check_claim(n, lease)?;
        let queue = self.clone();
        let maintain: Maintain = Arc::new(move || {
            let queue = queue.clone();
            Box::pin(async move {
                let report = queue.maintain().await?;
                Ok(report.promoted + report.released > 0)
            })
        });
        self.client
            .wait_in_line(Watched::Queue(self.id()), maintain, n, wait, || {
                self.receive(n, lease)
            })
            .await
    }

    /// Claim up to `n` (1 to 1000, [`Queue::MAX_RECEIVE`]) ready messages inside the caller's
    /// transaction: the
    /// lock-held mode. The claimed rows stay locked until that transaction ends, so handle
    /// the messages, write their effects and [`ack_batch_in`](Queue::ack_batch_in) them in the
    /// same transaction, then commit: one transaction, one commit, for the whole batch, and
    /// exactly-once effects. A rollback — or a connection that dies, a process killed — undoes
    /// the claim: the messages are ready again at once, with their attempt count unchanged.
    ///
    /// Choose it over leases for short handlers whose work is writes to this database; keep
    /// leases ([`receive`](Queue::receive), the worker) for slow handlers (row locks are held
    /// while they run), for handlers that call out to other systems, and for messages that
    /// may crash their process: an attempt that rolls back is not counted, so such a message
    /// would be retried forever instead of becoming a dead letter. Housekeeping (due delayed
    /// messages, expired leases) is left to `receive`, the worker or [`Queue::maintain`]. On a
    /// connection outside a transaction the claim commits by itself (with leases, as
    /// `receive`).
    ///
    /// `lease` still matters: the claim writes ordinary leases, which the acks check. Choose it
    /// longer than the transaction will take — an ack after it ends reports the receipt lost
    /// (roll back then: the messages come back) — and it is how long messages claimed by a
    /// transaction that commits without acking them stay with it. On any error from
    /// `receive_in` or `ack_batch_in`, roll the transaction back. On SQLite the transaction
    /// holds the database's one write lock while the handler runs: every other writer waits.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// let batch = q.receive_in(&mut tx, 100, std::time::Duration::from_secs(30)).await?;
    /// for d in &batch {
    ///     sqlx::query("INSERT INTO seen (id) VALUES (?)").bind(d.id.to_string()).execute(&mut *tx).await?;
    /// }
    /// let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
    /// q.ack_batch_in(&mut tx, &receipts).await?;
    /// tx.commit().await?; // the effects and the acks, or neither
    /// # Ok(()) }
    /// ```
    pub async fn receive_in(
        &self,
        conn: &mut B::Connection,
        n: usize,
        lease: Duration,
    ) -> Result<Vec<Delivery>> {
        check_claim(n, lease)?;
        self.client.require_schema()?;
        self.refuse_if_limited("receive_in").await?;
        let started = Instant::now();
        let store = self.store();
        let request = &self.claim_request(n, lease);
        let claimed =
            tx::run_in::<B, _, _>(conn, |conn, _| Box::pin(B::claim_in(store, conn, request)))
                .await?;
        self.consumer().record_claim(started, claimed.len());
        let (late, claimed): (Vec<_>, Vec<_>) = claimed.into_iter().partition(overdue);
        for d in late {
            self.dead_letter_in(conn, d.receipt(), DEADLINE_PASSED)
                .await?;
        }
        Ok(claimed)
    }

    /// Take up to `n` (1 to 1000) ready messages inside the caller's transaction: claim and
    /// remove them in one step, with no lease and nothing to ack (receive-and-delete, made
    /// transactional). The messages are gone when the transaction commits, and back in the
    /// queue, ready at once and with their attempt count unchanged, when it rolls back, the
    /// connection dies or the process is killed; until then their rows stay locked and other
    /// consumers skip them (on SQLite they wait for the one write lock). A taken delivery
    /// holds no lease: its token is 0, so its receipt settles nothing (an ack reports it
    /// lost), and its `lease_expires_at` is when it was taken. This is PostgreSQL's
    /// `SELECT … FOR UPDATE SKIP LOCKED` then
    /// `DELETE` pattern, and the cheapest way to consume: two round trips and two row deletes
    /// per message, against the four row changes of [`receive_in`](Queue::receive_in) and
    /// [`ack_batch_in`](Queue::ack_batch_in).
    ///
    /// Use it when the handling is writes to this database in the same transaction (its
    /// effects and the removal commit together: exactly once). The advice of
    /// [`receive_in`](Queue::receive_in) applies: short handlers, no calls to other systems,
    /// no messages that may crash the process (a rollback does not count an attempt, so they
    /// never become dead letters), roll back on any error. A message with an ordering key
    /// lets the key's next message become ready when the transaction commits, as an ack would.
    /// A take runs no housekeeping: delayed messages become ready only when `receive`, a
    /// worker or [`Queue::maintain`] promotes them, so a deployment that only takes runs one
    /// of those too. A message found past its deadline is not taken: it becomes a dead letter
    /// in the same transaction, as in [`receive_in`](Queue::receive_in). The claimed and acked
    /// counters count a take when it is made, before the caller commits. On a connection
    /// outside a transaction the take commits by itself: the messages are removed before the
    /// call returns (at most once).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// for d in q.take_in(&mut tx, 100).await? {
    ///     sqlx::query("INSERT INTO seen (id) VALUES (?)").bind(d.id.to_string()).execute(&mut *tx).await?;
    /// }
    /// tx.commit().await?; // the effects and the removals, or neither
    /// # Ok(()) }
    /// ```
    pub async fn take_in(&self, conn: &mut B::Connection, n: usize) -> Result<Vec<Delivery>> {
        check_take(n)?;
        self.client.require_schema()?;
        self.refuse_if_limited("take_in").await?;
        let started = Instant::now();
        let store = self.store();
        // Those past their deadline are leased instead, to be dead-lettered just below.
        let request = &self.claim_request(n, LATE_LEASE);
        let (mut taken, late) = tx::run_in::<B, _, _>(conn, |conn, _| {
            Box::pin(B::take_in(store, conn, request, &overdue))
        })
        .await?;
        // No lease: a token that settles nothing, and "expires" when it was taken.
        for d in &mut taken {
            d.token = TAKEN_TOKEN;
            d.lease_expires_at = d.claimed_at;
        }
        let consumer = self.consumer();
        consumer.record_claim(started, taken.len() + late.len());
        consumer.record_acked(taken.len());
        for d in late {
            self.dead_letter_in(conn, d.receipt(), DEADLINE_PASSED)
                .await?;
        }
        Ok(taken)
    }

    /// The claim itself, without housekeeping (the worker runs maintenance as a service).
    /// Messages whose deadline passed before the claim are dead-lettered, not handed out.
    pub(crate) async fn claim(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        // A claim that found only overdue messages claims again (a few times): an empty answer
        // would send a worker idle with live messages behind them.
        for _ in 0..OVERDUE_RECLAIMS {
            let claimed =
                telemetry::receive(&self.name(), n, self.claim_untraced(n, lease)).await?;
            if !claimed.iter().any(overdue) {
                return Ok(claimed);
            }
            let (late, live): (Vec<_>, Vec<_>) = claimed.into_iter().partition(overdue);
            for d in late {
                // Not handed out either way: when this fails, its lease ends and a later
                // claim finds it overdue again.
                if let Err(e) = self.dead_letter(d.receipt(), DEADLINE_PASSED).await {
                    tracing::warn!(queue = %self.name(), message = %d.id,
                        "could not dead-letter a message past its deadline: {e}");
                }
            }
            if !live.is_empty() {
                return Ok(live);
            }
        }
        Ok(Vec::new())
    }

    async fn claim_untraced(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        let started = Instant::now();
        let consumer = self.consumer();
        if self.limited().await? {
            let claimed = self.claim_limited(n, lease).await?;
            consumer.record_claim(started, claimed.len());
            return Ok(claimed);
        }
        // With one writer at a time the claim, a write, may wait for an open transaction (a
        // batch being sent, a handler's `ack_in`) or another process: a plain read first
        // spares an empty claim that wait. A server database claims directly: its claim is as
        // cheap as this read.
        if B::ONE_WRITER && !self.anything_ready().await? {
            consumer.record_claim(started, 0);
            return Ok(Vec::new());
        }
        let store = self.store();
        let request = &self.claim_request(n, lease);
        let op = consumer.claim_op();
        let claimed = tx::run_own(self.conns(), op, |conn, _| {
            Box::pin(B::claim(store, conn, request, op))
        })
        .await?;
        consumer.record_claim(started, claimed.len());
        Ok(claimed)
    }

    /// What a claim of `n` messages for `lease` by this client asks the store for.
    pub(super) fn claim_request(&self, n: usize, lease: Duration) -> ClaimRequest<'_> {
        ClaimRequest {
            queue_id: self.id(),
            n,
            lease,
            owner: self.client.owner_id(),
        }
    }

    /// Whether the queue has claimable messages (not paused, something ready), by the last
    /// committed state.
    async fn anything_ready(&self) -> Result<bool> {
        let signals = self.client.probe(&[self.id()]).await?;
        Ok(signals.iter().any(|s| s.ready))
    }
}
