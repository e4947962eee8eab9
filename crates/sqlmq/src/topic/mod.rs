//! Topics: partitioned, append-only streams that many consumer groups read, each at its own
//! pace.
//!
//! [`Topic::publish`] appends a [`Record`] to a partition (by its key, [`partition_for_key`]);
//! every record gets a gap-free offset in its partition once committed ([`Published`]). A
//! consumer group reads the whole topic: in cluster mode ([`Group`]) its members share the
//! records, each leased to one, with acks, retries and dead letters as a queue has; in
//! broadcast mode ([`BroadcastReader`]) every member reads everything and keeps a checkpoint.
//! [`TopicConfig`] and [`GroupConfig`] hold the settings, [`StartAt`] where a new group begins,
//! [`GroupLag`] how far behind it is.
//!
//! ```no_run
//! use std::time::Duration;
//! use sqlmq::topic::StartAt;
//! use sqlmq::{GroupConfig, Record, TopicConfig};
//!
//! # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
//! let orders = client.create_topic("orders", TopicConfig::default()).await?;
//! let billing = orders.create_group("billing", GroupConfig::default(), StartAt::Earliest).await?;
//! orders.publish(Record::new("order 7 placed").key("customer-3")).await?;
//! for delivery in billing.receive(10, Duration::from_secs(30)).await? {
//!     billing.ack(delivery.receipt()).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! ## Inside
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Topic`] handle, publishing, group lookup |
//! | `sequencer.rs` | running sequencing steps (offsets are given after commit) |
//! | `group.rs` | [`Group`]: cluster-mode receive, ack, nack, extend |
//! | `claim.rs` | the cluster-group claim: retries, cursors, strict order, retention floors |
//! | `group_admin.rs` | dead letters, retries, reset, replay, maintenance, consume timeouts |
//! | `broadcast.rs` | [`BroadcastReader`]: broadcast members and their checkpoints |
//! | `members.rs` | broadcast members' dead letters |
//! | `inspect.rs` | queries by offset, key and time, and [`Trace`](crate::inspect::Trace) |
//! | `lag.rs` | a group's lag and the topics' volume ranking |
//! | `manage.rs` | deleting topics and groups; partitions |
//! | `retention.rs` | removing old records in small chunks |

mod broadcast;
pub(crate) mod claim;
mod group;
mod group_admin;
mod inspect;
mod lag;
mod lookups;
mod manage;
mod members;
mod position;
mod rate;
mod retention;
mod sequencer;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

pub use crate::domain::{
    GroupConfig, GroupLag, GroupMode, MemberLag, PartitionInfo, PartitionLag, PendingRetry,
    Published, Record, StartAt, StreamRecord, TopicConfig, TopicStats, default_group_ladder,
    partition_for_key,
};
pub use broadcast::BroadcastReader;
pub use group::Group;
pub(crate) use sequencer::sequence_partitions;

use crate::client::{Client, Subject};
use crate::coalesce::{Coalescer, Sink};
use crate::domain::{Error, MessageId, Result, validate_name};
use crate::store::Backend;
use crate::store::rows::{PendingBatch, PendingRow};
use crate::store::statements::{MAX_LIST, run_within};
use crate::telemetry;
use crate::tx;
use tracing::Instrument;

/// A handle to one topic. Cheap to clone.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let orders = client.create_topic("orders", sqlmq::TopicConfig::default().partitions(4)).await?;
/// orders.publish(sqlmq::Record::new("order 1 paid").key("customer-7")).await?;
/// # Ok(()) }
/// ```
pub struct Topic<B: Backend = crate::DefaultBackend> {
    pub(crate) client: Client<B>,
    pub(crate) inner: Arc<Handle<B>>,
}

pub(crate) struct Handle<B: Backend> {
    pub id: i32,
    pub name: String,
    pub config: TopicConfig,
    /// Started by the first `publish` (it needs a runtime), shared by the handle's clones.
    publishes: OnceLock<Coalescer<Topic<B>>>,
}

