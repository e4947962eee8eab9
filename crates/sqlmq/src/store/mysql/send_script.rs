//! A send of plain messages in one round trip: `START TRANSACTION`, the INSERT into `messages`,
//! the INSERT into `ready` and `COMMIT`, as one [`Script`].
//!
//! Only plain messages take this path — no idempotency key (its window is read first), no
//! ordering key (the message may be blocked behind an earlier one), no delay; anything else, or
//! a batch whose text would exceed 256 KiB (or the statement budget), goes through the
//! transaction runner.
//! An id stored already (a resend) fails the INSERT with 1062 and the script writes nothing:
//! the engine then runs the full send, which knows how to answer it.

use sqlx::MySqlConnection;

use super::MySqlStore;
use super::enqueue::{INSERT_MESSAGES, MESSAGE_ROW};
use super::script::{Lit, Script};
use crate::domain::{Message, Result};
use crate::store::body::enqueue::{INSERT_READY, READY_ROW};
use crate::store::rows::SendBatch;

/// Largest script text. A big batch gains nothing from saving round trips (it is a handful
/// of statements either way), and the server parses a long text of literals more slowly than
/// it binds the same values to a prepared statement: a batch of 10 000 was 25 % slower as one
/// script (docs/BENCHMARKS.md), so larger batches take the prepared path.
const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// One send, ready to run.
pub struct SendScript(Script);

/// Whether `m` needs nothing but a row in `messages` and one in `ready`.
fn is_plain(m: &Message) -> bool {
    m.idempotency_key.is_none()
        && m.ordering_key.is_none()
        && m.concurrency_key.is_none()
        && m.delay.is_zero()
        && !m.tracked()
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
        let q = i64::from(batch.queue_id);
        let mut s = Script::begin();
        let mut args = Vec::with_capacity(msgs.len() * 7);
        for (m, h) in msgs.iter().zip(&headers) {
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
        if s.len() > limit {
            return Ok(None);
        }
        Ok(Some(SendScript(s)))
    }

    /// Run a send's script (on an error its transaction is ended, see [`Script::run`]).
    pub(super) async fn run_send_script(
        &self,
        conn: &mut MySqlConnection,
        script: &SendScript,
    ) -> Result<()> {
        crate::failpoints::before_commit("send").await;
        script.0.run(conn).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Server;

    fn batch(msgs: &[Message], budget: usize) -> SendBatch<'_> {
        SendBatch {
            queue_id: 7,
            dedup_window: std::time::Duration::ZERO,
            messages: msgs,
            budget,
        }
    }

    #[test]
    fn plain_messages_become_one_script_of_literals_only() {
        let store = <MySqlStore as Server<sqlx::MySql>>::new("sqlmq_");
        let msgs = [Message::new("it's; DROP TABLE x; --").priority(3)];
        let script = store.script_for(&batch(&msgs, 1 << 20)).unwrap().unwrap();
        let text = script.0.text();
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
        let msgs = [Message::new(vec![0u8; 10_000])];
        assert!(store.script_for(&batch(&msgs, 8_000)).unwrap().is_none());
        assert!(store.script_for(&batch(&msgs, 1 << 20)).unwrap().is_some());
        let big: Vec<Message> = (0..10_000).map(|i| Message::new(format!("{i}"))).collect();
        assert!(store.script_for(&batch(&big, 64 << 20)).unwrap().is_none());
    }
}
