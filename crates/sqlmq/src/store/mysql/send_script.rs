//! A send of plain messages in one round trip.
//!
//! One message is one statement: `CALL {p}send(…)`, the stored procedure of migration 8
//! (`send_procedure.sql`), prepared once per connection and called with bound values — its
//! transaction, both INSERTs and the COMMIT run inside the server, with no text to parse.
//! Several (sends that share a commit, a small batch) are one script of text: `START
//! TRANSACTION`, the INSERT into `messages`, the INSERT into `ready` and `COMMIT`.
//!
//! Only plain messages take this path — no idempotency key (its window is read first), no
//! ordering key (the message may be blocked behind an earlier one), no delay; anything else, or
//! a batch whose text would exceed 256 KiB (or the statement budget), goes through the
//! transaction runner.
//! An id stored already (a resend) writes nothing: the engine then runs the full send, which
//! knows how to answer it.

use std::sync::atomic::Ordering;

use sqlx::MySqlConnection;

use super::MySqlStore;
use super::enqueue::{INSERT_MESSAGES, MESSAGE_ROW};
use super::script::{Lit, Script};

use crate::domain::{Error, Message, Result};
use crate::store::body::enqueue::{INSERT_READY, READY_ROW};
use crate::store::body::{Columns, Statement};
use crate::store::rows::SendBatch;

/// Largest script text. A big batch gains nothing from saving round trips (it is a handful
/// of statements either way), and the server parses a long text of literals more slowly than
/// it binds the same values to a prepared statement: a batch of 10 000 was 25 % slower as one
/// script (docs/BENCHMARKS.md), so larger batches take the prepared path.
const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// One send, ready to run.
pub struct SendScript(Shape);

enum Shape {
    /// One message: a CALL of the send procedure.
    Call {
        queue: String,
        queue_id: i32,
        message: Message,
        headers: Option<String>,
    },
    /// Several (or a server that refused the procedure): one script of text.
    Text(Script),
}

/// The send procedure with the arguments a plain message needs: queue, body, id, priority,
/// headers (no delay, ordering key or idempotency key). Its one row: `id, uuid, duplicate`.
const CALL_SEND: &str = "CALL {p}send(?, ?, ?, ?, NULL, NULL, NULL, ?)";

/// Whether `m` needs nothing but a row in `messages` and one in `ready`.
fn is_plain(m: &Message) -> bool {
    m.idempotency_key.is_none()
        && m.ordering_key.is_none()
        && m.concurrency_key.is_none()
        && m.delay.is_zero()
        && !m.tracked()
}

/// Whether `e` says this connection's user may not call the procedure, or that it is missing.
fn refuses_procedure(e: &Error) -> bool {
    matches!(e.mysql_error_number(), Some(1370 | 1305))
}

impl MySqlStore {
    /// The script for `batch`, if every message is plain and its text fits the budget.
    pub(super) fn script_for(&self, batch: &SendBatch<'_>) -> Result<Option<SendScript>> {
        let msgs = batch.messages;
        if msgs.is_empty() || !msgs.iter().all(is_plain) {
            return Ok(None);
        }
        // Twice the bodies (hexadecimal) plus a generous allowance per row, checked before
        // rendering anything; the rendered text is checked again below.
        let limit = batch.budget.min(MAX_SCRIPT_BYTES);
        let estimate: usize = msgs.iter().map(|m| 2 * m.body.len() + 160).sum();
        if estimate > limit {
            return Ok(None);
        }
        let headers: Vec<Option<String>> = msgs
            .iter()
            .map(|m| {
                (!m.headers.is_empty())
                    .then(|| serde_json::to_string(&m.headers))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        if let [m] = msgs
            && !self.procedure_refused.load(Ordering::Relaxed)
        {
            return Ok(Some(SendScript(Shape::Call {
                queue: batch.queue.to_owned(),
                queue_id: batch.queue_id,
                message: m.clone(),
                headers: headers.into_iter().next().flatten(),
            })));
        }
        let s = self.text_script(batch.queue_id, msgs, &headers);
        if s.len() > limit {
            return Ok(None);
        }
        Ok(Some(SendScript(Shape::Text(s))))
    }

    /// `msgs` (plain) with their `headers` as JSON: `START TRANSACTION`, the two INSERTs,
    /// `COMMIT`.
    fn text_script(&self, queue_id: i32, msgs: &[Message], headers: &[Option<String>]) -> Script {
        let q = i64::from(queue_id);
        let mut s = Script::begin();
        let mut args = Vec::with_capacity(msgs.len() * 7);
        for (m, h) in msgs.iter().zip(headers) {
            args.extend([
                Lit::Bytes(m.id.bytes()),
                Lit::Int(q),
                Lit::Int(m.priority.into()),
                Lit::Null,
                Lit::Null,
                h.as_deref().map(str::as_bytes).into(),
                Lit::Bytes(&m.body),
            ]);
        }
        let st = &self.st;
        s.push(
            &st.list_text(INSERT_MESSAGES, MESSAGE_ROW, msgs.len()),
            &args,
        );
        args.clear();
        for m in msgs {
            args.extend([
                Lit::Int(q),
                Lit::Int(m.priority.into()),
                Lit::Bytes(m.id.bytes()),
                Lit::Int(0),
                Lit::Int(0),
            ]);
        }
        s.push(&st.list_text(INSERT_READY, READY_ROW, msgs.len()), &args);
        s.commit();
        s
    }

    /// Run a send's script (on an error its transaction is ended, see [`Script::run`]).
    /// `false`: an id is stored already and nothing was written.
    pub(super) async fn run_send_script(
        &self,
        conn: &mut MySqlConnection,
        script: &SendScript,
    ) -> Result<bool> {
        crate::failpoints::before_commit("send").await;
        let (queue_id, message, headers) = match &script.0 {
            Shape::Text(s) => return run_text(conn, s).await,
            Shape::Call {
                queue,
                queue_id,
                message,
                headers,
            } => {
                let called = self
                    .query(CALL_SEND)
                    .arg(queue.as_str())
                    .arg(message.body.as_slice())
                    .arg(message.id.bytes())
                    .arg(message.priority)
                    .arg(headers.as_deref())
                    .rows(conn)
                    .await;
                match called {
                    Ok(rows) => {
                        let row = rows.first().ok_or_else(|| {
                            Error::Corrupt("the send procedure answered no row".into())
                        })?;
                        return Ok(row.col::<i64>(2)? == 0);
                    }
                    Err(e) if refuses_procedure(&e) => (*queue_id, message, headers),
                    Err(e) => return Err(e),
                }
            }
        };
        // Refused: its runtime user was granted before the procedure existed (`sqlmq grants`
        // now adds EXECUTE). Sends keep working as they did, one round trip of text.
        if !self.procedure_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the send procedure {}send is refused to this user or missing: single sends \
                 take the text path (grant EXECUTE: `sqlmq grants --user NAME`)",
                self.st.prefix()
            );
        }
        let text = self.text_script(
            queue_id,
            std::slice::from_ref(message),
            std::slice::from_ref(headers),
        );
        run_text(conn, &text).await
    }
}

