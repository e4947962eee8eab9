//! [`Group`]: a consumer group of a topic, and consuming in cluster mode.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::MySqlConnection;

use super::Topic;
use super::claim::GroupClaimRequest;
use crate::client::Subject;
use crate::consume::{RetryPolicy, decide};
use crate::domain::AckReport;
use crate::domain::Failure;
use crate::domain::NackOutcome;
use crate::domain::{Delivery, MessageId, Receipt};
use crate::domain::{Error, Result};
use crate::domain::{GroupConfig, GroupMode};
use crate::queue::{MAX_RECEIVE, check_lease, lost_to_error};
use crate::store::mysql::groups::GroupRow;
use crate::tx;

/// A handle to one consumer group of a topic. Cheap to clone.
///
/// In cluster mode, members call [`Group::receive`] and settle each delivery like a queue
/// message (`ack`, `nack`, `snooze`, `dead_letter`, `extend`, or the `_in` forms inside their
/// own transaction); in broadcast mode, each member reads with its own
/// [`BroadcastReader`](super::BroadcastReader).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// use std::time::Duration;
/// let orders = client.topic("orders").await?;
/// let billing = orders.create_group("billing", sqlmq::GroupConfig::default(), sqlmq::StartAt::Earliest).await?;
/// for d in billing.receive(10, Duration::from_secs(30)).await? {
///     println!("partition {:?} offset {:?}", d.partition, d.offset);
///     billing.ack(d.receipt()).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Group {
    pub(crate) topic: Topic,
    pub(crate) inner: Arc<GroupInner>,
}

pub(crate) struct GroupInner {
    pub row: GroupRow,
    /// Where the next claim starts looking (spreads claims over partitions).
    next_partition: AtomicU32,
    /// Consume-timeout reports already logged (one warning per delivery).
    pub reported: Mutex<HashSet<Receipt>>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("topic", &self.topic.name())
            .field("name", &self.inner.row.name)
            .field("mode", &self.inner.row.config.mode)
            .finish()
    }
}

impl Group {
    pub(crate) fn new(topic: Topic, row: GroupRow) -> Group {
        Group {
            topic,
            inner: Arc::new(GroupInner {
                next_partition: AtomicU32::new(rand::random::<u32>() % 1024),
                reported: Mutex::default(),
                row,
            }),
        }
    }

