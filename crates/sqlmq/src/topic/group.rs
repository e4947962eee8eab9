//! [`Group`]: a consumer group of a topic, and consuming in cluster mode.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Topic;
use super::claim::{GroupClaim, GroupClaimRequest};
use super::rate::Gate;
use crate::client::{Maintain, Subject, Watched};
use crate::consume::SourceId;
use crate::consume::methods::consume_methods;
use crate::consume::{Consumer, check_claim};
use crate::domain::{Delivery, Receipt};
use crate::domain::{Error, Result};
use crate::domain::{GroupConfig, GroupMode};
use crate::store::Backend;
use crate::store::rows::GroupRow;
use crate::telemetry;
use crate::tx;

/// A handle to one consumer group of a topic. Cheap to clone.
///
/// In cluster mode, members call [`Group::receive`] and settle each delivery like a queue
/// message (`ack`, `ack_batch`, `nack`, `snooze`, `dead_letter`, `extend`, and the `_in` forms
/// inside their own transaction); in broadcast mode, each member reads with its own
/// [`BroadcastReader`](super::BroadcastReader).
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// use std::time::Duration;
/// let orders = client.topic("orders").await?;
/// let billing = orders.create_group("billing", sqlmq::GroupConfig::default(), sqlmq::topic::StartAt::Earliest).await?;
/// for d in billing.receive(10, Duration::from_secs(30)).await? {
///     println!("partition {:?} offset {:?}", d.partition, d.offset);
///     billing.ack(d.receipt()).await?;
/// }
/// # Ok(()) }
/// ```
pub struct Group<B: Backend = crate::DefaultBackend> {
    pub(crate) topic: Topic<B>,
    pub(crate) inner: Arc<GroupInner>,
}

pub(crate) struct GroupInner {
    pub row: GroupRow,
    /// Where the next claim starts looking (spreads claims over partitions).
    next_partition: AtomicU32,
    /// Consume-timeout reports already logged (one warning per delivery).
    pub reported: Mutex<HashSet<Receipt>>,
    /// What this handle knows of the group's rate limit.
    pub(crate) rate: Mutex<super::rate::RateState>,
}

