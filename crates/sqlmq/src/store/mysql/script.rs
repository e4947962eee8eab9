//! Statements as text, several to a round trip.
//!
//! Why: a prepared statement is one statement per round trip, so a unit of work through the
//! transaction runner pays one wait on the network and the server's scheduler for its BEGIN,
//! one per statement and one for its COMMIT. The hot units (a send, a claim, an ack) have at
//! most one point where the client must read before it can decide what to write; a text query
//! may carry several statements, which the server runs in order, stopping at the first error.
//! So each such unit opens its transaction in the same round trip as its first statement and
//! commits it in the same round trip as its last: a send is one round trip, a claim and an ack
//! two.
//!
//! Why it is safe as text: a [`Script`] renders every value itself, as a decimal integer or a
//! hexadecimal literal (`X'…'`) of raw bytes; nothing a caller sends is ever parsed as SQL.
//! The statements are the backend's own templates; a `?` inside a quoted string in one is text,
//! not a placeholder.

use std::fmt::Write;

use sqlx::mysql::MySqlRow;
use sqlx::{AssertSqlSafe, MySqlConnection};

use crate::domain::{Error, ErrorClass, Result};

/// One value rendered into a statement.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lit<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    Null,
}

impl<'a> From<Option<&'a [u8]>> for Lit<'a> {
    fn from(b: Option<&'a [u8]>) -> Lit<'a> {
        b.map_or(Lit::Null, Lit::Bytes)
    }
}

/// Statements joined by `;`, sent as one text query.
#[derive(Default)]
pub(crate) struct Script(String);

impl Script {
    /// A script whose first statement opens a transaction.
    pub(crate) fn begin() -> Script {
        Script("START TRANSACTION".to_owned())
    }

    /// Append `statement` with its `?` placeholders (those outside quoted strings) replaced by
    /// `args`, in order.
    pub(crate) fn push(&mut self, statement: &str, args: &[Lit<'_>]) -> &mut Script {
        if !self.0.is_empty() {
            self.0.push(';');
        }
        let mut args = args.iter();
        let mut quoted = false;
        for c in statement.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    self.0.push(c);
                }
                '?' if !quoted => {
                    let arg = args.next().expect("fewer values than placeholders");
                    render(&mut self.0, *arg);
                }
                _ => self.0.push(c),
            }
        }
        assert!(args.next().is_none(), "more values than placeholders");
        self
    }

    /// Append `COMMIT`.
    pub(crate) fn commit(&mut self) -> &mut Script {
        self.push("COMMIT", &[])
    }

    /// Append a statement that fails, stopping the script there, unless the statement before
    /// it changed exactly `n` rows (an `INSERT … SELECT` that skips a row is no error of its
    /// own). It is a scalar subquery returning two rows exactly when `ROW_COUNT()` differs:
    /// ER_SUBQUERY_NO_1_ROW, which [`changed_other_than_expected`] recognises.
    pub(crate) fn expect_changed(&mut self, n: usize) -> &mut Script {
        self.push(
            "SELECT (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE ROW_COUNT() <> ?)",
            &[Lit::Int(n as i64)],
        )
    }

    /// The text so far.
    #[cfg(test)]
    pub(crate) fn text(&self) -> &str {
        &self.0
    }

    /// Bytes of text so far.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Run the script and return the rows of its statements. On an error the server stopped
    /// at the failing statement, possibly inside the script's transaction: it is rolled back
    /// here, unless the connection failed (whoever holds it then discards it, which rolls back
    /// too).
    pub(crate) async fn fetch(&self, conn: &mut MySqlConnection) -> Result<Vec<MySqlRow>> {
        match self.fetch_in(conn).await {
            Ok(rows) => Ok(rows),
            Err(e) => Err(rolled_back(conn, e).await),
        }
    }

    /// Run the script for its effects (see [`Script::fetch`] for errors).
    pub(crate) async fn run(&self, conn: &mut MySqlConnection) -> Result<()> {
        match self.run_in(conn).await {
            Ok(()) => Ok(()),
            Err(e) => Err(rolled_back(conn, e).await),
        }
    }

    /// [`Script::fetch`] inside the caller's transaction: an error leaves the transaction to
    /// its owner.
    pub(crate) async fn fetch_in(&self, conn: &mut MySqlConnection) -> Result<Vec<MySqlRow>> {
        Ok(sqlx::raw_sql(AssertSqlSafe(self.0.as_str()))
            .fetch_all(&mut *conn)
            .await?)
    }

    /// [`Script::run`] inside the caller's transaction.
    pub(crate) async fn run_in(&self, conn: &mut MySqlConnection) -> Result<()> {
        sqlx::raw_sql(AssertSqlSafe(self.0.as_str()))
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// Whether `err` is the failure of a [`Script::expect_changed`] check.
pub(crate) fn changed_other_than_expected(err: &Error) -> bool {
    // ER_SUBQUERY_NO_1_ROW
    err.mysql_error_number() == Some(1242)
}

/// End whatever transaction a failed script left open; `err` is what the caller reports (or
/// the ROLLBACK's own failure, which makes the connection one to discard).
pub(crate) async fn rolled_back(conn: &mut MySqlConnection, err: Error) -> Error {
    if err.class() == Some(ErrorClass::Reconnect) {
        return err;
    }
    match sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
        Ok(_) => err,
        Err(e) => Error::from(e),
    }
}

fn render(out: &mut String, lit: Lit<'_>) {
    match lit {
        Lit::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Lit::Null => out.push_str("NULL"),
        Lit::Bytes(b) => {
            out.push_str("X'");
            out.push_str(&hex::encode(b));
            out.push('\'');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_rendered_as_integers_and_hexadecimal_only() {
        let mut s = Script::begin();
        s.push(
            "INSERT INTO t (a, b, c) VALUES (?,?,?)",
            &[
                Lit::Int(-3),
                Lit::Bytes(b"x'); DROP TABLE t; --"),
                Lit::Null,
            ],
        )
        .commit();
        assert_eq!(
            s.text(),
            "START TRANSACTION;INSERT INTO t (a, b, c) VALUES \
             (-3,X'7827293b2044524f50205441424c4520743b202d2d',NULL);COMMIT"
        );
    }

    #[test]
    fn a_question_mark_inside_quotes_is_text() {
        let mut s = Script::default();
        s.push("SELECT '?', ?, 'it''s ?'", &[Lit::Int(7)]);
        assert_eq!(s.text(), "SELECT '?', 7, 'it''s ?'");
    }

    #[test]
    #[should_panic(expected = "fewer values")]
    fn a_missing_value_is_a_bug_caught_at_once() {
        Script::default().push("SELECT ?, ?", &[Lit::Int(1)]);
    }
}
