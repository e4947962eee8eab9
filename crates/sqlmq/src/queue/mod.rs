//! Queues: work distribution to competing consumers.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Queue`] handle |
//! | `produce.rs` | `send`, `send_batch` and their `_in` forms |
//! | `consume.rs` | `receive`, `ack`, `nack`, `extend` and their `_in` forms |
//! | `manage.rs` | pause, cancel, purge, stats, dead letters, maintenance |

mod consume;
mod manage;
mod produce;

use std::sync::Arc;

pub use consume::{MAX_LEASE, MAX_RECEIVE};
pub(crate) use consume::{check_lease, counted_acks, lost_to_error};

use crate::client::Client;
use crate::domain::{Error, Result};

/// A handle to one queue. Cheap to clone.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let q = client.queue("emails").await?;
/// q.send(sqlmq::Message::new("hi")).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Queue {
    client: Client,
    inner: Arc<Handle>,
}

struct Handle {
    id: i32,
    name: String,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl Queue {
    pub(crate) fn new(client: Client, id: i32, name: String) -> Queue {
        Queue {
            client,
            inner: Arc::new(Handle { id, name }),
        }
    }

    /// The queue's name.
    ///
    /// ```no_run
    /// # fn f(q: sqlmq::Queue) { println!("{}", q.name()); }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The client this handle belongs to.
    ///
    /// ```no_run
    /// # fn f(q: sqlmq::Queue) { let pool = q.client().pool(); }
    /// ```
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn id(&self) -> i32 {
        self.inner.id
    }

    fn store(&self) -> &crate::store::mysql::MySqlStore {
        &self.client.inner.store
    }

    fn pool(&self) -> &sqlx::MySqlPool {
        &self.client.inner.pool
    }

    /// The queue's current row (fresh configuration), inside `conn`.
    async fn row(
        &self,
        conn: &mut sqlx::MySqlConnection,
    ) -> Result<crate::store::mysql::queues::QueueRow> {
        self.store()
            .queue_by_id(conn, self.id())
            .await?
            .ok_or_else(|| Error::UnknownQueue(self.name().to_owned()))
    }
}