impl<B: Backend> Clone for Group<B> {
    fn clone(&self) -> Self {
        Group {
            topic: self.topic.clone(),
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Group<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("topic", &self.topic.name())
            .field("name", &self.inner.row.name)
            .field("mode", &self.inner.row.config.mode)
            .finish()
    }
}

impl<B: Backend> Group<B> {
    pub(crate) fn new(topic: Topic<B>, row: GroupRow) -> Group<B> {
        Group {
            topic,
            inner: Arc::new(GroupInner {
                next_partition: AtomicU32::new(rand::random::<u32>() % 1024),
                reported: Mutex::default(),
                rate: Mutex::new(super::rate::RateState::new(row.config.rate_limit)),
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
    pub fn topic(&self) -> &Topic<B> {
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

    /// Claim up to `n` (1 to 1000, [`Queue::MAX_RECEIVE`](crate::Queue::MAX_RECEIVE)) records
    /// for `lease` (at most [`Queue::MAX_LEASE`](crate::Queue::MAX_LEASE)): due retries first,
    /// then records not yet handed out, from any partition. Returns at once, empty when there
    /// is nothing. Each delivery carries its partition and offset, and a fencing token.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let batch = g.receive(100, std::time::Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        check_claim(n, lease)?;
        self.require_cluster()?;
        self.topic.client.require_schema()?;
        self.housekeeping_if_due().await?;
        self.claim_or_sequence(n, lease).await
    }

    /// [`receive`](Group::receive), waiting up to `wait` for the first record: a long poll.
    /// Waiting costs the database nothing per caller (one shared probe per client, see
    /// [`Queue::receive_wait`](crate::Queue::receive_wait)); a publish through the same client
    /// answers at once.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// use std::time::Duration;
    /// let batch = g.receive_wait(100, Duration::from_secs(30), Duration::from_secs(20)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn receive_wait(
        &self,
        n: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        check_claim(n, lease)?;
        let key = Watched::Group {
            group: self.id(),
            topic: self.topic.id(),
        };
        let group = self.clone();
        let maintain: Maintain = Arc::new(move || {
            let group = group.clone();
            Box::pin(async move {
                let report = group.maintain().await?;
                Ok(report.sequenced + report.released > 0)
            })
        });
        let client = self.topic.client.clone();
        client
            .wait_in_line(key, maintain, n, wait, || self.receive(n, lease))
            .await
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
        let destination = telemetry::GroupName(self.topic.name(), self.name());
        telemetry::receive(&destination, n, self.claim_untraced(n, lease)).await
    }

    async fn claim_untraced(&self, n: usize, lease: Duration) -> Result<Vec<Delivery>> {
        let started = Instant::now();
        let client = &self.topic.client;
        let limited = self.rate_limited().await?;
        if limited && self.shut() {
            self.consumer().record_claim(started, 0);
            return Ok(Vec::new());
        }
        // One writer at a time: see `Queue::claim`.
        if B::ONE_WRITER && !self.anything_ready().await? {
            self.consumer().record_claim(started, 0);
            return Ok(Vec::new());
        }
        let store = client.store();
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
        let consumer = self.consumer();
        let (claim, shut) = tx::run(client.conns(), consumer.claim_op(), |conn, _| {
            Box::pin(async move {
                if !limited {
                    return Ok((super::claim::claim::<B>(store, conn, request).await?, None));
                }
                match super::rate::gate::<B>(store, conn, request.group_id, request.n).await? {
                    Gate::Open => Ok((super::claim::claim::<B>(store, conn, request).await?, None)),
                    Gate::Shut(d) => Ok((GroupClaim::default(), Some(d))),
                    Gate::Allow { n, now_us } => {
                        let allowed = GroupClaimRequest { n, ..*request };
                        let claim = super::claim::claim::<B>(store, conn, &allowed).await?;
                        if !claim.deliveries.is_empty() {
                            store
                                .record_group_deliveries(
                                    conn,
                                    request.group_id,
                                    now_us,
                                    claim.deliveries.len(),
                                )
                                .await?;
                        }
                        Ok((claim, None))
                    }
                }
            })
        })
        .await?;
        if let Some(d) = shut {
            self.shut_for(d);
        }
        let label = self.label();
        if claim.skipped > 0 {
            tracing::warn!(
                group = label,
                skipped = claim.skipped,
                "records removed by retention before this group consumed them"
            );
            metrics::counter!(crate::telemetry::catalogue::GROUP_SKIPPED_BY_RETENTION.name(), "group" => label.clone())
                .increment(claim.skipped as u64);
        }
        consumer.record_claim(started, claim.deliveries.len());
        Ok(claim.deliveries)
    }

    /// Whether the group has records to hand out now or due retries, by the last committed
    /// state.
    async fn anything_ready(&self) -> Result<bool> {
        let signals = self.topic.client.probe_groups(&[self.id()]).await?;
        Ok(signals.iter().any(|s| s.ready))
    }

    /// The group as the shared consumption path sees it.
    pub(crate) fn consumer(&self) -> Consumer<'_, B> {
        Consumer {
            client: &self.topic.client,
            id: SourceId::Group(self.id()),
            name: self.label(),
        }
    }

    /// Run [`Group::maintain`] if this client has not done so within the housekeeping
    /// interval.
    pub(crate) async fn housekeeping_if_due(&self) -> Result<()> {
        let client = &self.topic.client;
        if client.due(
            Subject::Group(self.id()),
            client.inner.settings.housekeeping_interval,
        ) {
            self.maintain().await?;
        }
        Ok(())
    }
}

consume_methods!(Group, "Group");