/// Run a text send: `false` when an id is stored already (the script then wrote nothing).
async fn run_text(conn: &mut MySqlConnection, s: &Script) -> Result<bool> {
    match s.run(conn).await {
        Ok(()) => Ok(true),
        Err(e) if e.is_duplicate_key() => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Server;

    fn batch(msgs: &[Message], budget: usize) -> SendBatch<'_> {
        SendBatch {
            queue_id: 7,
            queue: "q",
            dedup_window: std::time::Duration::ZERO,
            messages: msgs,
            budget,
        }
    }

    #[test]
    fn one_plain_message_is_a_call_of_the_procedure() {
        let store = <MySqlStore as Server<sqlx::MySql>>::new("sqlmq_");
        let msgs = [Message::new("x").priority(3).header("h", "v")];
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        let Shape::Call {
            queue,
            queue_id,
            message,
            headers,
        } = script.0
        else {
            panic!("not a call");
        };
        assert_eq!((queue.as_str(), queue_id, message.id), ("q", 7, msgs[0].id));
        assert_eq!(headers.as_deref(), Some(r#"{"h":"v"}"#));
        // Once the server refused it, one message is text too.
        store.procedure_refused.store(true, Ordering::Relaxed);
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        assert!(matches!(script.0, Shape::Text(_)));
    }

    #[test]
    fn plain_messages_become_one_script_of_literals_only() {
        let store = <MySqlStore as Server<sqlx::MySql>>::new("sqlmq_");
        let msgs = [
            Message::new("it's; DROP TABLE x; --").priority(3),
            Message::new("b"),
        ];
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        let Shape::Text(script) = script.0 else {
            panic!("not a script");
        };
        let text = script.text();
        assert!(text.starts_with("START TRANSACTION;INSERT INTO sqlmq_messages"));
        assert!(text.ends_with(";COMMIT"));
        // The caller's bytes appear only as hexadecimal.
        assert!(!text.contains("DROP"), "{text}");
        assert!(text.contains(&hex::encode("it's; DROP TABLE x; --")));
        assert!(text.contains(",7,3,NULL,NULL,NULL,X'"), "{text}");
        assert_eq!(text.matches(';').count(), 3);
    }

    #[test]
    fn keyed_delayed_or_oversized_batches_take_the_transaction_runner() {
        let store = <MySqlStore as Server<sqlx::MySql>>::new("sqlmq_");
        for m in [
            Message::new("x").idempotency_key("k"),
            Message::new("x").ordering_key("k"),
            Message::new("x").delay(std::time::Duration::from_secs(1)),
            Message::new("x").depends_on([crate::domain::MessageId::new()]),
        ] {
            let msgs = [Message::new("plain"), m];
            assert!(store.script_for(&batch(&msgs, 1 << 20)).unwrap().is_none());
        }
        let msgs = [Message::new(vec![0u8; 10_000]), Message::new("b")];
        assert!(store.script_for(&batch(&msgs, 8_000)).unwrap().is_none());
        assert!(store.script_for(&batch(&msgs, 1 << 20)).unwrap().is_some());
        let big: Vec<Message> = (0..10_000).map(|i| Message::new(format!("{i}"))).collect();
        assert!(store.script_for(&batch(&big, 64 << 20)).unwrap().is_none());
    }
}
