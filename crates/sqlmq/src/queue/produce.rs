//! Sending: one message or an atomic batch, in a transaction of our own or the caller's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use super::Queue;
use crate::client::Subject;
use crate::coalesce::Sink;
use crate::domain::{
    Error, Message, MessageId, Result, Sent, check_headers, check_trackable_key,
    validate_concurrency_key, validate_key,
};
use crate::store::Backend;
use crate::store::rows::SendBatch;
use crate::telemetry;
use crate::tx;
use tracing::Instrument;

/// How a one-round-trip send ended: written, or (after a lost connection) not known for
/// every id.
enum OneShot {
    Written,
    Unsure,
}

/// Most dependencies one message may name.
const MAX_DEPENDENCIES: usize = 1000;

/// Longest accepted delay.
const MAX_DELAY: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

impl<B: Backend> Queue<B> {
    /// Send one message. Durable when this returns Ok (with `innodb_flush_log_at_trx_commit=1`).
    ///
    /// Sends made at the same time through this handle or its clones share one transaction
    /// and one commit (group commit, without waiting for a timer), each with its own answer:
    /// share a handle between producer tasks rather than looking the queue up per send. A send
    /// whose future is dropped after its batch was taken may still be written.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let sent = q.send(sqlmq::Message::new("hello")).await?;
    /// println!("sent {}", sent.id);
    /// # Ok(()) }
    /// ```
    pub async fn send(&self, mut message: Message) -> Result<Sent> {
        let span = self.send_span(std::slice::from_mut(&mut message));
        async move {
            self.check_messages(std::slice::from_ref(&message))?;
            let started = Instant::now();
            let sent = if message.idempotency_key.is_some() || message.tracked() {
                // Its dedup check reads the queue's window first, or its dependencies may be
                // refused: a transaction of its own.
                self.send_checked(std::slice::from_ref(&message))
                    .await?
                    .remove(0)
            } else {
                // Concurrent sends through this handle share a commit (see `coalesce.rs`).
                self.coalescer().write(message).await?
            };
            self.record_latency(started);
            Ok(sent)
        }
        .instrument(span)
        .await
    }

    /// The span of a send of `messages`, whose trace context each message carries from now on
    /// (see `telemetry/mod.rs`).
    fn send_span(&self, messages: &mut [Message]) -> tracing::Span {
        let n = messages.len();
        telemetry::send_span(
            self.name(),
            n,
            messages.iter_mut().map(|m| (m.id, &mut m.headers)),
        )
    }

    /// Send a batch atomically: at commit every message becomes visible at once, on any error
    /// none does. Any size is accepted (100 000 included); the batch is written in statements
    /// sized under `max_allowed_packet` and the 65 535-placeholder limit, all inside one
    /// transaction. Returns one [`Sent`] per message, in order.
    ///
    /// ```no_run
    /// # async fn f(q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let batch = (0..10_000).map(|i| sqlmq::Message::new(format!("job {i}"))).collect();
    /// let sent = q.send_batch(batch).await?;
    /// assert_eq!(sent.len(), 10_000);
    /// # Ok(()) }
    /// ```
    pub async fn send_batch(&self, mut messages: Vec<Message>) -> Result<Vec<Sent>> {
        let span = self.send_span(&mut messages);
        async move {
            self.check_messages(&messages)?;
            if messages.is_empty() {
                return Ok(Vec::new());
            }
            let started = Instant::now();
            let sent = self.send_checked(&messages).await?;
            self.record_latency(started);
            Ok(sent)
        }
        .instrument(span)
        .await
    }

    /// Send `messages` (checked already, not empty) atomically in a transaction of our own;
    /// counts them and wakes this client's local consumers.
    async fn send_checked(&self, messages: &[Message]) -> Result<Vec<Sent>> {
        let store = self.store();
        let budget = self.client.inner.settings.statement_budget;
        let ids: Vec<MessageId> = messages.iter().map(|m| m.id).collect();
        let ids = &ids;
        let sent = match self.send_one_shot(messages, ids, budget).await? {
            Some(sent) => sent,
            None => {
                // The ids the last attempt wrote (not those it found stored already: a resend
                // in the batch is in the table whether or not the batch committed).
                let written: Mutex<Vec<MessageId>> = Mutex::default();
                let written = &written;
                // Whether the last attempt replaced a waiting message: a change no read can
                // tell committed from rolled back.
                let replaced = AtomicBool::new(false);
                let replaced = &replaced;
                tx::run_resolving(
                    self.conns(),
                    "send",
                    |conn, _| {
                        Box::pin(async move {
                            let sent = self.send_with(conn, messages, budget).await?;
                            // (a replaced message was stored before: it proves nothing)
                            *written.lock().expect("poisoned") = sent
                                .iter()
                                .filter(|s| !s.duplicate && !s.replaced)
                                .map(|s| s.id)
                                .collect();
                            replaced.store(sent.iter().any(|s| s.replaced), Ordering::Relaxed);
                            Ok(sent)
                        })
                    },
                    // A lost connection during COMMIT: the batch is all or nothing, so it
                    // committed iff any id it wrote is in the table (nothing written: the
                    // answer is the same either way — but for a replacement only, which is
                    // sent again: replacing twice leaves the same message).
                    |conn, _| {
                        Box::pin(async move {
                            let written = written.lock().expect("poisoned").clone();
                            if written.is_empty() {
                                return Ok(!replaced.load(Ordering::Relaxed));
                            }
                            Ok(store.count_stored_messages(conn, &written).await? > 0)
                        })
                    },
                )
                .await?
            }
        };
        self.count_sent(&sent);
        self.client.notify_local(Subject::Queue(self.id()));
        Ok(sent)
    }