impl<B: Backend> Clone for Topic<B> {
    fn clone(&self) -> Self {
        Topic {
            client: self.client.clone(),
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Topic<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.inner.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl<B: Backend> Topic<B> {
    pub(crate) fn new(client: Client<B>, id: i32, name: String, config: TopicConfig) -> Topic<B> {
        Topic {
            client,
            inner: Arc::new(Handle {
                id,
                name,
                config,
                publishes: OnceLock::new(),
            }),
        }
    }

    /// This handle's publish coalescer; its task works on a handle of its own, so that it
    /// ends when the last clone of this one is dropped.
    fn coalescer(&self) -> &Coalescer<Topic<B>> {
        self.inner.publishes.get_or_init(|| {
            let own = Topic::new(
                self.client.clone(),
                self.id(),
                self.name().to_owned(),
                self.inner.config.clone(),
            );
            Coalescer::start(own)
        })
    }

    /// The topic's name.
    ///
    /// ```no_run
    /// # fn f(t: sqlmq::Topic) { println!("{}", t.name()); }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The topic's configuration when this handle was taken.
    ///
    /// ```no_run
    /// # fn f(t: sqlmq::Topic) { println!("{} partitions", t.config().partitions); }
    /// ```
    pub fn config(&self) -> &TopicConfig {
        &self.inner.config
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # fn f(t: sqlmq::Topic) { let pool = t.client().pool(); }
    /// ```
    pub fn client(&self) -> &Client<B> {
        &self.client
    }

    pub(crate) fn id(&self) -> i32 {
        self.inner.id
    }

    /// Publish one record. Durable when this returns Ok; its offset is assigned right after
    /// (by a sequencing step, see `docs/design/topics.md`; on SQLite, by the publish itself),
    /// in commit order per partition.
    ///
    /// Publishes made at the same time through this handle or its clones share one
    /// transaction and one commit (as [`Queue::send`](crate::Queue::send) does), each with its
    /// own answer.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let p = t.publish(sqlmq::Record::new("hello").key("k")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish(&self, mut record: Record) -> Result<Published> {
        let span = self.publish_span(std::slice::from_mut(&mut record));
        async move {
            self.check(std::slice::from_ref(&record))?;
            // Concurrent publishes through this handle share a commit (see `coalesce.rs`).
            self.coalescer().write(record).await
        }
        .instrument(span)
        .await
    }

    /// The span of a publish of `records`, whose trace context each record carries from now
    /// on (see `telemetry/mod.rs`).
    fn publish_span(&self, records: &mut [Record]) -> tracing::Span {
        let n = records.len();
        telemetry::send_span(
            self.name(),
            n,
            records.iter_mut().map(|r| (r.id, &mut r.headers)),
        )
    }

    /// Publish a batch atomically: all records are published at commit, or none. Any size;
    /// statements are split under `max_allowed_packet` inside one transaction.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let batch = (0..100).map(|i| sqlmq::Record::new(format!("{i}"))).collect();
    /// t.publish_batch(batch).await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish_batch(&self, mut records: Vec<Record>) -> Result<Vec<Published>> {
        let span = self.publish_span(&mut records);
        async move {
            self.check(&records)?;
            if records.is_empty() {
                return Ok(Vec::new());
            }
            self.publish_checked(&records).await
        }
        .instrument(span)
        .await
    }

    /// Publish `records` (checked already, not empty) atomically in a transaction of our own.
    async fn publish_checked(&self, records: &[Record]) -> Result<Vec<Published>> {
        let store = self.client.store();
        let budget = self.client.inner.settings.statement_budget;
        if let Some(published) = self.publish_one_shot(records, budget).await? {
            self.after_publish(&published);
            return Ok(published);
        }
        // The ids the last attempt wrote (a resent id is known whether or not it committed).
        let written: Mutex<Vec<MessageId>> = Mutex::default();
        let written = &written;
        let published = tx::run_resolving(
            self.client.conns(),
            "publish",
            |conn, _| {
                Box::pin(async move {
                    let published = self.publish_on(conn, records, budget).await?;
                    *written.lock().expect("poisoned") = published
                        .iter()
                        .filter(|p| !p.duplicate)
                        .map(|p| p.id)
                        .collect();
                    Ok(published)
                })
            },
            // A lost connection during COMMIT: the batch committed iff an id it wrote is known
            // (nothing written: the answer is the same either way).
            |conn, _| {
                Box::pin(async move {
                    let written = written.lock().expect("poisoned").clone();
                    if written.is_empty() {
                        return Ok(true);
                    }
                    Ok(!B::known_topic_ids(store, conn, &written).await?.is_empty())
                })
            },
        )
        .await?;
        self.after_publish(&published);
        Ok(published)
    }

    /// Publish one record inside the caller's transaction: it exists when that transaction
    /// commits and never if it rolls back; its offset is assigned after the commit.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, t: sqlmq::Topic) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// sqlx::query("UPDATE orders SET paid = 1 WHERE id = 42").execute(&mut *tx).await?;
    /// t.publish_in(&mut tx, sqlmq::Record::new("order 42 paid").key("42")).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish_in(&self, conn: &mut B::Connection, record: Record) -> Result<Published> {
        let mut published = self.publish_batch_in(conn, vec![record]).await?;
        Ok(published.remove(0))
    }

    /// Publish a batch inside the caller's transaction (see [`Topic::publish_in`]).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, t: sqlmq::Topic) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// t.publish_batch_in(&mut tx, vec![sqlmq::Record::new("a"), sqlmq::Record::new("b")]).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish_batch_in(
        &self,
        conn: &mut B::Connection,
        mut records: Vec<Record>,
    ) -> Result<Vec<Published>> {
        let span = self.publish_span(&mut records);
        async move {
            self.check(&records)?;
            if records.is_empty() {
                return Ok(Vec::new());
            }
            let budget = self.client.inner.settings.statement_budget;
            let records = &records;
            let published = tx::run_in::<B, _, _>(conn, |conn, _| {
                Box::pin(self.publish_on(conn, records, budget))
            })
            .await?;
            let fresh = published.iter().filter(|p| !p.duplicate).count() as u64;
            metrics::counter!(crate::telemetry::catalogue::RECORDS_PUBLISHED.name(), "topic" => self.name().to_owned())
                .increment(fresh);
            Ok(published)
        }
        .instrument(span)
        .await
    }

