//! What the conformance suite needs from each backend beyond sqlmq itself: throwaway
//! databases, and plain SQL for the tests' own tables (business rows written in the same
//! transaction as a send or an ack) and for checks of sqlmq's tables. One file per backend
//! implements it (`backend/mysql.rs`, `backend/sqlite.rs`).

use std::future::Future;

use sqlx::{
    AssertSqlSafe, ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type,
};

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "sqlite")]
mod sqlite;

/// A value bound to, or read from, a test's SQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes (binary columns).
    Bytes(Vec<u8>),
}

impl Value {
    /// The integer, panicking otherwise.
    pub fn int(&self) -> i64 {
        match self {
            Value::Int(i) => *i,
            other => panic!("not an integer: {other:?}"),
        }
    }

    /// The text (bytes decoded as UTF-8), panicking otherwise.
    pub fn text(&self) -> String {
        match self {
            Value::Text(s) => s.clone(),
            Value::Bytes(b) => String::from_utf8(b.clone()).expect("UTF-8"),
            other => panic!("not text: {other:?}"),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(v.into())
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(v.into())
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Bytes(v.to_vec())
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

/// A backend the conformance suite runs on.
pub trait TestBackend: sqlmq::Backend {
    /// A query listing the names of the database's tables.
    const TABLES: &'static str;

    /// A query listing the column names of a table (its one argument), in order.
    const COLUMNS: &'static str;

    /// How SQL on `conn` names the tables of another test database, `other` (`{reach}.table`):
    /// on MySQL its database name; on SQLite an alias of its file, attached to `conn` here.
    fn reach(conn: &mut Self::Connection, other: &str) -> impl Future<Output = String> + Send;

    /// Create an empty throwaway database; returns its name.
    fn create_database() -> impl Future<Output = String> + Send;

    /// Drop a database made by [`TestBackend::create_database`].
    fn drop_database(name: &str) -> impl Future<Output = ()> + Send;

    /// The URL of a test database, by name (child processes get the name), as the user the
    /// code under test connects as: on MySQL one with data statements only (no DDL).
    fn url_of(name: &str) -> String;

    /// The URL of a test database as its admin: migrations and the test's own DDL.
    fn admin_url_of(name: &str) -> String;

    /// Run `sql` (placeholders `?`) with `args`; returns the rows affected.
    fn execute(
        conn: &mut Self::Connection,
        sql: &str,
        args: &[Value],
    ) -> impl Future<Output = u64> + Send;

    /// Run a query; returns its rows.
    fn query(
        conn: &mut Self::Connection,
        sql: &str,
        args: &[Value],
    ) -> impl Future<Output = Vec<Vec<Value>>> + Send;

    /// Make a worker process's registration look silent for too long, as if it had missed its
    /// heartbeats (`table` is the prefixed process table).
    fn expire_process(
        conn: &mut Self::Connection,
        table: &str,
        id: &str,
    ) -> impl Future<Output = ()> + Send;
}

/// A column of `row` as a [`Value`]: an integer, else text, else bytes.
fn decode<R>(row: &R, i: usize) -> Value
where
    R: Row,
    usize: ColumnIndex<R>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<Vec<u8>>: Decode<'r, R::Database> + Type<R::Database>,
{
    if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
        return v.map_or(Value::Null, Value::Int);
    }
    if let Ok(v) = row.try_get::<Option<String>, _>(i) {
        return v.map_or(Value::Null, Value::Text);
    }
    match row.try_get::<Option<Vec<u8>>, _>(i) {
        Ok(v) => v.map_or(Value::Null, Value::Bytes),
        Err(e) => panic!("column {i}: {e}"),
    }
}

/// `sql` with `args` bound, for any backend.
fn bind<'q, DB>(sql: &str, args: &'q [Value]) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    DB: Database,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    i64: Encode<'q, DB> + Type<DB>,
    &'q str: Encode<'q, DB> + Type<DB>,
    &'q [u8]: Encode<'q, DB> + Type<DB>,
{
    let mut q = sqlx::query(AssertSqlSafe(sql.to_owned()));
    for a in args {
        q = match a {
            Value::Null => q.bind(None::<i64>),
            Value::Int(i) => q.bind(*i),
            Value::Text(s) => q.bind(s.as_str()),
            Value::Bytes(b) => q.bind(b.as_slice()),
        };
    }
    q
}

/// [`TestBackend::execute`] for any backend (its result says the rows affected).
async fn execute_on<'c, DB>(
    conn: &'c mut DB::Connection,
    sql: &str,
    args: &[Value],
) -> DB::QueryResult
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> &'q [u8]: Encode<'q, DB> + Type<DB>,
{
    bind::<DB>(sql, args)
        .execute(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// [`TestBackend::query`] for any backend.
async fn query_on<'c, DB>(
    conn: &'c mut DB::Connection,
    sql: &str,
    args: &[Value],
) -> Vec<Vec<Value>>
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    &'c mut DB::Connection: Executor<'c, Database = DB>,
    usize: ColumnIndex<DB::Row>,
    for<'q> Option<i64>: Encode<'q, DB> + Type<DB> + Decode<'q, DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> &'q [u8]: Encode<'q, DB> + Type<DB>,
    for<'r> Option<String>: Decode<'r, DB> + Type<DB>,
    for<'r> Option<Vec<u8>>: Decode<'r, DB> + Type<DB>,
{
    let rows = bind::<DB>(sql, args)
        .fetch_all(conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.iter()
        .map(|r| (0..r.len()).map(|i| decode(r, i)).collect())
        .collect()
}
