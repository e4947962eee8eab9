//! The store body: every store trait whose control flow is the same on every backend,
//! implemented once, generic over the backend, on [`SqlStore`].
//!
//! A backend supplies what really differs: its statement texts, one table per concept (each
//! file here declares the table it needs, and [`Dialect`] gathers them), the few statements
//! whose shape differs (a hook on [`Dialect`]), and its [`Driver`] facts (results, errors).
//! The traits whose shape itself differs — connecting and the server checks, the claim where
//! `SKIP LOCKED` meets one writer, publishing and sequencing, the one-round-trip scripts — are
//! implemented by each backend for `SqlStore<ItsDatabase>`, in its own folder.
//!
//! | file | what |
//! |---|---|
//! | `db.rs` | what the body needs of a driver: [`Bind`], [`Get`], [`Run`], [`Driver`] |
//! | `processes.rs` | `Processes` |
//! | `group_ids.rs` | statements over a list of a cluster group's ids |
//! | `group_claim.rs` | `GroupClaim` (the cluster claim's reads and writes) |
//! | `group_settle.rs` | `GroupSettle` |
//! | `group_dead.rs` | `GroupDead` |
//! | `group_state.rs` | `GroupState` |

mod db;
mod group_claim;
mod group_dead;
mod group_ids;
mod group_settle;
mod group_state;
mod processes;

use std::collections::BTreeMap;
use std::marker::PhantomData;

pub use db::{Bind, Driver, Get, Run};
pub(crate) use db::{Query, db_error};
pub use group_claim::GroupClaimSql;
pub(crate) use group_claim::{cursor_select, partition_end};
pub use group_dead::GroupDeadSql;
pub use group_settle::{GroupSettleSql, HistoryRow};
pub use group_state::GroupStateSql;
pub use processes::ProcessSql;

use super::statements::{MAX_LIST, Statements, bucket, padded, split_into_buckets};
use crate::domain::{Error, MessageId, Result};

/// The store of backend `B`: the statement texts expanded for one table prefix. Every store
/// trait is implemented for it, once generically (this folder) or by the backend itself.
pub struct SqlStore<B> {
    pub(crate) st: Statements,
    backend: PhantomData<fn() -> B>,
}

impl<B> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        SqlStore {
            st: self.st.clone(),
            backend: PhantomData,
        }
    }
}

impl<B> SqlStore<B> {
    /// The store for tables named with `prefix`.
    pub(crate) fn with_prefix(prefix: &str) -> Self {
        SqlStore {
            st: Statements::new(prefix),
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

    /// The process registry's statements.
    const PROCESSES: ProcessSql;

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

/// The value types the body binds and reads, for any backend whose driver handles them.
pub trait Types:
    Run
    + Bind<i64>
    + Bind<i32>
    + Bind<i16>
    + Bind<String>
    + for<'a> Bind<&'a str>
    + for<'a> Bind<&'a [u8]>
    + for<'a> Bind<Option<&'a [u8]>>
    + Bind<Option<i64>>
    + Get<i64>
    + Get<i32>
    + Get<i16>
    + Get<i8>
    + Get<String>
    + Get<Vec<u8>>
    + Get<Option<i64>>
    + Get<Option<String>>
    + Get<Option<Vec<u8>>>
{
}

impl<DB> Types for DB where
    DB: Run
        + Bind<i64>
        + Bind<i32>
        + Bind<i16>
        + Bind<String>
        + for<'a> Bind<&'a str>
        + for<'a> Bind<&'a [u8]>
        + for<'a> Bind<Option<&'a [u8]>>
        + Bind<Option<i64>>
        + Get<i64>
        + Get<i32>
        + Get<i16>
        + Get<i8>
        + Get<String>
        + Get<Vec<u8>>
        + Get<Option<i64>>
        + Get<Option<String>>
        + Get<Option<Vec<u8>>>
{
}

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

    /// `template` (one `{list}` of `?`, or an `{ids}` derived table) for `chunk` (at most
    /// [`MAX_LIST`] ids), padded to its bucket by repeating the last id, which changes nothing
    /// in an `IN` list or a join.
    fn id_list_query(&self, template: &'static str, chunk: &[MessageId]) -> Query<'static, B> {
        let mut q = sqlx::query(self.st.list(template, "?", bucket(chunk.len())));
        for id in padded(chunk) {
            q = q.arg(id.bytes());
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
        let mut affected = 0;
        for chunk in ids.chunks(MAX_LIST) {
            affected += self.id_list_query(template, chunk).run(conn).await?;
        }
        Ok(affected)
    }

    /// The rows of `template` for `ids`, in bucketed chunks (`IN` matches a row once, so the
    /// padding never repeats rows).
    pub(crate) async fn fetch_id_list(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        ids: &[MessageId],
    ) -> Result<Vec<B::Row>> {
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_LIST) {
            rows.extend(self.id_list_query(template, chunk).rows(conn).await?);
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
            let mut q = sqlx::query(self.st.list(template, item, size));
            for row in chunk {
                q = bind(q, row);
            }
            q.run(conn).await?;
            rest = tail;
        }
        Ok(())
    }
}