    /// The group's name.
    ///
    /// ```no_run
    /// # fn f(g: sqlmq::Group) { println!("{}", g.name()); }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.row.name
    }

    /// The topic it consumes.
    ///
    /// ```no_run
    /// # fn f(g: sqlmq::Group) { println!("{}", g.topic().name()); }
    /// ```
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// The group's settings when this handle was taken.
    ///
    /// ```no_run
    /// # fn f(g: sqlmq::Group) { println!("{:?}", g.config().mode); }
    /// ```
    pub fn config(&self) -> &GroupConfig {
        &self.inner.row.config
    }

    pub(crate) fn id(&self) -> i32 {
        self.inner.row.id
    }

    pub(crate) fn label(&self) -> String {
        format!("{}/{}", self.topic.name(), self.name())
    }

    pub(crate) fn require_cluster(&self) -> Result<()> {
        match self.config().mode {
            GroupMode::Cluster => Ok(()),
            GroupMode::Broadcast => Err(Error::InvalidArgument(format!(
                "group {} is a broadcast group: read it with a BroadcastReader",
                self.label()
            ))),
        }
    }

    /// Claim up to `n` (1 to 1000) records for `lease`: due retries first, then records not
    /// yet handed out, from any partition. Returns at once, empty when there is nothing.
    /// Each delivery carries its partition and offset, and a fencing token.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let batch = g.receive(100, std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        if n == 0 || n > MAX_RECEIVE {
            return Err(Error::InvalidArgument(format!(
                "n must be 1..={MAX_RECEIVE}, got {n}"
            )));
        }
        check_lease(lease)?;
        self.require_cluster()?;
        self.topic.client.require_schema()?;
        self.housekeeping_if_due().await?;
        self.claim_or_sequence(n, lease).await
    }

    /// Claim; when there is nothing to hand out, give offsets to records no local sequencer
    /// serves (published in a caller's transaction, or by a process that died before
    /// sequencing) and claim again.
    pub(crate) async fn claim_or_sequence(
        &self,
        n: usize,
        lease: Duration,
    ) -> Result<Vec<Delivery>> {
        let claimed = self.claim(n, lease).await?;
        if claimed.is_empty() && self.topic.sequence_pending().await? > 0 {
            return self.claim(n, lease).await;
        }
        Ok(claimed)
    }

    /// The claim itself (the worker runs maintenance and sequencing as services).
    pub(crate) async fn claim(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        let started = Instant::now();
        let client = &self.topic.client;
        let store = &client.inner.store;
        let owner = client.owner_id();
        let request = GroupClaimRequest {
            group_id: self.id(),
            topic_id: self.topic.id(),
            strict: self.topic.config().strict_order,
            partitions: self.topic.config().partitions,
            start: self.inner.next_partition.fetch_add(1, Ordering::Relaxed) as i32,
            n,
            lease,
            owner,
        };
        let request = &request;
        let claim = tx::run(client.pool(), "group_claim", |conn, _| {
            Box::pin(super::claim::claim(store, conn, request))
        })
        .await?;
        let label = self.label();
        if claim.skipped > 0 {
            tracing::warn!(
                group = label,
                skipped = claim.skipped,
                "records removed by retention before this group consumed them"
            );
            metrics::counter!("sqlmq_group_skipped_by_retention_total", "group" => label.clone())
                .increment(claim.skipped as u64);
        }
        metrics::histogram!("sqlmq_claim_seconds", "group" => label.clone())
            .record(started.elapsed().as_secs_f64());
        metrics::counter!("sqlmq_records_claimed_total", "group" => label)
            .increment(claim.deliveries.len() as u64);
        Ok(claim.deliveries)
    }

    /// Ack one delivery. Fails with [`Error::LeaseLost`] (changing nothing) when the receipt no
    /// longer holds its lease.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// g.ack(d.receipt()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack(&self, receipt: Receipt) -> Result<()> {
        lost_to_error(self.ack_batch(&[receipt]).await?)
    }

    /// Ack many deliveries in one transaction; receipts that lost their lease are reported.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let batch = g.receive(100, std::time::Duration::from_secs(30)).await?;
    /// let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
    /// g.ack_batch(&receipts).await?;
    /// # Ok(()) }
    /// ```
    pub async fn ack_batch(&self, receipts: &[Receipt]) -> Result<AckReport> {
        if receipts.is_empty() {
            return Ok(AckReport::default());
        }
        self.topic.client.require_schema()?;
        let store = &self.topic.client.inner.store;
        let group_id = self.id();
        let acked: Mutex<Vec<MessageId>> = Mutex::default();
        let acked = &acked;
        let lost = tx::run_resolving(
            self.topic.client.pool(),
            "group_ack",
            |conn, _| {
                Box::pin(async move {
                    let lost = store.ack_group(conn, group_id, receipts).await?;
                    *acked.lock().expect("poisoned") = receipts
                        .iter()
                        .filter(|r| !lost.contains(r))
                        .map(|r| r.id)
                        .collect();
                    Ok(lost)
                })
            },
            // A lost connection during COMMIT: it committed iff the acked leases are gone.
            |conn, _| {
                Box::pin(async move {
                    let ids = acked.lock().expect("poisoned").clone();
                    let left = store.lock_group_leases(conn, group_id, &ids).await?;
                    Ok(receipts
                        .iter()
                        .all(|r| left.get(&r.id).is_none_or(|l| l.token as u64 != r.token)))
                })
            },
        )
        .await?;
        Ok(self.record_acks(receipts.len(), lost))
    }

    /// Ack inside the caller's transaction: the ack commits with the handler's own writes or
    /// not at all (exactly-once effects). On [`Error::LeaseLost`], roll back.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, g: sqlmq::Group, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("INSERT INTO invoices (order_id) VALUES (?)").bind(42).execute(&mut *tx).await?;
    /// match g.ack_in(&mut tx, d.receipt()).await {
    ///     Ok(()) => tx.commit().await?,
    ///     Err(e) => { tx.rollback().await?; return Err(e.into()) }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ack_in(&self, conn: &mut MySqlConnection, receipt: Receipt) -> Result<()> {
        self.topic.client.require_schema()?;
        let store = &self.topic.client.inner.store;
        let group_id = self.id();
        let receipts = [receipt];
        let receipts = &receipts;
        let lost = tx::run_in(conn, |conn, _| {
            Box::pin(store.ack_group(conn, group_id, receipts))
        })
        .await?;
        lost_to_error(self.record_acks(1, lost))
    }

    fn record_acks(&self, total: usize, lost: Vec<Receipt>) -> AckReport {
        let label = ("group", self.label());
        crate::queue::counted_acks(total, lost, "sqlmq_records_acked_total", label)
    }

    /// Nack: record `error` and retry after `retry_in` (or the group's ladder step when
    /// `None`), or dead-letter when the attempts are used up.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// g.nack(d.receipt(), None, "downstream 503").await?;
    /// # Ok(()) }
    /// ```
    pub async fn nack(
        &self,
        receipt: Receipt,
        retry_in: Option<Duration>,
        error: &str,
    ) -> Result<NackOutcome> {
        let failure = Failure::Retry {
            after: retry_in,
            error,
            unit: rand::random(),
        };
        self.fail(None, receipt, failure).await
    }

    /// Nack inside the caller's transaction (see [`Group::ack_in`]).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, g: sqlmq::Group, d: sqlmq::Delivery) -> anyhow::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// g.nack_in(&mut tx, d.receipt(), None, "invalid").await?;
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
        let failure = Failure::Retry {
            after: retry_in,
            error,
            unit: rand::random(),
        };
        self.fail(Some(conn), receipt, failure).await
    }

    /// Deliver again after `after` without counting a failed attempt.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// g.snooze(d.receipt(), std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn snooze(&self, receipt: Receipt, after: Duration) -> Result<()> {
        self.fail(None, receipt, Failure::Snooze { after })
            .await
            .map(drop)
    }

    /// Dead-letter now, whatever the attempts left.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// g.dead_letter(d.receipt(), "malformed record").await?;
    /// # Ok(()) }
    /// ```
    pub async fn dead_letter(&self, receipt: Receipt, error: &str) -> Result<()> {
        self.fail(None, receipt, Failure::DeadLetter { error })
            .await
            .map(drop)
    }

    /// End a claim without an ack, in our transaction or the caller's, with the group's
    /// current settings.
    pub(crate) async fn fail(
        &self,
        conn: Option<&mut MySqlConnection>,
        receipt: Receipt,
        failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        self.topic.client.require_schema()?;
        let outcome = match conn {
            Some(conn) => {
                tx::run_in(conn, |conn, _| {
                    Box::pin(self.fail_on(conn, receipt, failure))
                })
                .await?
            }
            None => {
                tx::run(self.topic.client.pool(), "group_nack", |conn, _| {
                    Box::pin(self.fail_on(conn, receipt, failure))
                })
                .await?
            }
        };
        let counter = match (failure, outcome) {
            (_, NackOutcome::DeadLettered) => "sqlmq_records_dead_lettered_total",
            (Failure::Snooze { .. }, _) => "sqlmq_records_snoozed_total",
            _ => "sqlmq_records_retried_total",
        };
        metrics::counter!(counter, "group" => self.label()).increment(1);
        Ok(outcome)
    }

    /// The failure itself, in `conn`'s transaction, with the group's current settings.
    async fn fail_on(
        &self,
        conn: &mut MySqlConnection,
        receipt: Receipt,
        failure: Failure<'_>,
    ) -> Result<NackOutcome> {
        let row = self.current_row(conn).await?;
        let policy = RetryPolicy::of(row.config.max_attempts, &row.config.backoff);
        let decide = |attempts| decide(failure, attempts, policy);
        self.topic
            .client
            .inner
            .store
            .fail_group(conn, row.id, &receipt, &decide)
            .await
    }

    /// The group's row as stored now.
    pub(crate) async fn current_row(&self, conn: &mut MySqlConnection) -> Result<GroupRow> {
        self.topic
            .client
            .inner
            .store
            .group_by_id(conn, self.id())
            .await?
            .ok_or_else(|| Error::UnknownGroup {
                topic: self.topic.name().to_owned(),
                group: self.name().to_owned(),
            })
    }

    /// Extend a live lease to `lease` from now. Fails with [`Error::LeaseLost`] when it ended
    /// or was taken over.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group, d: sqlmq::Delivery) -> sqlmq::Result<()> {
    /// g.extend(d.receipt(), std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, receipt: Receipt, lease: Duration) -> Result<()> {
        check_lease(lease)?;
        self.topic.client.require_schema()?;
        let store = &self.topic.client.inner.store;
        let group_id = self.id();
        let held = tx::run(self.topic.client.pool(), "group_extend", |conn, _| {
            Box::pin(store.extend_group(conn, group_id, &receipt, lease))
        })
        .await?;
        if held {
            Ok(())
        } else {
            Err(Error::LeaseLost {
                id: receipt.id,
                token: receipt.token,
            })
        }
    }

    /// Run [`Group::maintain`] if this client has not done so within the housekeeping
    /// interval.
    pub(crate) async fn housekeeping_if_due(&self) -> Result<()> {
        let inner = &self.topic.client.inner;
        {
            let mut last = inner.housekeeping.lock().expect("poisoned");
            let now = Instant::now();
            let key = Subject::Group(self.id());
            match last.get(&key) {
                Some(t) if now.duration_since(*t) < inner.housekeeping_interval => return Ok(()),
                _ => last.insert(key, now),
            };
        }
        self.maintain().await.map(drop)
    }
}
