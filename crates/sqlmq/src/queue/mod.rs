//! Queues: work distribution to competing consumers (SPEC §2).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Queue`] handle and [`QueueConfig`] |
//! | `produce.rs` | `send`, `send_batch` and their `_in` forms |
//! | `consume.rs` | `receive`, `ack`, `nack`, `extend` and their `_in` forms |
//! | `manage.rs` | pause, cancel, purge, stats, dead letters, maintenance |

mod consume;
mod manage;
mod produce;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use consume::{AckReport, MAX_LEASE, MAX_RECEIVE};
pub(crate) use consume::{check_lease, lost_to_error};
pub use manage::MaintenanceReport;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::retry_policy::{Backoff, DEFAULT_MAX_ATTEMPTS};

/// Default time an idempotency key is remembered.
pub const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// Per-queue settings.
///
/// ```
/// use std::time::Duration;
/// let config = sqlmq::QueueConfig::default()
///     .max_attempts(10)
///     .backoff("1s,10s,1m".parse().unwrap())
///     .dedup_window(Duration::from_secs(3600));
/// assert_eq!(config.max_attempts, 10);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Deliveries before a failing message becomes a dead letter (default 25). Every claim
    /// counts, so a message whose consumer keeps crashing also ends up dead instead of looping.
    pub max_attempts: u32,
    /// Wait before the next attempt after a nack without an explicit delay.
    pub backoff: Backoff,
    /// How long an idempotency key is remembered (default 24 h).
    pub dedup_window: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            dedup_window: DEFAULT_DEDUP_WINDOW,
        }
    }
}

impl QueueConfig {
    /// Set the attempts before dead-lettering (at least 1).
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().max_attempts(3);
    /// # let _ = c;
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Set the retry backoff.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().backoff(sqlmq::Backoff::Ladder(vec![std::time::Duration::from_secs(5)]));
    /// # let _ = c;
    /// ```
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Set how long idempotency keys are remembered.
    ///
    /// ```
    /// let c = sqlmq::QueueConfig::default().dedup_window(std::time::Duration::from_secs(600));
    /// # let _ = c;
    /// ```
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = window;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_attempts == 0 || self.max_attempts > 1_000_000 {
            return Err(Error::InvalidArgument(format!(
                "max_attempts must be 1..=1000000, got {}",
                self.max_attempts
            )));
        }
        if self.dedup_window > Duration::from_secs(366 * 24 * 3600) {
            return Err(Error::InvalidArgument(
                "dedup_window is longer than a year".into(),
            ));
        }
        self.backoff.validate()
    }
}

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
