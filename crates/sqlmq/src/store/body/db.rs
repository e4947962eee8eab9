//! What the store body needs of a `sqlx` driver, as supertraits of the backend: binding
//! parameters, decoding columns, running a statement.
//!
//! Why traits of our own rather than `sqlx`'s bounds: generic code over a `sqlx::Database`
//! must state `i64: Encode<'_, DB> + Type<DB>`, `&mut DB::Connection: Executor<'_>` and the
//! like on every function, because bounds on other types than `Self` in a trait's where-clause
//! are not implied where the trait is used. Supertraits are: `B: Backend` brings
//! `B: Bind<i64>`, and so on, to every generic function at no cost. Each trait here has one
//! blanket implementation over any database that `sqlx` gives the capability, so a backend
//! implements none of them by hand; what differs between drivers is [`Driver`], which each
//! backend implements in its folder.

use futures_util::future::BoxFuture;
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row as _, SqlStr, Type,
};

use crate::domain::{ErrorClass, Result};
use crate::store::errors::db_error;

/// The few facts about a driver that differ by backend: what a statement's result says, and
/// what an error means. Implemented by each backend (`<backend>/errors.rs`).
pub trait Driver: Database {
    /// The rows a statement changed (MySQL: matched, as sqlx sets `CLIENT_FOUND_ROWS`).
    fn rows_affected(done: &Self::QueryResult) -> u64;

    /// What to do about a server error of this backend (`None`: not one of its errors).
    fn classify(db: &dyn sqlx::error::DatabaseError) -> Option<ErrorClass>;

    /// Whether a server error refuses the work for want of a resource: a connection at the
    /// server's limit, or space (see [`Refusal`]).
    fn refusal(_db: &dyn sqlx::error::DatabaseError) -> Option<Refusal> {
        None
    }

    /// Whether a server error is a refusal for want of a privilege.
    fn is_permission_denied(_db: &dyn sqlx::error::DatabaseError) -> bool {
        false
    }

    /// Whether a server error says that a table does not exist.
    fn is_missing_table(db: &dyn sqlx::error::DatabaseError) -> bool;

    /// Whether a server error says that a column added is there already, or that a column
    /// dropped or read is not: a migration's column change that an interrupted or concurrent
    /// run made.
    fn is_column_change_done(db: &dyn sqlx::error::DatabaseError) -> bool;

    /// Called when a connection failed with an I/O error (the MySQL backend pings the
    /// connections that were idle since before it).
    fn connection_failed() {}
}

/// A resource the server refused the work for want of: a moment's condition, waited out by
/// long-running processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No new connection: the server's limit of that name is reached.
    Connections(&'static str),
    /// No space for the rows.
    Space,
}

/// A statement being built for backend `B`.
pub(crate) type Query<'q, B> = sqlx::query::Query<'q, B, <B as Database>::Arguments>;

/// `T` can be bound as a parameter of `Self`'s statements.
pub trait Bind<T>: Database {
    /// `query` with `value` bound to its next placeholder.
    fn bind_value(query: Query<'_, Self>, value: T) -> Query<'_, Self>;
}

impl<'t, T, DB> Bind<T> for DB
where
    DB: Database,
    T: Encode<'t, DB> + Type<DB>,
{
    fn bind_value(query: Query<'_, Self>, value: T) -> Query<'_, Self> {
        query.bind(value)
    }
}

/// `T` can be read from a column of `Self`'s rows.
pub trait Get<T>: Database {
    /// Column `idx` of `row`.
    fn get_value(row: &Self::Row, idx: usize) -> sqlx::Result<T>;
}

impl<T, DB> Get<T> for DB
where
    DB: Database,
    T: for<'r> Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    fn get_value(row: &Self::Row, idx: usize) -> sqlx::Result<T> {
        row.try_get(idx)
    }
}

/// Running statements (errors classified by the backend), and reading byte columns without
/// copying them.
pub trait Run: Driver {
    /// Run `query`; returns the rows it changed.
    fn run<'c>(
        conn: &'c mut Self::Connection,
        query: Query<'c, Self>,
    ) -> BoxFuture<'c, Result<u64>>;

    /// Run `sql` as text, unprepared (DDL).
    fn run_text<'c>(conn: &'c mut Self::Connection, sql: SqlStr) -> BoxFuture<'c, Result<u64>>;

    /// Every row of `query`.
    fn rows<'c>(
        conn: &'c mut Self::Connection,
        query: Query<'c, Self>,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>>>;

    /// The first row of `query`, if any.
    fn first<'c>(
        conn: &'c mut Self::Connection,
        query: Query<'c, Self>,
    ) -> BoxFuture<'c, Result<Option<Self::Row>>>;

    /// `f` of the bytes of column `idx` (`None` for NULL), read in place.
    fn with_bytes<R>(
        row: &Self::Row,
        idx: usize,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> sqlx::Result<R>;
}

impl<DB> Run for DB
where
    DB: Driver,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'r> Option<&'r [u8]>: Decode<'r, DB> + Type<DB>,
    usize: ColumnIndex<DB::Row>,
{
    fn run<'c>(
        conn: &'c mut Self::Connection,
        query: Query<'c, Self>,
    ) -> BoxFuture<'c, Result<u64>> {
        Box::pin(async move {
            let done = conn.execute(query).await.map_err(db_error::<DB>)?;
            Ok(DB::rows_affected(&done))
        })
    }

    fn run_text<'c>(conn: &'c mut Self::Connection, sql: SqlStr) -> BoxFuture<'c, Result<u64>> {
        Box::pin(async move {
            let done = conn.execute(sql).await.map_err(db_error::<DB>)?;
            Ok(DB::rows_affected(&done))
        })
    }

    fn rows<'c>(
        conn: &'c mut Self::Connection,
        query: Query<'c, Self>,
    ) -> BoxFuture<'c, Result<Vec<Self::Row>>> {
        Box::pin(async move { conn.fetch_all(query).await.map_err(db_error::<DB>) })
    }

    fn first<'c>(
        conn: &'c mut Self::Connection,
        query: Query<'c, Self>,
    ) -> BoxFuture<'c, Result<Option<Self::Row>>> {
        Box::pin(async move { conn.fetch_optional(query).await.map_err(db_error::<DB>) })
    }

    fn with_bytes<R>(
        row: &Self::Row,
        idx: usize,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> sqlx::Result<R> {
        Ok(f(row.try_get::<Option<&[u8]>, _>(idx)?))
    }
}
