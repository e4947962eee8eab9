//! Consuming: claim, then settle each claim with ack, nack or extend.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::MySqlConnection;

use super::Queue;
use crate::consume::{RetryPolicy, decide};
use crate::domain::AckReport;
use crate::domain::Failure;
use crate::domain::NackOutcome;
use crate::domain::{Delivery, MessageId, Receipt};
use crate::domain::{Error, Result};
use crate::tx;

/// Most messages one `receive` may claim.
pub const MAX_RECEIVE: usize = 1000;
/// Longest lease one claim or extension may take.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

pub(crate) fn check_lease(lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) || lease > MAX_LEASE {
        return Err(Error::InvalidArgument(format!(
            "lease {lease:?} is not between 1 ms and 24 h"
        )));
    }
    Ok(())
}

/// The outcome of acking `total` receipts of which `lost` had lost their lease, counted in
/// `acked_counter` and `sqlmq_leases_lost_total` under the label `key => value`.
pub(crate) fn counted_acks(
    total: usize,
    lost: Vec<Receipt>,
    acked_counter: &'static str,
    (key, value): (&'static str, String),
) -> AckReport {
    let acked = total - lost.len();
    metrics::counter!(acked_counter, key => value.clone()).increment(acked as u64);
    if !lost.is_empty() {
        metrics::counter!("sqlmq_leases_lost_total", key => value).increment(lost.len() as u64);
    }
    AckReport { acked, lost }
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

impl Queue {
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
        if n == 0 || n > MAX_RECEIVE {
            return Err(Error::InvalidArgument(format!(
                "n must be 1..={MAX_RECEIVE}, got {n}"
            )));
        }
        check_lease(lease)?;
        self.client.require_schema()?;
        self.housekeeping_if_due().await?;
        self.claim(n, lease).await
    }

    /// The claim itself, without housekeeping (the worker runs maintenance as a service).
    pub(crate) async fn claim(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        let started = Instant::now();
        let store = self.store();
        let owner = self.client.owner_id();
        let claimed = tx::run(self.pool(), "claim", |conn, _| {
            Box::pin(store.claim(conn, self.id(), n, lease, owner))
        })
        .await?;
        let queue = self.name().to_owned();
        metrics::histogram!("sqlmq_claim_seconds", "queue" => queue.clone())
            .record(started.elapsed().as_secs_f64());
        metrics::counter!("sqlmq_messages_claimed_total", "queue" => queue)
            .increment(claimed.len() as u64);
        Ok(claimed)
    }

    /// Ack: the message is done and deleted. Fails with [`Error::LeaseLost`] (and changes
    /// nothing) when the receipt no longer holds the lease.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// q.ack(d.receipt()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack(&self, receipt: Receipt) -> Result<()> {
        lost_to_error(self.ack_batch(&[receipt]).await?)
    }

    /// Ack many receipts in one transaction. Receipts that no longer hold their lease are
    /// reported in [`AckReport::lost`]; the others are acked.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let batch = q.receive(100, std::time::Duration::from_secs(30)).await?;
    /// let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
    /// q.ack_batch(&receipts).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_batch(&self, receipts: &[Receipt]) -> Result<AckReport> {
        if receipts.is_empty() {
            return Ok(AckReport::default());
        }
        self.client.require_schema()?;
        let store = self.store();
        // Ids the last attempt acked, for resolving a COMMIT with unknown outcome: the acked
        // messages' rows are gone iff it committed.
        let acked_ids: Mutex<Vec<MessageId>> = Mutex::default();
        let acked_ids = &acked_ids;
        let lost = tx::run_resolving(
            self.pool(),
            "ack",
            |conn, _| {
                Box::pin(async move {
                    let lost = store.ack(conn, self.id(), receipts).await?;
                    let mut ids = acked_ids.lock().expect("poisoned");
                    *ids = receipts
                        .iter()
                        .filter(|r| !lost.contains(r))
                        .map(|r| r.id)
                        .collect();
                    Ok(lost)
                })
            },
            |conn, _| {
                Box::pin(async move {
                    let ids = acked_ids.lock().expect("poisoned").clone();
                    Ok(ids.is_empty() || !store.any_message_exists(conn, &ids).await?)
                })
            },
        )
        .await?;
        Ok(self.record_acks(receipts.len(), lost))
    }

    /// Ack inside the caller's transaction: the ack commits with the handler's own writes, or
    /// neither does (exactly-once effects). On [`Error::LeaseLost`], roll the transaction back:
    /// another consumer owns the message and will apply its effects.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("UPDATE accounts SET balance = balance - 10 WHERE id = 7").execute(&mut *tx).await?;
    /// match q.ack_in(&mut tx, d.receipt()).await {
    ///     Ok(()) => tx.commit().await?,
    ///     Err(e) => { tx.rollback().await?; return Err(e.into()) }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ack_in(&self, conn: &mut MySqlConnection, receipt: Receipt) -> Result<()> {
        self.client.require_schema()?;
        let store = self.store();
        let receipts = [receipt];
        let receipts = &receipts;
        let lost = tx::run_in(conn, |conn, _| {
            Box::pin(store.ack(conn, self.id(), receipts))
        })
        .await?;
        lost_to_error(self.record_acks(1, lost))
    }

    fn record_acks(&self, total: usize, lost: Vec<Receipt>) -> AckReport {
        let label = ("queue", self.name().to_owned());
        counted_acks(total, lost, "sqlmq_messages_acked_total", label)
    }

    /// Nack: record `error` in the message's history and retry it after `retry_in` (or the
    /// queue's backoff when `None`), or dead-letter it when this was its last attempt.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// q.nack(d.receipt(), Some(std::time::Duration::from_secs(5)), "upstream 503").await?;
    /// # Ok(()) }
    /// ```
    pub async fn nack(
        &self,
        receipt: Receipt,
        retry_in: Option<Duration>,
        error: &str,
    ) -> Result<NackOutcome> {
        let unit: f64 = rand::random();
        self.fail(
            receipt,
            Failure::Retry {
                after: retry_in,
                error,
                unit,
            },
        )
        .await
    }

    /// Nack inside the caller's transaction (see [`Queue::ack_in`]).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("INSERT INTO failures (msg) VALUES (?)").bind(d.id.to_string()).execute(&mut *tx).await?;
    /// q.nack_in(&mut tx, d.receipt(), None, "validation failed").await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn nack_in(
        &self,
        conn: &mut MySqlConnection,
        receipt: Receipt,
        retry_in: Option<Duration>,
        error: &str,
    ) -> Result<NackOutcome> {
        let unit: f64 = rand::random();
        self.fail_in(
            conn,
            receipt,
            Failure::Retry {
                after: retry_in,
                error,
                unit,
            },
        )
        .await
    }

    /// Postpone a claimed message by `after` without counting the attempt as a failure (it is
    /// not recorded in the error history and does not bring it closer to the dead letters).
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// // the resource is busy: look again in a minute
    /// q.snooze(d.receipt(), std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn snooze(&self, receipt: Receipt, after: Duration) -> Result<()> {
        self.fail(receipt, Failure::Snooze { after })
            .await
            .map(drop)
    }

    /// Snooze inside the caller's transaction (see [`Queue::snooze`]).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// q.snooze_in(&mut tx, d.receipt(), std::time::Duration::from_secs(60)).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn snooze_in(
        &self,
        conn: &mut MySqlConnection,
        receipt: Receipt,
        after: Duration,
    ) -> Result<()> {
        self.fail_in(conn, receipt, Failure::Snooze { after })
            .await
            .map(drop)
    }

    /// Dead-letter a claimed message now, whatever its attempts left (a permanent failure),
    /// recording `error` in its history.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// q.dead_letter(d.receipt(), "unknown customer: will never succeed").await?;
    /// # Ok(()) }
    /// ```
    pub async fn dead_letter(&self, receipt: Receipt, error: &str) -> Result<()> {
        self.fail(receipt, Failure::DeadLetter { error })
            .await
            .map(drop)
    }

    /// Dead-letter inside the caller's transaction (see [`Queue::dead_letter`]).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// q.dead_letter_in(&mut tx, d.receipt(), "rejected").await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn dead_letter_in(
        &self,
        conn: &mut MySqlConnection,
        receipt: Receipt,
        error: &str,
    ) -> Result<()> {
        self.fail_in(conn, receipt, Failure::DeadLetter { error })
            .await
            .map(drop)
    }

    async fn fail(&self, receipt: Receipt, failure: Failure<'_>) -> Result<NackOutcome> {
        self.client.require_schema()?;
        let outcome = tx::run(self.pool(), "nack", |conn, _| {
            Box::pin(self.fail_on(conn, receipt, failure))
        })
        .await?;
        self.record_failure(failure, outcome);
        Ok(outcome)
    }

    async fn fail_in(
        &self,
        conn: &mut MySqlConnection,
        receipt: Receipt,
        failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        self.client.require_schema()?;
        let outcome = tx::run_in(conn, |conn, _| {
            Box::pin(self.fail_on(conn, receipt, failure))
        })
        .await?;
        self.record_failure(failure, outcome);
        Ok(outcome)
    }

    /// The failure itself, in `conn`'s transaction, with the queue's current configuration.
    async fn fail_on(
        &self,
        conn: &mut MySqlConnection,
        receipt: Receipt,
        failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        let row = self.row(conn).await?;
        let policy = RetryPolicy::of(row.config.max_attempts, &row.config.backoff);
        let decide = |attempts| decide(failure, attempts, policy);
        self.store().fail(conn, row.id, &receipt, &decide).await
    }

    fn record_failure(&self, failure: Failure<'_>, outcome: NackOutcome) {
        let queue = self.name().to_owned();
        let counter = match (failure, outcome) {
            (_, NackOutcome::DeadLettered) => "sqlmq_messages_dead_lettered_total",
            (Failure::Snooze { .. }, _) => "sqlmq_messages_snoozed_total",
            _ => "sqlmq_messages_retried_total",
        };
        metrics::counter!(counter, "queue" => queue).increment(1);
    }

    /// Extend a lease to `lease` from now (same token). Fails with [`Error::LeaseLost`] when the
    /// lease already ended or was taken over.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// q.extend(d.receipt(), std::time::Duration::from_secs(120)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, receipt: Receipt, lease: Duration) -> Result<()> {
        check_lease(lease)?;
        self.client.require_schema()?;
        let store = self.store();
        let held = tx::run(self.pool(), "extend", |conn, _| {
            Box::pin(store.extend(conn, self.id(), &receipt, lease))
        })
        .await?;
        metrics::counter!("sqlmq_lease_extensions_total", "queue" => self.name().to_owned())
            .increment(1);
        if held {
            Ok(())
        } else {
            Err(Error::LeaseLost {
                id: receipt.id,
                token: receipt.token,
            })
        }
    }
}
