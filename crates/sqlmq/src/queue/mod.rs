//! Queues: work shared among competing consumers, each message handed to one at a time.
//!
//! [`Client::create_queue`](crate::Client::create_queue) (or `queue` for an existing one) gives
//! a [`Queue`]. [`Queue::send`] stores a [`Message`]; [`Queue::receive`] leases ready messages as
//! [`Delivery`]s, each with a [`Receipt`] that [`Queue::ack`] (done), [`Queue::nack`] (retry by
//! the queue's [`Backoff`], or dead letter after `max_attempts`) and [`Queue::extend`] take; a
//! lease that ends unsettled hands the message out again. The `_in` forms run in the caller's
//! transaction: a send commits with the business data, an ack with the handler's writes.
//! [`QueueConfig`] holds a queue's settings, [`RateLimit`] its rate, [`QueueStats`] its counts.
//!
//! ```no_run
//! use std::time::Duration;
//! use sqlmq::queue::{Backoff, QueueConfig};
//!
//! # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
//! let ladder = Backoff::Ladder(vec![Duration::from_secs(5), Duration::from_secs(60)]);
//! let config = QueueConfig::default().max_attempts(5).backoff(ladder);
//! let jobs = client.create_queue("jobs", config).await?;
//! jobs.send(sqlmq::Message::new("resize 42")).await?;
//! for delivery in jobs.receive(10, Duration::from_secs(30)).await? {
//!     jobs.ack(delivery.receipt()).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! ## Inside
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Queue`] handle |
//! | `produce.rs` | `send`, `send_batch` and their `_in` forms |
//! | `consume.rs` | `receive` (settling is the shared path of `consume/`) |
//! | `manage.rs` | pause, cancel, purge, stats, dead letters, maintenance |
//! | `fair.rs` | a fair queue's keys: weights, backlogs |
//! | `browse.rs` | messages looked at: by state, by id, by key |
//! | `durable.rs` | durable calls by receipt: a step's record, a sleep, an event wait |
//! | `run.rs` | [`Run`]: a durable run's calls by name, for consumers outside the worker |
//! | `journal.rs` | durable runs looked at: a run's journal, the events runs wait for |

mod browse;
mod consume;
mod durable;
mod enqueue;
mod fair;
mod journal;
mod limits;
mod lookups;
mod manage;
mod produce;
mod resend;
mod run;

pub use crate::domain::{
    AckReport, Backoff, Cancelled, DeadLetter, Delivery, FairnessKey, MAX_WEIGHT, Message,
    MessageId, NackOutcome, Progress, QueueConfig, QueueStats, RateLimit, Receipt, Sent,
};

pub(crate) use durable::Resolution;
pub use run::Run;

use std::sync::{Arc, OnceLock};

use crate::client::Client;
use crate::coalesce::Coalescer;
use crate::consume::Consumer;
use crate::consume::SourceId;
use crate::consume::methods::consume_methods;
use crate::domain::{Error, Result};
use crate::store::Backend;
use crate::store::SqlStore;
use crate::store::rows::QueueRow;

/// A handle to one queue. Cheap to clone.
///
/// ```no_run
/// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
/// let q = client.queue("emails").await?;
/// q.send(sqlmq::Message::new("hi")).await?;
/// # Ok(()) }
/// ```
pub struct Queue<B: Backend = crate::DefaultBackend> {
    client: Client<B>,
    inner: Arc<Handle<B>>,
}

struct Handle<B: Backend> {
    id: i32,
    name: String,
    /// Started by the first `send` (it needs a runtime), shared by the handle's clones.
    sends: OnceLock<Coalescer<Queue<B>>>,
    /// Started by the first durable write (a step's record, a run's ack), shared likewise
    /// (`durable.rs`).
    durable: OnceLock<Coalescer<durable::DurableWrites<B>>>,
    /// Whether the queue has limits, and whether its gate is known to be shut.
    limits: std::sync::Mutex<limits::LimitState>,
}

impl<B: Backend> Clone for Queue<B> {
    fn clone(&self) -> Self {
        Queue {
            client: self.client.clone(),
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Queue<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("name", &self.inner.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl<B: Backend> Queue<B> {
    pub(crate) fn new(client: Client<B>, id: i32, name: String, limited: bool) -> Queue<B> {
        Queue {
            client,
            inner: Arc::new(Handle {
                id,
                name,
                sends: OnceLock::new(),
                durable: OnceLock::new(),
                limits: std::sync::Mutex::new(limits::LimitState::new(limited)),
            }),
        }
    }

    /// This handle's send coalescer; its task works on a handle of its own, so that it ends
    /// when the last clone of this one is dropped.
    fn coalescer(&self) -> &Coalescer<Queue<B>> {
        self.inner
            .sends
            .get_or_init(|| Coalescer::start(self.detached()))
    }

    /// A handle of its own on this queue, for a coalescer's task (see [`Queue::coalescer`]).
    fn detached(&self) -> Queue<B> {
        Queue::new(
            self.client.clone(),
            self.id(),
            self.name().to_owned(),
            false,
        )
    }

    /// The cell of this handle's coalescer of durable writes (`durable.rs`).
    fn durable_cell(&self) -> &OnceLock<Coalescer<durable::DurableWrites<B>>> {
        &self.inner.durable
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
    pub fn client(&self) -> &Client<B> {
        &self.client
    }

    pub(crate) fn id(&self) -> i32 {
        self.inner.id
    }

    pub(crate) fn store(&self) -> &SqlStore<B> {
        self.client.store()
    }

    pub(crate) fn conns(&self) -> &crate::conns::Conns<B> {
        self.client.conns()
    }

    /// The queue as the shared consumption path sees it.
    pub(crate) fn consumer(&self) -> Consumer<'_, B> {
        Consumer {
            client: &self.client,
            id: SourceId::Queue(self.id()),
            name: self.name().to_owned(),
        }
    }

    /// The queue's current row (fresh configuration), inside `conn`.
    async fn row(&self, conn: &mut B::Connection) -> Result<QueueRow> {
        self.store()
            .queue_by_id(conn, self.id())
            .await?
            .ok_or_else(|| Error::UnknownQueue(self.name().to_owned()))
    }
}

consume_methods!(Queue, "Queue");
