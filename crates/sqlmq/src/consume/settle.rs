//! The one consumption path behind queues and cluster groups: ack, fail (nack, snooze, dead
//! letter), extend, and the releases of expired or orphaned leases, each in a transaction of
//! its own (retried) or in the caller's.
//!
//! A queue and a group differ only in their tables (the backend's business, keyed by
//! [`SourceId`]), their retry settings (read fresh inside each transaction, so that a change
//! applies at once) and the names of their metrics.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::fate::{RetryPolicy, decide};
use crate::client::Client;
use crate::domain::{AckReport, Backoff, Error, Failure, NackOutcome, Receipt, Released, Result};
use crate::store::SqlStore;
use crate::store::{Backend, receipts_except};
use crate::telemetry::catalogue::{self, Metric};
use crate::tx;

/// A queue or a cluster group, by id: what a consumer settles (the store has a statement
/// set for each, `body/settle.rs` and `body/group_settle.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SourceId {
    /// A queue, by id.
    Queue(i32),
    /// A cluster-mode consumer group, by id.
    Group(i32),
}

/// Most messages one `receive` may claim; public as
/// [`Queue::MAX_RECEIVE`](crate::Queue::MAX_RECEIVE).
pub(crate) const MAX_RECEIVE: usize = 1000;
/// Longest lease one claim or extension may take; public as
/// [`Queue::MAX_LEASE`](crate::Queue::MAX_LEASE).
pub(crate) const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

/// Check a claim's size and lease.
pub(crate) fn check_claim(n: usize, lease: Duration) -> Result<()> {
    check_take(n)?;
    check_lease(lease)
}

/// Check how many messages a take (or a claim) asks for.
pub(crate) fn check_take(n: usize) -> Result<()> {
    if n == 0 || n > MAX_RECEIVE {
        return Err(Error::InvalidArgument(format!(
            "n must be 1..={MAX_RECEIVE}, got {n}"
        )));
    }
    Ok(())
}

/// Check a lease duration.
pub(crate) fn check_lease(lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) || lease > MAX_LEASE {
        return Err(Error::InvalidArgument(format!(
            "lease {lease:?} is not between 1 ms and 24 h"
        )));
    }
    Ok(())
}

/// `Err(LeaseLost)` for the first receipt an ack found without its lease.
pub(crate) fn lost_to_error(report: AckReport) -> Result<()> {
    match report.lost.first() {
        Some(r) => Err(Error::LeaseLost {
            id: r.id,
            token: r.token,
        }),
        None => Ok(()),
    }
}

/// The resolver's question, on a connection outside the ack: whether the ack of `acked`
/// (receipts that held their leases) committed.
async fn acks_committed<B: Backend>(
    store: &SqlStore<B>,
    id: SourceId,
    conn: &mut B::Connection,
    acked: &[Receipt],
) -> Result<bool> {
    match id {
        SourceId::Queue(_) => store.queue_acks_committed(conn, acked).await,
        SourceId::Group(g) => store.group_acks_committed(conn, g, acked).await,
    }
}

/// What the metrics and transactions of a queue or a group are called.
struct Names {
    /// The metric label's key: `queue` or `group`.
    label: &'static str,
    acked: Metric,
    retried: Metric,
    snoozed: Metric,
    dead_lettered: Metric,
    claimed: Metric,
    /// Transaction names (the `op` label of `sqlmq_db_retries_total`).
    op_ack: &'static str,
    op_fail: &'static str,
    op_extend: &'static str,
    op_claim: &'static str,
}

const QUEUE: Names = Names {
    label: "queue",
    acked: catalogue::MESSAGES_ACKED,
    retried: catalogue::MESSAGES_RETRIED,
    snoozed: catalogue::MESSAGES_SNOOZED,
    dead_lettered: catalogue::MESSAGES_DEAD_LETTERED,
    claimed: catalogue::MESSAGES_CLAIMED,
    op_ack: "ack",
    op_fail: "nack",
    op_extend: "extend",
    op_claim: "claim",
};

