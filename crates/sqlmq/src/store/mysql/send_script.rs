//! A send of plain messages in one round trip: `START TRANSACTION`, the INSERT into `messages`,
//! the INSERT into `ready` and `COMMIT`, as one [`Script`] — or, for a lone message, as one
//! prepared `CALL {p}send_plain(…)` of a procedure that runs the same four statements.
//!
//! Why the procedure, and what happens where the server refuses it: `procedures.rs`. A lone
//! send so measured 236–279 µs against 301–323 µs for the script, on a server whose plain
//! INSERT takes 172–226 µs (docs/BENCHMARKS.md, "Connections kept between transactions, and a
//! lone send as one statement"). A batch keeps the script: its rows go in two multi-row INSERTs
//! whatever their number, which a procedure taking one message's values cannot do.
//!
//! Only plain messages take this path — no idempotency key (its window is read first), no
//! ordering key (the message may be blocked behind an earlier one), no delay; anything else, or
//! a batch whose text would exceed 256 KiB (or the statement budget), goes through the
//! transaction runner.
//! An id stored already (a resend) fails the INSERT with 1062 and the script writes nothing:
//! the engine then runs the full send, which knows how to answer it.

use std::sync::atomic::Ordering;

use sqlx::MySqlConnection;

use super::MySqlStore;
use super::enqueue::{INSERT_MESSAGES, MESSAGE_ROW};
use super::procedures;
use super::script::{Lit, Script, rolled_back};
use crate::domain::{Error, Message, MessageId, Result};
use crate::store::body::enqueue::{INSERT_READY, READY_ROW};
use crate::store::rows::SendBatch;

/// Largest script text. A big batch gains nothing from saving round trips (it is a handful
/// of statements either way), and the server parses a long text of literals more slowly than
/// it binds the same values to a prepared statement: a batch of 10 000 was 25 % slower as one
/// script (docs/BENCHMARKS.md), so larger batches take the prepared path.
const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// The internal procedure's call (migration 9, `send_plain.sql`).
const CALL_SEND_PLAIN: &str = "CALL {p}send_plain(?, ?, ?, ?, ?)";

/// One send, ready to run.
pub struct SendScript(Prepared);

enum Prepared {
    /// Any number of messages as one text script.
    Text(Script),
    /// One message as the procedure's call.
    Call(PlainRow),
}

/// The values of a plain message's two rows.
struct PlainRow {
    id: MessageId,
    queue_id: i32,
    priority: i16,
    headers: Option<String>,
    body: Vec<u8>,
}

/// Whether `m` needs nothing but a row in `messages` and one in `ready`.
fn is_plain(m: &Message) -> bool {
    m.idempotency_key.is_none()
        && m.ordering_key.is_none()
        && m.concurrency_key.is_none()
        && m.delay.is_zero()
        && !m.tracked()
        && !m.timed()
        && m.fairness_key.is_none()
}

impl MySqlStore {
    /// The script for `batch`, if every message is plain and its text fits the budget: the
    /// procedure's call for a lone message while the server allows it, text otherwise.
    pub(super) fn script_for(&self, batch: &SendBatch<'_>) -> Result<Option<SendScript>> {
        let msgs = batch.messages;
        if msgs.is_empty() || !msgs.iter().all(is_plain) {
            return Ok(None);
        }
        // A fair queue's messages get start times (`store/body/fair.rs`); a queue whose mode
        // is not known yet goes the long way once, which reads it.
        if self.fair_modes.known(batch.queue_id) != Some(false) {
            return Ok(None);
        }
        // Twice the bodies (hexadecimal) plus a generous allowance per row, checked before
        // rendering anything; the rendered text is checked again below. (The call binds its
        // values, but whatever it is given may have to go as text, see `run_send_script`.)
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
        if let ([m], [h]) = (msgs, headers.as_slice())
            && self.state.send.load(Ordering::Relaxed)
        {
            return Ok(Some(SendScript(Prepared::Call(PlainRow {
                id: m.id,
                queue_id: batch.queue_id,
                priority: m.priority,
                headers: h.clone(),
                body: m.body.clone(),
            }))));
        }
        let rows: Vec<Row<'_>> = msgs
            .iter()
            .zip(&headers)
            .map(|(m, h)| Row {
                id: m.id,
                priority: m.priority,
                headers: h.as_deref(),
                body: &m.body,
            })
            .collect();
        let s = self.text_for(batch.queue_id, &rows);
        if s.len() > limit {
            return Ok(None);
        }
        Ok(Some(SendScript(Prepared::Text(s))))
    }

