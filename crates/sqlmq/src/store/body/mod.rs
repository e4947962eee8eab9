//! The store body: `SqlStore<B>`, the one store type, with every method whose control flow is
//! the same on every backend, implemented once, generic over the backend.
//!
//! A backend supplies what really differs: its statement texts, one table per concept (each
//! file here declares the table it needs, and [`Dialect`] gathers them), the few statements
//! whose shape differs (a hook on [`Dialect`]), and its [`Driver`] facts (results, errors).
//! Where the control flow itself differs — connecting and the server checks, the claim where
//! `SKIP LOCKED` meets one writer, publishing and sequencing, the one-round-trip scripts — the
//! backend implements the traits of `store/` (`Server`, `Claim`, …) in its own folder.
//!
//! | file | what |
//! |---|---|
//! | `db.rs` | what the body needs of a driver: [`Bind`], [`Get`], [`Run`], [`Driver`] |
//! | `queues.rs` | queue rows |
//! | `enqueue.rs` | a send's statements: idempotency keys, message rows, `ready`/`scheduled` |
//! | `fair.rs` | fair queues: their modes, messages' start times, keys' weights and backlogs |
//! | `keys.rs` | per-key FIFO: heads, blocked successors, release, repair |
//! | `slots.rs` | per-key concurrency; the stored key's marks |
//! | `flows.rs` | batches, dependencies, results: kept where messages are sent and end |
//! | `claim.rs` | the claim read's rows as deliveries (the claims are each backend's) |
//! | `settle.rs` | settling a queue's leases: ack, fail, extend, releases; error histories, dead letters |
//! | `maintain.rs` | due messages, old idempotency keys |
//! | `admin.rs` | counts, cancel, purge, key repair |
//! | `dead.rs` | a queue's dead letters: list, redrive |
//! | `browse.rs` | messages by state, one by id or key |
//! | `limits.rs` | a limited queue's gate (most in flight, deliveries per window) |
//! | `probe.rs` | the idle worker's wakeup probes |
//! | `processes.rs` | the process registry |
//! | `schedules.rs` | recurring schedules' rows, the fire's compare-and-set |
//! | `durable.rs` | durable runs' journals, events and their waiters |
//! | `running.rs` | in-flight messages: cancels, progress |
//! | `migrate.rs` | the migration loop's primitives: the version table, the lock, one migration |
//! | `topics.rs` | topic rows and partitions |
//! | `groups.rs` | consumer group rows and cursors |
//! | `stream.rs` | log reads, broadcast positions |
//! | `retention.rs` | removing a partition's oldest records |
//! | `member_dead.rs` | broadcast members' dead letters |
//! | `group_claim.rs` | the cluster claim's reads and writes |
//! | `group_settle.rs` | settling a cluster group's claims |
//! | `group_dead.rs` | a cluster group's dead letters, waiting retries, replays |
//! | `group_state.rs` | where a cluster group stands |

pub(crate) mod admin;
mod browse;
pub(crate) mod claim;
mod db;
mod dead;
pub(crate) mod durable;
pub(crate) mod enqueue;
pub(crate) mod fair;
pub(crate) mod flows;
mod group_claim;
mod group_dead;
mod group_settle;
pub(crate) mod group_state;
mod groups;
pub(crate) mod keys;
pub(crate) mod limits;
mod maintain;
mod member_dead;
mod migrate;
mod probe;
mod processes;
pub(crate) mod queues;
mod retention;
mod running;
mod schedules;
pub(crate) mod settle;
pub(crate) mod slots;
mod stream;
mod topics;

use std::collections::BTreeMap;
use std::marker::PhantomData;

