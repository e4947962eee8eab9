//! What the conformance suite needs from each backend beyond sqlmq itself: throwaway
//! databases, and plain SQL for the tests' own tables (business rows written in the same
//! transaction as a send or an ack) and for checks of sqlmq's tables.

use std::future::Future;

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySql, MySqlConnection, Row};

use crate::server;

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

    /// Create an empty throwaway database; returns its name.
    fn create_database() -> impl Future<Output = String> + Send;

    /// Drop a database made by [`TestBackend::create_database`].
    fn drop_database(name: &str) -> impl Future<Output = ()> + Send;

    /// The URL of a test database, by name (child processes get the name).
    fn url_of(name: &str) -> String;

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

fn decode(row: &MySqlRow, i: usize) -> Value {
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

fn bind<'q>(
    sql: &str,
    args: &'q [Value],
) -> sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments> {
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

impl TestBackend for MySql {
    const TABLES: &'static str = "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
        WHERE table_schema = DATABASE()";

    async fn create_database() -> String {
        server::create_database().await
    }

    async fn drop_database(name: &str) {
        server::drop_database(name).await;
    }

    fn url_of(name: &str) -> String {
        server::url_for(name)
    }

    async fn execute(conn: &mut MySqlConnection, sql: &str, args: &[Value]) -> u64 {
        bind(sql, args)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .rows_affected()
    }

    async fn query(conn: &mut MySqlConnection, sql: &str, args: &[Value]) -> Vec<Vec<Value>> {
        let rows = bind(sql, args)
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .map(|r| (0..r.len()).map(|i| decode(r, i)).collect())
            .collect()
    }

    async fn expire_process(conn: &mut MySqlConnection, table: &str, id: &str) {
        let sql = format!(
            "UPDATE {table} SET expires_at = DATE_SUB(UTC_TIMESTAMP(6), INTERVAL 1 SECOND) \
             WHERE id = ?"
        );
        Self::execute(conn, &sql, &[Value::Bytes(id.as_bytes().to_vec())]).await;
    }
}