    /// The text script writing `rows` to queue `queue_id`.
    fn text_for(&self, queue_id: i32, rows: &[Row<'_>]) -> Script {
        let q = i64::from(queue_id);
        let mut s = Script::begin(self);
        let mut args = Vec::with_capacity(rows.len() * 7);
        for r in rows {
            args.extend([
                Lit::Bytes(r.id.bytes()),
                Lit::Int(q),
                Lit::Int(r.priority.into()),
                Lit::Null,
                Lit::Null,
                r.headers.map(str::as_bytes).into(),
                Lit::Bytes(r.body),
            ]);
        }
        let st = &self.st;
        s.push(
            &st.list_text(INSERT_MESSAGES, MESSAGE_ROW, rows.len()),
            &args,
        );
        args.clear();
        for r in rows {
            args.extend([
                Lit::Int(q),
                Lit::Int(r.priority.into()),
                Lit::Bytes(r.id.bytes()),
                Lit::Int(0),
                Lit::Int(0),
            ]);
        }
        s.push(&st.list_text(INSERT_READY, READY_ROW, rows.len()), &args);
        s.commit();
        s
    }

    /// Run a send's script (on an error its transaction is ended, see [`Script::run`]).
    pub(super) async fn run_send_script(
        &self,
        conn: &mut MySqlConnection,
        script: &SendScript,
    ) -> Result<()> {
        crate::failpoints::before_commit("send").await;
        let row = match &script.0 {
            Prepared::Text(s) => return s.run(conn).await,
            Prepared::Call(row) => row,
        };
        let called = sqlx::query(self.st.get(CALL_SEND_PLAIN))
            .bind(row.id.bytes())
            .bind(row.queue_id)
            .bind(row.priority)
            .bind(row.headers.as_deref())
            .bind(&row.body[..])
            .execute(&mut *conn)
            .await
            .map_err(Error::from);
        let err = match called {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        if !procedures::refused(&err) {
            // The procedure may have begun its transaction: end it.
            return Err(rolled_back(conn, err).await);
        }
        // Refused before it ran: nothing was begun or written. Send as text, from now on.
        procedures::give_up(&self.state.send, "send", 9, &err);
        let plain = Row {
            id: row.id,
            priority: row.priority,
            headers: row.headers.as_deref(),
            body: &row.body,
        };
        self.text_for(row.queue_id, &[plain]).run(conn).await
    }
}

/// One plain message's values, borrowed.
struct Row<'a> {
    id: MessageId,
    priority: i16,
    headers: Option<&'a str>,
    body: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that knows queue 7 is not fair.
    fn store() -> MySqlStore {
        let store = MySqlStore::with_prefix("sqlmq_");
        store.fair_modes.note(7, false);
        store
    }

    fn batch(msgs: &[Message], budget: usize) -> SendBatch<'_> {
        SendBatch {
            queue_id: 7,
            dedup_window: std::time::Duration::ZERO,
            messages: msgs,
            budget,
        }
    }

    fn text_of(script: &SendScript) -> &str {
        match &script.0 {
            Prepared::Text(s) => s.text(),
            Prepared::Call(_) => panic!("a call, not a script"),
        }
    }

    #[test]
    fn plain_messages_become_one_script_of_literals_only() {
        let store = store();
        let msgs = [
            Message::new("it's; DROP TABLE x; --").priority(3),
            Message::new("b"),
        ];
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        let text = text_of(&script);
        assert!(text.starts_with("START TRANSACTION;INSERT INTO sqlmq_messages"));
        assert!(text.ends_with(";COMMIT"));
        // The caller's bytes appear only as hexadecimal.
        assert!(!text.contains("DROP"), "{text}");
        assert!(text.contains(&hex::encode("it's; DROP TABLE x; --")));
        assert!(text.contains(",7,3,NULL,NULL,NULL,X'"), "{text}");
        assert_eq!(text.matches(';').count(), 3);
    }

    #[test]
    fn a_lone_plain_message_is_a_call_until_the_server_refuses_the_procedure() {
        let store = store();
        let msgs = [Message::new("x").priority(2)];
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        assert!(matches!(&script.0, Prepared::Call(r) if r.priority == 2 && r.queue_id == 7));
        // Cleared at the server's first refusal, for the store's clones too.
        store.clone().state.send.store(false, Ordering::Relaxed);
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        assert!(text_of(&script).starts_with("START TRANSACTION;INSERT INTO sqlmq_messages"));
    }

    #[test]
    fn keyed_delayed_or_oversized_batches_take_the_transaction_runner() {
        let store = store();
        for m in [
            Message::new("x").idempotency_key("k"),
            Message::new("x").ordering_key("k"),
            Message::new("x").delay(std::time::Duration::from_secs(1)),
            Message::new("x").depends_on([crate::domain::MessageId::new()]),
            Message::new("x").fairness_key("k"),
        ] {
            let msgs = [Message::new("plain"), m];
            assert!(store.script_for(&batch(&msgs, 1 << 20)).unwrap().is_none());
        }
        let msgs = [Message::new(vec![0u8; 10_000])];
        assert!(store.script_for(&batch(&msgs, 8_000)).unwrap().is_none());
        assert!(store.script_for(&batch(&msgs, 1 << 20)).unwrap().is_some());
        let big: Vec<Message> = (0..10_000).map(|i| Message::new(format!("{i}"))).collect();
        assert!(store.script_for(&batch(&big, 64 << 20)).unwrap().is_none());
    }

    #[test]
    fn a_fair_queue_or_one_not_known_yet_takes_the_transaction_runner() {
        let msgs = [Message::new("plain")];
        let unknown = MySqlStore::with_prefix("sqlmq_");
        assert!(
            unknown
                .script_for(&batch(&msgs, 1 << 20))
                .unwrap()
                .is_none()
        );
        let fair = store();
        fair.fair_modes.note(7, true);
        assert!(fair.script_for(&batch(&msgs, 1 << 20)).unwrap().is_none());
    }
}