pub use admin::AdminSql;
pub use browse::BrowseSql;
pub(crate) use db::Query;
pub use db::{Bind, Driver, Get, Refusal, Run};
pub use dead::DeadSql;
pub use durable::DurableSql;
pub use enqueue::EnqueueSql;
pub use fair::FairSql;
pub use flows::FlowSql;
pub use group_claim::GroupClaimSql;
pub(crate) use group_claim::{cursor_select, partition_end};
pub use group_dead::GroupDeadSql;
pub use group_settle::{GroupSettleSql, HistoryRow};
pub use group_state::GroupStateSql;
pub use groups::GroupSql;
pub use keys::KeySql;
pub use limits::LimitSql;
pub use maintain::MaintainSql;
pub use member_dead::MemberDeadSql;
pub use migrate::MigrateSql;
#[cfg(test)]
pub(crate) use migrate::checks;
pub use probe::ProbeSql;
pub use processes::ProcessSql;
pub use queues::QueueSql;
pub use retention::RetentionSql;
pub use running::RunningSql;
pub use schedules::ScheduleSql;
pub use settle::{ErrorHistory, SettleSql};
pub use stream::StreamSql;
pub use topics::TopicSql;

use super::statements::{MAX_LIST, Statements, bucket, padded, split_into_buckets};

use crate::domain::{Error, MessageId, Result};

/// A value a statement over a list of ids binds besides them (a group's id), and where.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beside {
    Nothing,
    /// Before the ids: `… WHERE group_id = ? AND id IN ({list})`.
    Before(i32),
    /// After the ids: `… ({ids}) v STRAIGHT_JOIN t ON t.group_id = ? …`.
    After(i32),
}

/// The store of backend `B`: the statement texts expanded for one table prefix. Every store
/// trait is implemented for it, once generically (this folder) or by the backend itself.
pub struct SqlStore<B: Dialect> {
    pub(crate) st: Statements,
    /// The backend's own state, shared by the store's clones (MySQL: which of its
    /// one-statement paths are still open).
    pub(crate) state: std::sync::Arc<B::State>,
    /// Which queues are fair, as last read.
    pub(crate) fair_modes: std::sync::Arc<fair::FairModes>,
    backend: PhantomData<fn() -> B>,
}

impl<B: Dialect> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        SqlStore {
            st: self.st.clone(),
            state: std::sync::Arc::clone(&self.state),
            fair_modes: std::sync::Arc::clone(&self.fair_modes),
            backend: PhantomData,
        }
    }
}

impl<B: Dialect> SqlStore<B> {
    /// The table prefix.
    pub(crate) fn prefix(&self) -> &str {
        self.st.prefix()
    }

    /// The store for tables named with `prefix`.
    pub(crate) fn with_prefix(prefix: &str) -> Self
    where
        B: Driver,
    {
        crate::store::register::<B>();
        SqlStore {
            st: Statements::new(prefix),
            state: std::sync::Arc::default(),
            fair_modes: std::sync::Arc::default(),
            backend: PhantomData,
        }
    }
}

/// What a backend supplies to the body: its statement tables and the statements whose shape
/// differs. A backend implements it in its `mod.rs`, each table coming from the file of its
/// concept.
pub trait Dialect: Driver + Types {
    /// Most bound parameters one statement may carry.
    const MAX_PARAMS: usize;

    /// What the backend keeps beside its statements, for the store and its clones (`()` when
    /// nothing).
    type State: Default + std::fmt::Debug + Send + Sync + 'static;

    /// Queue rows.
    const QUEUES: QueueSql;
    /// Enqueue.
    const ENQUEUE: EnqueueSql;
    /// The key protocol (strict per-key FIFO).
    const KEYS: KeySql;
    /// Settling a queue's leases.
    const SETTLE: SettleSql;
    /// Time-driven moves.
    const MAINTAIN: MaintainSql;
    /// Operator statements.
    const ADMIN: AdminSql;
    /// A queue's dead letters.
    const DEAD: DeadSql;
    /// Looking at a queue's messages.
    const BROWSE: BrowseSql;
    /// A limited queue's gate.
    const LIMITS: LimitSql;
    /// The wakeup probes.
    const PROBE: ProbeSql;
    /// The process registry.
    const PROCESSES: ProcessSql;
    /// Recurring schedules.
    const SCHEDULES: ScheduleSql;
    /// Batches, dependencies, results.
    const FLOWS: FlowSql;
    /// The migrations.
    const MIGRATE: MigrateSql;
    /// Durable runs' journals and events.
    const DURABLE: DurableSql;
    /// Cancels of running messages and their progress.
    const RUNNING: RunningSql;
    /// Fair queues.
    const FAIR: FairSql;