const GROUP: Names = Names {
    label: "group",
    acked: catalogue::RECORDS_ACKED,
    retried: catalogue::RECORDS_RETRIED,
    snoozed: catalogue::RECORDS_SNOOZED,
    dead_lettered: catalogue::RECORDS_DEAD_LETTERED,
    claimed: catalogue::RECORDS_CLAIMED,
    op_ack: "group_ack",
    op_fail: "group_nack",
    op_extend: "group_extend",
    op_claim: "group_claim",
};

/// A queue or a cluster group, as the consumption path sees it.
pub(crate) struct Consumer<'a, B: Backend> {
    pub client: &'a Client<B>,
    pub id: SourceId,
    /// The queue's name, or `topic/group`: in metrics, logs and errors.
    pub name: String,
}

impl<'a, B: Backend> Consumer<'a, B> {
    fn names(&self) -> &'static Names {
        match self.id {
            SourceId::Queue(_) => &QUEUE,
            SourceId::Group(_) => &GROUP,
        }
    }

    fn label(&self) -> (&'static str, String) {
        (self.names().label, self.name.clone())
    }

    /// The error for a queue or group deleted while in use.
    fn unknown(&self) -> Error {
        match (self.id, self.name.split_once('/')) {
            (SourceId::Group(_), Some((topic, group))) => Error::UnknownGroup {
                topic: topic.to_owned(),
                group: group.to_owned(),
            },
            _ => Error::UnknownQueue(self.name.clone()),
        }
    }

    /// The current retry settings (`None`: the queue or group is gone).
    async fn policy(&self, conn: &mut B::Connection) -> Result<Option<(u32, Backoff)>> {
        let store = self.client.store();
        Ok(match self.id {
            SourceId::Queue(id) => store
                .queue_by_id(conn, id)
                .await?
                .map(|q| (q.config.max_attempts, q.config.backoff)),
            SourceId::Group(id) => store
                .group_by_id(conn, id)
                .await?
                .map(|g| (g.config.max_attempts, g.config.backoff)),
        })
    }

    /// Record a claim's duration and size.
    pub(crate) fn record_claim(&self, started: Instant, claimed: usize) {
        let (key, value) = self.label();
        metrics::histogram!(catalogue::CLAIM_SECONDS.name(), key => value.clone())
            .record(started.elapsed().as_secs_f64());
        metrics::counter!(self.names().claimed.name(), key => value).increment(claimed as u64);
    }

    /// The transaction name of this source's claims.
    pub(crate) fn claim_op(&self) -> &'static str {
        self.names().op_claim
    }

    /// Ack many receipts in one transaction of our own (retried). A lost connection is
    /// resolved by asking whether the leases the attempt acked are gone, never by replaying a
    /// COMMIT that may have landed; an attempt that lost its connection before it knew which
    /// leases it acks wrote nothing, and runs again.
    pub(crate) async fn ack_batch(&self, receipts: &[Receipt]) -> Result<AckReport> {
        if receipts.is_empty() {
            return Ok(AckReport::default());
        }
        self.client.require_schema()?;
        let (store, id) = (self.client.store(), self.id);
        // The receipts the last attempt acked, for the resolver.
        let acked: Mutex<Vec<Receipt>> = Mutex::default();
        let acked = &acked;
        // The receipts an attempt resolved as not committed may have acked after all: a
        // one-statement ack (`store/mysql/settle.rs`) holds no lock before its statement runs,
        // so that statement can still reach the server after the resolver looked. A later
        // attempt that finds them lost asks the resolver's question again.
        let unsure: Mutex<Vec<Receipt>> = Mutex::default();
        let unsure = &unsure;
        let op = self.names().op_ack;
        let lost = tx::run_own_resolving(
            self.client.conns(),
            op,
            |conn, _| {
                // This attempt's own list: one left by an earlier attempt would answer for it.
                acked.lock().expect("poisoned").clear();
                Box::pin(async move {
                    let lost = match id {
                        SourceId::Queue(q) => {
                            B::ack_queue_own(store, conn, q, receipts, acked, op).await?
                        }
                        SourceId::Group(g) => {
                            store.ack_group_own(conn, g, receipts, acked, op).await?
                        }
                    };
                    let maybe: Vec<Receipt> = {
                        let unsure = unsure.lock().expect("poisoned");
                        lost.iter()
                            .filter(|r| unsure.contains(r))
                            .copied()
                            .collect()
                    };
                    if maybe.is_empty() {
                        return Ok(lost);
                    }
                    Ok(if acks_committed::<B>(store, id, conn, &maybe).await? {
                        receipts_except(&lost, &maybe)
                    } else {
                        lost
                    })
                })
            },
            |conn, _| {
                Box::pin(async move {
                    let acked = acked.lock().expect("poisoned").clone();
                    if acked.is_empty() {
                        // Lost before its leases were read (or with none to ack): nothing of
                        // it can have committed, and running it again is harmless. Calling it
                        // committed would report every receipt lost and leave them leased.
                        return Ok(None);
                    }
                    if !acks_committed::<B>(store, id, conn, &acked).await? {
                        unsure
                            .lock()
                            .expect("poisoned")
                            .extend(acked.iter().copied());
                        return Ok(None);
                    }
                    Ok(Some(receipts_except(receipts, &acked)))
                })
            },
        )
        .await?;
        Ok(self.counted(receipts.len(), lost))
    }

    /// Ack many receipts inside the caller's transaction.
    pub(crate) async fn ack_batch_in(
        &self,
        conn: &mut B::Connection,
        receipts: &[Receipt],
    ) -> Result<AckReport> {
        if receipts.is_empty() {
            return Ok(AckReport::default());
        }
        self.client.require_schema()?;
        let (store, id) = (self.client.store(), self.id);
        let lost = tx::run_in::<B, _, _>(conn, |conn, _| {
            Box::pin(async move {
                match id {
                    SourceId::Queue(q) => store.ack_queue(conn, q, receipts).await,
                    SourceId::Group(g) => store.ack_group(conn, g, receipts).await,
                }
            })
        })
        .await?;
        Ok(self.counted(receipts.len(), lost))
    }

    /// Ack one receipt inside the caller's transaction.
    pub(crate) async fn ack_in(&self, conn: &mut B::Connection, receipt: Receipt) -> Result<()> {
        let lost = lost_to_error(self.ack_batch_in(conn, &[receipt]).await?);
        self.explained(lost).await
    }

    /// `result`, where it is a lost lease of a queue message cancelled in flight, as
    /// [`Error::Cancelled`]. Asked only on the failure path: a settlement finds no lease
    /// whether it was cancelled or lost (`store/body/running.rs`).
    pub(crate) async fn explained<T>(&self, result: Result<T>) -> Result<T> {
        let (Err(Error::LeaseLost { id, token }), SourceId::Queue(_)) = (&result, self.id) else {
            return result;
        };
        let (id, token) = (*id, *token);
        let reason = async {
            let mut conn = self.client.conns().read().await?;
            self.client.store().cancel_reason(&mut conn, id).await
        };
        match reason.await {
            Ok(Some(reason)) => Err(Error::Cancelled { id, reason }),
            _ => Err(Error::LeaseLost { id, token }),
        }
    }

    /// Count `acked` messages settled for good (acked, or taken).
    pub(crate) fn record_acked(&self, acked: usize) {
        let (key, value) = self.label();
        metrics::counter!(self.names().acked.name(), key => value).increment(acked as u64);
    }

    /// The report of acking `total` receipts of which `lost` had lost their lease, counted.
    fn counted(&self, total: usize, lost: Vec<Receipt>) -> AckReport {
        let acked = total - lost.len();
        self.record_acked(acked);
        let (key, value) = self.label();
        if !lost.is_empty() {
            metrics::counter!(catalogue::LEASES_LOST.name(), key => value)
                .increment(lost.len() as u64);
        }
        AckReport { acked, lost }
    }

    /// End a claim without an ack, in a transaction of our own (retried) or in the caller's.
    pub(crate) async fn fail(
        &self,
        conn: Option<&mut B::Connection>,
        receipt: Receipt,
        failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        self.client.require_schema()?;
        let outcome = match conn {
            Some(conn) => {
                tx::run_in::<B, _, _>(conn, |conn, _| {
                    Box::pin(self.fail_on(conn, receipt, failure))
                })
                .await
            }
            None => {
                tx::run(self.client.conns(), self.names().op_fail, |conn, _| {
                    Box::pin(self.fail_on(conn, receipt, failure))
                })
                .await
            }
        };
        let outcome = self.explained(outcome).await?;
        let names = self.names();
        let counter = match (failure, outcome) {
            (_, NackOutcome::DeadLettered) => names.dead_lettered,
            (Failure::Snooze { .. }, _) => names.snoozed,
            _ => names.retried,
        };
        let (key, value) = self.label();
        metrics::counter!(counter.name(), key => value).increment(1);
        Ok(outcome)
    }

    /// The failure itself, in `conn`'s transaction, with the current retry settings.
    async fn fail_on(
        &self,
        conn: &mut B::Connection,
        receipt: Receipt,
        failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        let (max_attempts, backoff) = self.policy(conn).await?.ok_or_else(|| self.unknown())?;
        let policy = RetryPolicy::of(max_attempts, &backoff);
        let decide = |attempts| decide(failure, attempts, policy);
        let store = self.client.store();
        match self.id {
            SourceId::Queue(q) => store.fail_queue(conn, q, &receipt, &decide).await,
            SourceId::Group(g) => store.fail_group(conn, g, &receipt, &decide).await,
        }
    }

    /// Extend a live lease to `lease` from now.
    pub(crate) async fn extend(&self, receipt: Receipt, lease: Duration) -> Result<()> {
        let held = self.extend_each(&[receipt], lease).await?;
        if held[0] {
            Ok(())
        } else {
            self.explained(Err(Error::LeaseLost {
                id: receipt.id,
                token: receipt.token,
            }))
            .await
        }
    }

    /// Extend each live lease of `receipts` to `lease` from now, all in one transaction (a
    /// batch's leases pay one commit, not one each); answers, in the receipts' order, whether
    /// each lease was still held.
    pub(crate) async fn extend_each(
        &self,
        receipts: &[Receipt],
        lease: Duration,
    ) -> Result<Vec<bool>> {
        check_lease(lease)?;
        self.client.require_schema()?;
        if receipts.is_empty() {
            // Everything settled since the caller looked (a batch's commit): no transaction.
            return Ok(Vec::new());
        }
        let (store, id) = (self.client.store(), self.id);
        // Lock in id order, the order of the acks' locking reads: a batch ack and this
        // extension over the same leases wait for each other instead of deadlocking.
        let mut order: Vec<usize> = (0..receipts.len()).collect();
        order.sort_unstable_by_key(|&i| receipts[i].id);
        let order = &order;
        let held = tx::run(self.client.conns(), self.names().op_extend, |conn, _| {
            Box::pin(async move {
                let mut held = vec![false; receipts.len()];
                for &i in order {
                    let receipt = &receipts[i];
                    held[i] = match id {
                        SourceId::Queue(q) => store.extend_queue(conn, q, receipt, lease).await?,
                        SourceId::Group(g) => store.extend_group(conn, g, receipt, lease).await?,
                    };
                }
                Ok(held)
            })
        })
        .await?;
        let (key, value) = self.label();
        metrics::counter!(catalogue::LEASE_EXTENSIONS.name(), key => value)
            .increment(receipts.len() as u64);
        Ok(held)
    }

    /// Release up to `limit` expired leases in one transaction: due again at once, or dead on
    /// their last attempt.
    pub(crate) async fn release_expired(&self, limit: usize) -> Result<Released> {
        let (store, id) = (self.client.store(), self.id);
        let released = tx::run(self.client.conns(), "release_expired", |conn, _| {
            Box::pin(async move {
                let Some((max_attempts, backoff)) = self.policy(conn).await? else {
                    return Ok(Released::default());
                };
                let policy = RetryPolicy::of(max_attempts, &backoff);
                let decide = |attempts| decide(Failure::Expired, attempts, policy);
                match id {
                    SourceId::Queue(q) => {
                        store.release_queue_expired(conn, q, limit, &decide).await
                    }
                    SourceId::Group(g) => {
                        store.release_group_expired(conn, g, limit, &decide).await
                    }
                }
            })
        })
        .await?;
        if released.released + released.dead_lettered > 0 {
            let names = self.names();
            let (key, value) = self.label();
            metrics::counter!(catalogue::LEASES_EXPIRED.name(), key => value.clone())
                .increment(released.released as u64);
            metrics::counter!(names.dead_lettered.name(), key => value)
                .increment(released.dead_lettered as u64);
        }
        Ok(released)
    }

    /// Release every lease `owner` holds (a process that died or left), in transactions of at
    /// most `batch` leases: due again at once, or dead on their last attempt. A source deleted
    /// meanwhile took its leases with it. Returns how many were released.
    pub(crate) async fn release_owned(
        &self,
        owner: &str,
        reason: &str,
        batch: usize,
    ) -> Result<usize> {
        let (store, id) = (self.client.store(), self.id);
        let mut total = 0;
        loop {
            let released = tx::run(self.client.conns(), "release_owned", |conn, _| {
                Box::pin(async move {
                    let Some((max_attempts, backoff)) = self.policy(conn).await? else {
                        return Ok(Released::default());
                    };
                    let policy = RetryPolicy::of(max_attempts, &backoff);
                    let failure = Failure::Released { reason };
                    let decide = |attempts| decide(failure, attempts, policy);
                    match id {
                        SourceId::Queue(q) => {
                            store
                                .release_queue_owned(conn, q, owner, batch, &decide)
                                .await
                        }
                        SourceId::Group(g) => {
                            store
                                .release_group_owned(conn, g, owner, batch, &decide)
                                .await
                        }
                    }
                })
            })
            .await?;
            let n = released.released + released.dead_lettered;
            total += n;
            if n < batch {
                return Ok(total);
            }
        }
    }
}