    /// Send one message inside the caller's transaction: it becomes visible when that
    /// transaction commits and disappears if it rolls back (the transactional outbox, without
    /// the relay). Pass `&mut tx` for a `sqlx::Transaction<'_, MySql>`. A connection that is not
    /// in a transaction gets one of its own for the call.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
    /// q.send_in(&mut tx, sqlmq::Message::new("order 42 placed")).await?;
    /// tx.commit().await?; // the order and its message, or neither
    /// # Ok(()) }
    /// ```
    pub async fn send_in(&self, conn: &mut B::Connection, message: Message) -> Result<Sent> {
        let mut sent = self.send_batch_in(conn, vec![message]).await?;
        Ok(sent.remove(0))
    }

    /// Send a batch inside the caller's transaction (see [`Queue::send_in`]). Errors are not
    /// retried here: the caller owns the transaction; `Error::is_retryable` tells whether
    /// running the whole transaction again can succeed.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// q.send_batch_in(&mut tx, vec![sqlmq::Message::new("a"), sqlmq::Message::new("b")]).await?;
    /// tx.rollback().await?; // nothing was sent
    /// # Ok(()) }
    /// ```
    pub async fn send_batch_in(
        &self,
        conn: &mut B::Connection,
        mut messages: Vec<Message>,
    ) -> Result<Vec<Sent>> {
        let span = self.send_span(&mut messages);
        async move {
            self.check_messages(&messages)?;
            if messages.is_empty() {
                return Ok(Vec::new());
            }
            let started = Instant::now();
            let budget = self.client.inner.settings.statement_budget;
            let msgs = &messages;
            let sent =
                tx::run_in::<B, _, _>(conn, |conn, _| Box::pin(self.send_with(conn, msgs, budget)))
                    .await?;
            self.count_sent(&sent);
            self.record_latency(started);
            Ok(sent)
        }
        .instrument(span)
        .await
    }