    /// The GRANT statements giving `role` to `user`@`host` on the connection's database: none
    /// by default (a backend without users).
    fn grants(
        _store: &SqlStore<Self>,
        _conn: &mut Self::Connection,
        _role: crate::domain::GrantRole,
        _user: &str,
        _host: &str,
    ) -> impl std::future::Future<Output = Result<Vec<String>>> + Send {
        std::future::ready(Ok(Vec::new()))
    }

    /// `SqlStore::ack_queue` in a transaction of its own, on a pooled connection outside any:
    /// it begins, acks and commits (`<op>.before_commit` is the fail point before the commit).
    /// Before it commits it puts the receipts it acks into `acked`, for the resolver of a
    /// COMMIT whose outcome is unknown. On an error it ends what it opened unless the
    /// connection failed. By default BEGIN, the ack's statements, COMMIT; a backend may spend
    /// fewer round trips (MySQL: two).
    fn ack_queue_own(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        queue_id: i32,
        receipts: &[crate::domain::Receipt],
        acked: &std::sync::Mutex<Vec<crate::domain::Receipt>>,
        op: &'static str,
    ) -> impl std::future::Future<Output = Result<Vec<crate::domain::Receipt>>> + Send
    where
        Self: crate::store::Backend,
    {
        settle::ack_queue_in_own_transaction(store, conn, queue_id, receipts, acked, op)
    }

    /// Ack one receipt of cluster group `group_id` inside the caller's transaction in one
    /// statement, where the backend can: `Some(true)` acked, `Some(false)` the receipt does
    /// not hold its lease (nothing written); `None` (the default) when it cannot, and then
    /// `SqlStore::ack_group` runs its statements.
    fn ack_group_one(
        _store: &SqlStore<Self>,
        _conn: &mut Self::Connection,
        _group_id: i32,
        _receipt: &crate::domain::Receipt,
    ) -> impl std::future::Future<Output = Result<Option<bool>>> + Send {
        std::future::ready(Ok(None))
    }

    /// Publish records in the caller's transaction (a finishing batch's callbacks to topics):
    /// the backend's own [`Publish::insert_pending`](crate::store::Publish::insert_pending).
    fn publish(
        store: &SqlStore<Self>,
        conn: &mut Self::Connection,
        batch: &crate::store::rows::PendingBatch<'_>,
    ) -> impl std::future::Future<Output = Result<()>> + Send
    where
        Self: crate::store::Backend;

    /// Topic rows and partitions.
    const TOPICS: TopicSql;

    /// Consumer group rows and cursors.
    const GROUPS: GroupSql;

    /// Log reads and broadcast positions.
    const STREAM: StreamSql;

    /// Removing a partition's oldest records.
    const RETENTION: RetentionSql;

    /// Broadcast members' dead letters.
    const MEMBER_DEAD: MemberDeadSql;

    /// The cluster-group claim's reads and writes.
    const GROUP_CLAIM: GroupClaimSql;

    /// Settling a cluster group's claims.
    const GROUP_SETTLE: GroupSettleSql;

    /// A cluster group's dead letters, waiting retries and replays.
    const GROUP_DEAD: GroupDeadSql;

    /// Where a cluster group stands.
    const GROUP_STATE: GroupStateSql;