// On SQLite: nothing to set up.
#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::time::{Duration, SystemTime};

    use crate::domain::MessageState;
    use crate::{Client, Message, QueueConfig};

    /// One transaction extends a batch's leases: each live lease moves and answers held, one
    /// acked meanwhile answers lost, in the receipts' order whatever their ids' order.
    #[tokio::test]
    async fn extends_each_live_lease_and_reports_the_others() {
        let file =
            std::env::temp_dir().join(format!("sqlmq-extend-{}.db", crate::MessageId::new()));
        let client = Client::<crate::Sqlite>::open(&format!("sqlite://{}", file.display()))
            .await
            .unwrap();
        client.migrate().await.unwrap();
        let q = client
            .create_queue("q", QueueConfig::default())
            .await
            .unwrap();
        for i in 0..3 {
            q.send(Message::new(format!("m{i}"))).await.unwrap();
        }
        let mut held = q.receive(3, Duration::from_secs(2)).await.unwrap();
        assert_eq!(held.len(), 3);
        held.reverse();
        q.ack(held[0].receipt()).await.unwrap();
        let receipts: Vec<_> = held.iter().map(|d| d.receipt()).collect();

        let live = q
            .consumer()
            .extend_each(&receipts, Duration::from_secs(600))
            .await
            .unwrap();
        assert_eq!(live, [false, true, true]);
        let in_flight = q.browse(MessageState::InFlight, None, 10).await.unwrap();
        assert_eq!(in_flight.messages.len(), 2);
        let soon = SystemTime::now() + Duration::from_secs(60);
        for m in &in_flight.messages {
            assert!(m.lease_until.unwrap() > soon, "extended: {m:?}");
        }
        client.pool().close().await;
        let _ = std::fs::remove_file(&file);
    }
}