    pub(crate) fn check(&self, records: &[Record]) -> Result<()> {
        self.client.require_schema()?;
        let limit = self.client.max_payload_bytes();
        records
            .iter()
            .try_for_each(|r| r.validate(self.inner.config.partitions, limit))
    }

    /// Write the pending rows of `records` that are not published yet.
    async fn publish_on(
        &self,
        conn: &mut B::Connection,
        records: &[Record],
        budget: usize,
    ) -> Result<Vec<Published>> {
        let store = self.client.store();
        let ids: Vec<MessageId> = records.iter().map(|r| r.id).collect();
        let known = B::known_topic_ids(store, conn, &ids).await?;
        let (mut out, rows) = self.pending_rows(records, &known)?;
        let mut start = 0;
        while start < rows.len() {
            // As many records as one statement's byte budget allows (at least one).
            let end = run_within(start, rows.len(), MAX_LIST, budget, |i| rows[i].bytes());
            let batch = PendingBatch {
                topic_id: self.id(),
                rows: &rows[start..end],
            };
            match B::insert_pending(store, conn, &batch).await {
                Ok(()) => start = end,
                // A concurrent publish of the same id won the race: this one is a duplicate.
                Err(e) if e.is_duplicate_key() && records.len() == 1 => {
                    out[0].duplicate = true;
                    return Ok(out);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Each record's answer, and the rows of those to write: a record is a duplicate when its
    /// id is `known` (published already) or repeats an earlier one of `records`.
    fn pending_rows<'r>(
        &self,
        records: &'r [Record],
        known: &HashSet<MessageId>,
    ) -> Result<(Vec<Published>, Vec<PendingRow<'r>>)> {
        let partitions = self.inner.config.partitions;
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(records.len());
        let mut rows = Vec::with_capacity(records.len());
        for r in records {
            let partition = r.partition_of(partitions);
            let duplicate = known.contains(&r.id) || !seen.insert(r.id);
            out.push(Published {
                id: r.id,
                partition,
                duplicate,
            });
            if !duplicate {
                let headers = (!r.headers.is_empty())
                    .then(|| serde_json::to_string(&r.headers))
                    .transpose()?;
                rows.push(PendingRow {
                    partition: partition as i32,
                    id: r.id,
                    key: r.key.as_deref().map(str::as_bytes),
                    headers,
                    body: &r.body,
                });
            }
        }
        Ok((out, rows))
    }

    /// Publish `records` in one self-committing round trip where the backend can (see
    /// `store/mysql/publish_script.rs`). `None`: they need the full publish — they do not
    /// qualify (an id repeated among them, too many bytes), or one was published already (a
    /// resend, whose answer the full publish knows).
    async fn publish_one_shot(
        &self,
        records: &[Record],
        budget: usize,
    ) -> Result<Option<Vec<Published>>> {
        if !B::PUBLISH_SCRIPTS {
            return Ok(None);
        }
        let store = self.client.store();
        let (published, rows) = self.pending_rows(records, &HashSet::new())?;
        if rows.len() != records.len() {
            return Ok(None);
        }
        let batch = PendingBatch {
            topic_id: self.id(),
            rows: &rows,
        };
        let Some(script) = B::prepare_publish_script(store, &batch, budget)? else {
            return Ok(None);
        };
        let script = &script;
        let ids: Vec<MessageId> = records.iter().map(|r| r.id).collect();
        let ids = &ids;
        let written = tx::run_own_resolving(
            self.client.conns(),
            "publish",
            |conn, _| Box::pin(async move { B::publish_script(store, conn, script).await }),
            // A lost connection during the script: it wrote every record or none (one
            // published already fails it whole). All known: it committed (or they were all
            // resent, which the full publish would answer alike but for the duplicate flag).
            // None: it did not. Some: the full publish sorts them out.
            |conn, _| {
                Box::pin(async move {
                    let known = B::known_topic_ids(store, conn, ids).await?.len();
                    Ok(match known {
                        0 => None,
                        n if n == ids.len() => Some(true),
                        _ => Some(false),
                    })
                })
            },
        )
        .await?;
        Ok(written.then_some(published))
    }

    /// Count, and wake the local sequencers of the partitions written to (or, where the
    /// publish gave the offsets, the local members waiting for records).
    fn after_publish(&self, published: &[Published]) {
        let partitions: Vec<u32> = published
            .iter()
            .filter(|p| !p.duplicate)
            .map(|p| p.partition)
            .collect();
        metrics::counter!(crate::telemetry::catalogue::RECORDS_PUBLISHED.name(), "topic" => self.name().to_owned())
            .increment(partitions.len() as u64);
        self.wake_after_commit(partitions);
    }

    /// After a commit that published into `partitions`: give the records their offsets soon
    /// (where they wait for them), and wake local consumers.
    pub(crate) fn wake_after_commit(&self, mut partitions: Vec<u32>) {
        if B::OFFSETS_AT_PUBLISH {
            if !partitions.is_empty() {
                self.client.notify_local(Subject::Topic(self.id()));
            }
            return;
        }
        partitions.sort_unstable();
        partitions.dedup();
        self.client
            .sequence_soon(self.id(), partitions.into_iter().map(|p| p as i32));
    }

    /// Create a consumer group starting at `start`, or update an existing group's retry
    /// settings (its position is kept; its mode cannot change).
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let g = t.create_group("billing", sqlmq::GroupConfig::default().max_attempts(5), sqlmq::topic::StartAt::Earliest).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_group(
        &self,
        name: &str,
        config: GroupConfig,
        start: StartAt,
    ) -> Result<Group<B>> {
        validate_name("group", name)?;
        config.validate()?;
        self.client.require_schema()?;
        let store = self.client.store();
        let (config, topic_id) = (&config, self.id());
        let row = tx::run(self.client.conns(), "create_group", |conn, _| {
            Box::pin(async move {
                let (row, created) = store.create_group(conn, topic_id, name, config).await?;
                if created {
                    position::move_cursors::<B>(store, conn, topic_id, row.id, start).await?;
                }
                Ok(row)
            })
        })
        .await?;
        if row.config.mode != config.mode {
            return Err(Error::InvalidArgument(format!(
                "group {name} of topic {} exists as a {} group",
                self.name(),
                row.config.mode
            )));
        }
        Ok(Group::new(self.clone(), row))
    }

    /// A handle to an existing group.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let g = t.group("billing").await?;
    /// # Ok(()) }
    /// ```
    pub async fn group(&self, name: &str) -> Result<Group<B>> {
        validate_name("group", name)?;
        self.client.require_schema()?;
        let mut conn = self.client.conns().read().await?;
        match self
            .client
            .inner
            .db
            .store
            .group_by_name(&mut conn, self.id(), name)
            .await?
        {
            Some(row) => Ok(Group::new(self.clone(), row)),
            None => Err(Error::UnknownGroup {
                topic: self.name().to_owned(),
                group: name.to_owned(),
            }),
        }
    }

    /// Every group of the topic, by name.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// for g in t.groups().await? { println!("{} ({})", g.name(), g.config().mode) }
    /// # Ok(()) }
    /// ```
    pub async fn groups(&self) -> Result<Vec<Group<B>>> {
        self.client.require_schema()?;
        let mut conn = self.client.conns().read().await?;
        let rows = self
            .client
            .inner
            .db
            .store
            .groups_of_topic(&mut conn, self.id())
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| Group::new(self.clone(), r))
            .collect())
    }

    /// Give offsets to committed records still waiting for them in any partition (those no
    /// local sequencer was woken for). Returns how many got offsets.
    pub(crate) async fn sequence_pending(&self) -> Result<usize> {
        let pending = {
            let mut conn = self.client.conns().read().await?;
            B::pending_partitions(&self.client.inner.db.store, &mut conn, self.id()).await?
        };
        let partitions: Vec<i32> = pending.into_keys().collect();
        sequence_partitions(&self.client, self.id(), &partitions).await
    }

    /// The partition count as stored now (it may have grown since this handle was taken).
    pub(crate) async fn current_partitions(&self) -> Result<u32> {
        let mut conn = self.client.conns().read().await?;
        Ok(self
            .client
            .inner
            .db
            .store
            .topic_by_id(&mut conn, self.id())
            .await?
            .map_or(self.config().partitions, |t| t.config.partitions))
    }

    /// Sequence whatever is pending in every partition now (normally done on its own: after
    /// local publishes, and by readers). Returns how many records got offsets.
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// t.sequence().await?;
    /// # Ok(()) }
    /// ```
    pub async fn sequence(&self) -> Result<usize> {
        let partitions: Vec<i32> = (0..self.inner.config.partitions as i32).collect();
        sequence_partitions(&self.client, self.id(), &partitions).await
    }
}

impl<B: Backend> Sink for Topic<B> {
    type Item = Record;
    type Answer = Published;

    async fn write(&self, records: &[Record]) -> Result<Vec<Published>> {
        self.publish_checked(records).await
    }
}