    /// Make the `events` of history rows about to be written (each holds its new event's
    /// line) what `GROUP_SETTLE.upsert_history` binds. By default they stay as they are: the
    /// upsert appends them to the stored events and keeps the last ones (MySQL). A backend
    /// whose SQL cannot trim the events reads the stored ones here and appends (SQLite).
    fn group_history_events(
        _store: &SqlStore<Self>,
        _conn: &mut Self::Connection,
        _group_id: i32,
        _rows: &mut [HistoryRow<'_>],
    ) -> impl std::future::Future<Output = Result<()>> + Send
    where
        Self: crate::store::Backend,
    {
        std::future::ready(Ok(()))
    }
}

/// The statement tables of a backend's `impl Dialect`, each the `SQL` constant of the
/// backend's file named as the body's (`queues::SQL`, `settle::SQL`, …): one list, so that every
/// backend has the same files, and a new concept is added once here.
macro_rules! statement_tables {
    () => {
        const QUEUES: $crate::store::body::QueueSql = queues::SQL;
        const ENQUEUE: $crate::store::body::EnqueueSql = enqueue::SQL;
        const KEYS: $crate::store::body::KeySql = keys::SQL;
        const SETTLE: $crate::store::body::SettleSql = settle::SQL;
        const MAINTAIN: $crate::store::body::MaintainSql = maintain::SQL;
        const ADMIN: $crate::store::body::AdminSql = admin::SQL;
        const DEAD: $crate::store::body::DeadSql = dead::SQL;
        const BROWSE: $crate::store::body::BrowseSql = browse::SQL;
        const LIMITS: $crate::store::body::LimitSql = limits::SQL;
        const PROBE: $crate::store::body::ProbeSql = probe::SQL;
        const PROCESSES: $crate::store::body::ProcessSql = processes::SQL;
        const SCHEDULES: $crate::store::body::ScheduleSql = schedules::SQL;
        const FLOWS: $crate::store::body::FlowSql = flows::SQL;
        const MIGRATE: $crate::store::body::MigrateSql = migrate::SQL;
        const DURABLE: $crate::store::body::DurableSql = durable::SQL;
        const RUNNING: $crate::store::body::RunningSql = running::SQL;
        const FAIR: $crate::store::body::FairSql = fair::SQL;
        const TOPICS: $crate::store::body::TopicSql = topics::SQL;
        const GROUPS: $crate::store::body::GroupSql = groups::SQL;
        const STREAM: $crate::store::body::StreamSql = stream::SQL;
        const RETENTION: $crate::store::body::RetentionSql = retention::SQL;
        const MEMBER_DEAD: $crate::store::body::MemberDeadSql = member_dead::SQL;
        const GROUP_CLAIM: $crate::store::body::GroupClaimSql = group_claim::SQL;
        const GROUP_SETTLE: $crate::store::body::GroupSettleSql = group_settle::SQL;
        const GROUP_DEAD: $crate::store::body::GroupDeadSql = group_dead::SQL;
        const GROUP_STATE: $crate::store::body::GroupStateSql = group_state::SQL;
    };
}
pub(crate) use statement_tables;

/// Declare [`Types`] with its bounds, and its blanket implementation, from one list (each
/// bound in brackets).
macro_rules! value_types {
    ($([$($bound:tt)+])+) => {
        /// The value types the body binds and reads, for any backend whose driver handles
        /// them.
        pub trait Types: Run $(+ $($bound)+)+ {}

        impl<DB> Types for DB where DB: Run $(+ $($bound)+)+ {}
    };
}

value_types!(
    [Bind<i64>] [Bind<i32>] [Bind<i16>] [Bind<String>]
    [for<'a> Bind<&'a str>] [for<'a> Bind<&'a [u8]>] [for<'a> Bind<Option<&'a [u8]>>]
    [Bind<Option<i64>>]
    [Get<i64>] [Get<i32>] [Get<i16>] [Get<i8>] [Get<String>] [Get<Vec<u8>>]
    [Get<Option<i64>>] [Get<Option<String>>] [Get<Option<Vec<u8>>>]
);

/// A statement of `B` with its parameters bound, ready to run.
pub(crate) trait Statement<'q, B: Run>: Sized {
    /// Bind `value` to the next placeholder.
    fn arg<T>(self, value: T) -> Self
    where
        B: Bind<T>;

