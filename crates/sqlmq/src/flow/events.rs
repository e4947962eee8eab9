//! Events for durable runs: [`Client::emit_event`] keeps an event and wakes the runs suspended
//! in [`JobContext::wait_for_event`](crate::JobContext::wait_for_event) for it.
//!
//! Semantics, decided once:
//!
//! - **Kept for the flow retention.** An event is kept for the client's flow retention (7 days
//!   by default): a run that starts waiting after the emit, within it, gets the event at once.
//!   An event nobody waits for is kept all the same, then dropped (no error: the emitter
//!   cannot know whether a run will wait).
//! - **The first emit wins.** While an event is kept, later emits of its name change nothing
//!   ([`Emitted::kept`] is false): a name is one occurrence (`order-42-shipped`), as an
//!   idempotency key is one send.
//! - **Every waiter gets it.** All runs waiting for the name wake, and each records the same
//!   payload.
//!
//! The emit and a run registering its wait cannot miss each other: the emit inserts the event,
//! then reads the waiters with a locking read; the run inserts its wait, then reads the event
//! with a locking read. Whichever commits second sees the other's row (on MySQL the locking
//! read waits for the other's uncommitted row; SQLite's writers take turns).

use serde::Serialize;

use crate::client::{Client, Subject};
use crate::domain::{Emitted, Result, check_durable_name, check_durable_size, micros_of};
use crate::store::Backend;
use crate::tx;

impl<B: Backend> Client<B> {
    /// Emit the event `name` with `payload` (JSON, at most
    /// [`MAX_STEP_RESULT`](crate::flow::MAX_STEP_RESULT) bytes) and wake the runs waiting for
    /// it. See the module's semantics: kept for the flow retention, the first emit wins, every
    /// waiter gets it. Emitting a name nobody waits for is not an error.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.emit_event("order-42-shipped", &serde_json::json!({"carrier": "DHL"})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn emit_event(&self, name: &str, payload: &impl Serialize) -> Result<Emitted> {
        self.require_schema()?;
        let payload = event_payload(name, payload)?;
        let payload = &payload;
        let (emitted, queues) = tx::run(self.conns(), "emit_event", |conn, _| {
            Box::pin(self.emit_in(conn, name, payload))
        })
        .await?;
        for queue in queues {
            self.notify_local(Subject::Queue(queue));
        }
        Ok(emitted)
    }

    /// [`Client::emit_event`] inside the caller's transaction: the event exists, and its
    /// waiters wake, if and when that transaction commits (say, with the order row that
    /// marks the order shipped). Consumers in this process learn of the woken runs at their
    /// next probe or notification rather than at once.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> anyhow::Result<()> {
    /// let mut tx = client.begin().await?;
    /// sqlx::query("UPDATE orders SET shipped = 1 WHERE id = 42").execute(&mut *tx).await?;
    /// client.emit_event_in(&mut tx, "order-42-shipped", &"DHL").await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn emit_event_in(
        &self,
        conn: &mut B::Connection,
        name: &str,
        payload: &impl Serialize,
    ) -> Result<Emitted> {
        self.require_schema()?;
        let payload = event_payload(name, payload)?;
        Ok(self.emit_in(conn, name, &payload).await?.0)
    }

    /// Wake the runs waiting under `name` without keeping an event (a child run's end wakes
    /// its parent's join, which looks at the child itself). Returns how many woke.
    pub(crate) async fn wake_waiters(&self, name: &str) -> Result<u64> {
        let (woken, queues) = tx::run(self.conns(), "wake", |conn, _| {
            Box::pin(self.wake_in(conn, name))
        })
        .await?;
        for queue in queues {
            self.notify_local(Subject::Queue(queue));
        }
        Ok(woken)
    }

    /// Put the runs waiting under `name` back in line; they wait no more (a waiter found in
    /// flight instead decides for itself, holding its lease). How many woke, and their queues.
    async fn wake_in(&self, conn: &mut B::Connection, name: &str) -> Result<(u64, Vec<i32>)> {
        let store = self.store();
        let mut woken = 0;
        let mut queues = Vec::new();
        for (id, queue) in store.waiters(conn, name).await? {
            if store.wake_now(conn, queue, id).await? {
                woken += 1;
                if !queues.contains(&queue) {
                    queues.push(queue);
                }
            }
        }
        store.unwait_event(conn, name).await?;
        Ok((woken, queues))
    }

    /// Keep the event, then wake its waiters: what the emit did, and the queues of the runs
    /// it woke.
    async fn emit_in(
        &self,
        conn: &mut B::Connection,
        name: &str,
        payload: &[u8],
    ) -> Result<(Emitted, Vec<i32>)> {
        let store = self.store();
        let retention = micros_of(self.inner.settings.flow_retention);
        let kept = store.emit_event(conn, name, payload, retention).await?;
        let (woken, queues) = if kept {
            self.wake_in(conn, name).await?
        } else {
            (0, Vec::new())
        };
        Ok((Emitted { kept, woken }, queues))
    }
}

fn event_payload(name: &str, payload: &impl Serialize) -> Result<Vec<u8>> {
    check_durable_name("event", name)?;
    let bytes = serde_json::to_vec(payload)?;
    check_durable_size(&bytes)?;
    Ok(bytes)
}
