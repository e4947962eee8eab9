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
//!
//! On a Galera node a script is sent as one compound statement (`BEGIN NOT ATOMIC …; END`,
//! MariaDB's anonymous block). Why: a node aborts a local transaction whose locks a replicated
//! one needs (a brute-force abort), and when that lands while a statement of a multi-statement
//! query is running and the statement finishes without noticing, MariaDB rolls the transaction
//! back, runs the *next* statement of the query on its own in autocommit mode — committed — and
//! only then reports the deadlock (`tests/galera/aborts.rs` shows it). A sequencing step lost
//! its log rows that way and kept the counter's advance: a hole in a partition's offsets (seen
//! in CI). Inside a compound statement, as inside a procedure, the abort stops the statements
//! that follow, and no statement ever runs outside the transaction. Single-statement round
//! trips, and the internal procedures, are safe as they are. A compound statement is parsed on
//! every run, so servers without Galera keep the plain query.

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::MySqlStore;

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

/// Statements joined by `;`, sent as one text query (a compound statement on a Galera node).
pub(crate) struct Script {
    text: String,
    compound: bool,
}

impl Script {
    /// An empty script for `store`'s server.
    pub(crate) fn new(store: &MySqlStore) -> Script {
        Script {
            text: String::new(),
            compound: store.state.compound_scripts.load(Ordering::Relaxed),
        }
    }

    /// A script whose first statement opens a transaction.
    pub(crate) fn begin(store: &MySqlStore) -> Script {
        let mut s = Script::new(store);
        s.text.push_str("START TRANSACTION");
        s
    }

    /// What is sent: the statements, inside a compound statement where they must be one.
    fn query(&self) -> Cow<'_, str> {
        if self.compound {
            Cow::Owned(format!("BEGIN NOT ATOMIC {};END", self.text))
        } else {
            Cow::Borrowed(&self.text)
        }
    }

    /// Append `statement` with its `?` placeholders (those outside quoted strings) replaced by
    /// `args`, in order.
    pub(crate) fn push(&mut self, statement: &str, args: &[Lit<'_>]) -> &mut Script {
        if !self.text.is_empty() {
            self.text.push(';');
        }
        let mut args = args.iter();
        let mut quoted = false;
        for c in statement.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    self.text.push(c);
                }
                '?' if !quoted => {
                    let arg = args.next().expect("fewer values than placeholders");
                    render(&mut self.text, *arg);
                }
                _ => self.text.push(c),
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
        &self.text
    }

    /// Bytes of text so far.
    pub(crate) fn len(&self) -> usize {
        self.text.len()
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
        let query = self.query();
        Ok(sqlx::raw_sql(AssertSqlSafe(&*query))
            .fetch_all(&mut *conn)
            .await?)
    }

    /// [`Script::run`] inside the caller's transaction.
    pub(crate) async fn run_in(&self, conn: &mut MySqlConnection) -> Result<()> {
        let query = self.query();
        sqlx::raw_sql(AssertSqlSafe(&*query))
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

    fn store() -> MySqlStore {
        MySqlStore::with_prefix("sqlmq_")
    }

    #[test]
    fn values_are_rendered_as_integers_and_hexadecimal_only() {
        let mut s = Script::begin(&store());
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
        let mut s = Script::new(&store());
        s.push("SELECT '?', ?, 'it''s ?'", &[Lit::Int(7)]);
        assert_eq!(s.text(), "SELECT '?', 7, 'it''s ?'");
    }

    #[test]
    #[should_panic(expected = "fewer values")]
    fn a_missing_value_is_a_bug_caught_at_once() {
        Script::new(&store()).push("SELECT ?, ?", &[Lit::Int(1)]);
    }

    #[test]
    fn on_a_galera_node_a_script_is_one_compound_statement() {
        let store = store();
        let mut s = Script::begin(&store);
        s.push("SELECT ?", &[Lit::Int(1)]).commit();
        assert_eq!(s.query(), "START TRANSACTION;SELECT 1;COMMIT");
        store.state.compound_scripts.store(true, Ordering::Relaxed);
        let mut s = Script::begin(&store);
        s.push("SELECT ?", &[Lit::Int(1)]).commit();
        assert_eq!(
            s.query(),
            "BEGIN NOT ATOMIC START TRANSACTION;SELECT 1;COMMIT;END"
        );
    }
}