    /// Run it; returns the rows it changed.
    fn run<'c>(
        self,
        conn: &'c mut B::Connection,
    ) -> futures_util::future::BoxFuture<'c, Result<u64>>
    where
        'q: 'c;

    /// Every row it returns.
    fn rows<'c>(
        self,
        conn: &'c mut B::Connection,
    ) -> futures_util::future::BoxFuture<'c, Result<Vec<B::Row>>>
    where
        'q: 'c;

    /// Its first row, if any.
    fn first<'c>(
        self,
        conn: &'c mut B::Connection,
    ) -> futures_util::future::BoxFuture<'c, Result<Option<B::Row>>>
    where
        'q: 'c;
}

impl<'q, B: Run> Statement<'q, B> for Query<'q, B> {
    fn arg<T>(self, value: T) -> Self
    where
        B: Bind<T>,
    {
        B::bind_value(self, value)
    }

    fn run<'c>(
        self,
        conn: &'c mut B::Connection,
    ) -> futures_util::future::BoxFuture<'c, Result<u64>>
    where
        'q: 'c,
    {
        B::run(conn, self)
    }

    fn rows<'c>(
        self,
        conn: &'c mut B::Connection,
    ) -> futures_util::future::BoxFuture<'c, Result<Vec<B::Row>>>
    where
        'q: 'c,
    {
        B::rows(conn, self)
    }

    fn first<'c>(
        self,
        conn: &'c mut B::Connection,
    ) -> futures_util::future::BoxFuture<'c, Result<Option<B::Row>>>
    where
        'q: 'c,
    {
        B::first(conn, self)
    }
}

/// Reading the columns of a row of any backend.
pub(crate) trait Columns: sqlx::Row
where
    Self::Database: Types,
{
    /// Column `idx`.
    fn col<T>(&self, idx: usize) -> Result<T>
    where
        Self::Database: Get<T>,
    {
        Ok(<Self::Database as Get<T>>::get_value(self, idx)?)
    }

    /// A 16-byte message id.
    fn id_at(&self, idx: usize) -> Result<MessageId> {
        <Self::Database as Run>::with_bytes(self, idx, |b| {
            MessageId::from_slice(b.unwrap_or_default())
        })?
    }

    /// An optional text column stored as bytes of UTF-8 (keys, owners).
    fn opt_text_at(&self, idx: usize) -> Result<Option<String>> {
        let bytes: Option<Vec<u8>> = self.col(idx)?;
        bytes
            .map(|b| {
                String::from_utf8(b)
                    .map_err(|e| Error::Corrupt(format!("column {idx} is not UTF-8: {e}")))
            })
            .transpose()
    }

    /// Headers, stored as a JSON object (NULL when there are none).
    fn headers_at(&self, idx: usize) -> Result<BTreeMap<String, String>> {
        <Self::Database as Run>::with_bytes(self, idx, |b| match b {
            None => Ok(BTreeMap::new()),
            Some(bytes) => serde_json::from_slice(bytes)
                .map_err(|e| Error::Corrupt(format!("headers are not a JSON object: {e}"))),
        })?
    }
}

impl<R: sqlx::Row> Columns for R where R::Database: Types {}

impl<B: Dialect> SqlStore<B> {
    /// `template` (its `{p}` expanded) as a statement to bind and run.
    pub(crate) fn query(&self, template: &'static str) -> Query<'static, B> {
        sqlx::query(self.st.get(template))
    }

    /// `template` with its list expanded for `n` copies of `item` (`n` a bucket size; see
    /// [`Statements::list`]).
    pub(crate) fn list_query(
        &self,
        template: &'static str,
        item: &str,
        n: usize,
    ) -> Query<'static, B> {
        sqlx::query(self.st.list(template, item, n))
    }