    /// Send plain messages in one self-committing round trip where the backend can (see
    /// `store/mysql/send_script.rs`). `None`: the batch needs the full send — it does not
    /// qualify, or one of its ids is stored already (a resend, whose answer the full send
    /// knows).
    async fn send_one_shot(
        &self,
        msgs: &[Message],
        ids: &[MessageId],
        budget: usize,
    ) -> Result<Option<Vec<Sent>>> {
        let store = self.store();
        let batch = SendBatch {
            queue_id: self.id(),
            dedup_window: Duration::ZERO,
            messages: msgs,
            budget,
        };
        let Some(script) = B::prepare_send_script(store, &batch)? else {
            return Ok(None);
        };
        let script = &script;
        let distinct = ids.iter().collect::<std::collections::HashSet<_>>().len();
        // Set when the resolver found none of the ids: the script or call may still be on its
        // way to the server (it holds no lock before it runs) and land before the next attempt.
        let unsure = AtomicBool::new(false);
        let unsure = &unsure;
        let ran = tx::run_own_resolving(
            self.conns(),
            "send",
            |conn, _| {
                Box::pin(async move {
                    B::send_script(store, conn, script).await?;
                    Ok(OneShot::Written)
                })
            },
            // A lost connection during the script: it wrote all of its ids or none (one
            // stored already fails it whole). All found: it committed. None: it did not. Some:
            // either it committed and some were consumed since, or it did not and the others
            // were stored before it (a resend). The full send then writes what is missing:
            // a resend's batch-mates are never lost; in the first case a consumed message is
            // sent again (a duplicate delivery, which at-least-once allows).
            |conn, _| {
                Box::pin(async move {
                    let found = store.count_stored_messages(conn, ids).await?;
                    Ok(match found {
                        0 => {
                            unsure.store(true, Ordering::Relaxed);
                            None
                        }
                        n if n == distinct => Some(OneShot::Written),
                        _ => Some(OneShot::Unsure),
                    })
                })
            },
        )
        .await;
        let written = || ids.iter().map(|&id| Sent::new(id)).collect();
        match ran {
            Ok(OneShot::Unsure) => Ok(None),
            Ok(OneShot::Written) => Ok(Some(written())),
            // An earlier attempt's script landed after its resolver looked: every id stored
            // (it writes all or none) is this send's own, not a duplicate of it.
            Err(e) if e.is_duplicate_key() && unsure.load(Ordering::Relaxed) => {
                let mut conn = self.conns().acquire().await?;
                let found = store.count_stored_messages(&mut *conn, ids).await?;
                Ok((found == distinct).then(written))
            }
            Err(e) if e.is_duplicate_key() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Write `msgs` (checked) in `conn`'s transaction, within the client's statement budget.
    pub(crate) async fn send_on(
        &self,
        conn: &mut B::Connection,
        msgs: &[Message],
    ) -> Result<Vec<Sent>> {
        let sent = self
            .send_with(conn, msgs, self.client.inner.settings.statement_budget)
            .await?;
        self.count_sent(&sent);
        Ok(sent)
    }

    /// Write `msgs` in `conn`'s transaction. The queue's dedup window is read only when some
    /// message carries an idempotency key.
    async fn send_with(
        &self,
        conn: &mut B::Connection,
        msgs: &[Message],
        budget: usize,
    ) -> Result<Vec<Sent>> {
        let dedup_window = if msgs.iter().any(|m| m.idempotency_key.is_some()) {
            self.row(conn).await?.config.dedup_window
        } else {
            Duration::ZERO
        };
        let batch = SendBatch {
            queue_id: self.id(),
            dedup_window,
            messages: msgs,
            budget,
        };
        super::enqueue::send::<B>(self.store(), conn, &batch).await
    }

    /// Reject bad input before anything is written.
    pub(crate) fn check_messages(&self, messages: &[Message]) -> Result<()> {
        self.client.require_schema()?;
        let mut replacing = std::collections::HashSet::new();
        for key in messages
            .iter()
            .filter(|m| m.replace)
            .filter_map(|m| m.idempotency_key.as_deref())
        {
            if !replacing.insert(key) {
                return Err(Error::InvalidArgument(format!(
                    "one send replaces by key {key:?} once; it holds two messages with it"
                )));
            }
        }
        let limit = self.client.max_payload_bytes();
        for m in messages {
            if m.body.len() > limit {
                return Err(Error::PayloadTooLarge {
                    size: m.body.len(),
                    limit,
                });
            }
            if m.delay > MAX_DELAY {
                return Err(Error::InvalidArgument(format!(
                    "delay {:?} exceeds 10 years",
                    m.delay
                )));
            }
            if m.deadline
                .is_some_and(|at| at > SystemTime::now() + MAX_DELAY)
            {
                return Err(Error::InvalidArgument(
                    "a deadline more than 10 years away".into(),
                ));
            }
            if let Some(t) = m.run_timeout
                && (t < Duration::from_millis(1) || t > MAX_DELAY)
            {
                return Err(Error::InvalidArgument(format!(
                    "run timeout {t:?}: between 1 ms and 10 years"
                )));
            }
            if let Some(k) = &m.ordering_key {
                validate_key("ordering key", k)?;
            }
            if let Some(k) = &m.concurrency_key {
                validate_concurrency_key(k)?;
                if m.ordering_key.is_some() {
                    return Err(Error::InvalidArgument(
                        "a message has an ordering key or a concurrency key, not both".into(),
                    ));
                }
            }
            if let Some(k) = &m.idempotency_key {
                validate_key("idempotency key", k)?;
            }
            if let Some(k) = &m.fairness_key {
                validate_key("fairness key", k)?;
            }
            if m.replace && (m.ordering_key.is_some() || m.concurrency_key.is_some() || m.tracked())
            {
                return Err(Error::InvalidArgument(
                    "a replacing message has no ordering or concurrency key, batch or \
                     dependencies"
                        .into(),
                ));
            }
            check_headers(&m.headers)?;
            if m.tracked() {
                check_trackable_key(m)?;
            }
            if m.depends_on.len() > MAX_DEPENDENCIES {
                return Err(Error::InvalidArgument(format!(
                    "a message depends on at most {MAX_DEPENDENCIES} messages, got {}",
                    m.depends_on.len()
                )));
            }
            if m.depends_on.contains(&m.id) {
                return Err(Error::InvalidArgument(
                    "a message cannot depend on itself".into(),
                ));
            }
        }
        Ok(())
    }

    fn count_sent(&self, sent: &[Sent]) {
        let dups = sent.iter().filter(|s| s.duplicate).count() as u64;
        let queue = self.name().to_owned();
        metrics::counter!(crate::telemetry::catalogue::MESSAGES_SENT.name(), "queue" => queue.clone())
            .increment(sent.len() as u64 - dups);
        if dups > 0 {
            metrics::counter!(crate::telemetry::catalogue::MESSAGES_DUPLICATE.name(), "queue" => queue).increment(dups);
        }
    }

    /// One send call's latency, from the call to its answer (a coalesced send's includes its
    /// wait for the batch).
    fn record_latency(&self, started: Instant) {
        metrics::histogram!(crate::telemetry::catalogue::SEND_SECONDS.name(), "queue" => self.name().to_owned())
            .record(started.elapsed().as_secs_f64());
    }
}

impl<B: Backend> Sink for Queue<B> {
    type Item = Message;
    type Answer = Sent;

    async fn write(&self, messages: &[Message]) -> Result<Vec<Sent>> {
        self.send_checked(messages).await
    }
}