    /// `template` (one `{list}` of `?`, or an `{ids}` derived table) for `chunk` (at most
    /// [`MAX_LIST`] ids), padded to its bucket by repeating the last id, which changes nothing
    /// in an `IN` list or a join; `beside` is bound before or after the ids.
    fn id_list_query(
        &self,
        template: &'static str,
        beside: Beside,
        chunk: &[MessageId],
    ) -> Query<'static, B> {
        let mut q = self.list_query(template, "?", bucket(chunk.len()));
        if let Beside::Before(v) = beside {
            q = q.arg(v);
        }
        for id in padded(chunk) {
            q = q.arg(id.bytes());
        }
        if let Beside::After(v) = beside {
            q = q.arg(v);
        }
        q
    }

    /// Run `template` over `ids` in bucketed chunks; returns the total rows changed.
    pub(crate) async fn exec_id_list(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        ids: &[MessageId],
    ) -> Result<u64> {
        self.exec_ids_beside(conn, template, Beside::Nothing, ids)
            .await
    }

    /// [`SqlStore::exec_id_list`] with a value bound beside each chunk's ids.
    pub(crate) async fn exec_ids_beside(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        beside: Beside,
        ids: &[MessageId],
    ) -> Result<u64> {
        let mut affected = 0;
        for chunk in ids.chunks(MAX_LIST) {
            affected += self
                .id_list_query(template, beside, chunk)
                .run(conn)
                .await?;
        }
        Ok(affected)
    }

    /// The rows of `template` (`… WHERE queue_id = ? AND key IN ({list})`) for a queue's
    /// `keys`, in bucketed chunks (`IN` matches a row once, so the padding never repeats rows).
    pub(crate) async fn fetch_key_list(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        queue_id: i32,
        keys: &[&str],
    ) -> Result<Vec<B::Row>> {
        let mut rows = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_LIST) {
            let mut q = self
                .list_query(template, "?", bucket(chunk.len()))
                .arg(queue_id);
            for k in padded(chunk) {
                q = q.arg(k.as_bytes());
            }
            rows.extend(q.rows(conn).await?);
        }
        Ok(rows)
    }

    /// The rows of `template` for `ids`, in bucketed chunks (`IN` matches a row once, so the
    /// padding never repeats rows).
    pub(crate) async fn fetch_id_list(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        ids: &[MessageId],
    ) -> Result<Vec<B::Row>> {
        self.fetch_ids_beside(conn, template, Beside::Nothing, ids)
            .await
    }

    /// [`SqlStore::fetch_id_list`] with a value bound beside each chunk's ids.
    pub(crate) async fn fetch_ids_beside(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        beside: Beside,
        ids: &[MessageId],
    ) -> Result<Vec<B::Row>> {
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_LIST) {
            rows.extend(
                self.id_list_query(template, beside, chunk)
                    .rows(conn)
                    .await?,
            );
        }
        Ok(rows)
    }

    /// Insert `rows` with a multi-row `VALUES` statement (`{list}` of `item`, which holds
    /// `params` placeholders), split into bucket-sized statements within the backend's
    /// parameter limit.
    pub(crate) async fn insert_values<T>(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        item: &'static str,
        params: usize,
        rows: &[T],
        bind: impl for<'q> Fn(Query<'q, B>, &'q T) -> Query<'q, B>,
    ) -> Result<()> {
        let mut rest = rows;
        for size in split_into_buckets(rows.len(), B::MAX_PARAMS / params.max(1)) {
            let (chunk, tail) = rest.split_at(size);
            let mut q = self.list_query(template, item, size);
            for row in chunk {
                q = bind(q, row);
            }
            q.run(conn).await?;
            rest = tail;
        }
        Ok(())
    }
}
