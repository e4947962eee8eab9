//! The entry point: [`Client`], a handle to sqlmq in one database (a connection pool, the
//! server's facts, the schema), built by [`Client::connect`] or, with pool sizes, timeouts and
//! TLS, by [`ClientBuilder`]. Long-running users of a client wait out an unavailable database
//! and report it once through its [`Outage`]; [`NotificationStatus`] says whether waiting
//! consumers are woken by the database's commits or by probes.
//!
//! ```no_run
//! # async fn f() -> sqlmq::Result<()> {
//! let client = sqlmq::Client::builder()
//!     .max_connections(20)
//!     .connect("mysql://app@db.internal/shop")
//!     .await?;
//! client.migrate().await?;
//! # Ok(()) }
//! ```
//!
//! ## Inside
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Client`]: connecting, migrating, the pool and the server's facts |
//! | `builder.rs` | [`ClientBuilder`] and the defaults |
//! | `lookups.rs` | creating and finding queues and topics; stats; processes; the history list length; the probes |
//! | `wakeups.rs` | in-process wakeups after local commits, housekeeping schedules |
//! | `waitroom.rs` | long polls: a line per source, one shared prober per client |
//! | `delay.rs` | the adaptive delay between probes of an idle process |
//! | `notifications.rs` | the follower of the database's commits that wakes waiting consumers |

mod builder;
pub(crate) mod delay;
mod lookups;
pub(crate) mod migrate;
pub(crate) mod notifications;
mod waitroom;
mod wakeups;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Pool;

pub use crate::outage::{Outage, OutageReport};
pub use builder::ClientBuilder;
pub use notifications::NotificationStatus;
pub(crate) use waitroom::{Maintain, Watched};
pub(crate) use wakeups::{Backlog, Subject};

use crate::domain::{Error, GrantRole, MigrationReport, Result, ServerInfo};
use crate::store::Backend;
use crate::store::SqlStore;

/// A handle to sqlmq in one database. Cheap to clone; clones share the pool.
///
/// `B` is the backend; MySQL/MariaDB (`sqlx::MySql`, re-exported as `sqlmq::MySql`)
/// is the default, so `Client` means `Client<MySql>`.
///
/// ```no_run
/// use std::time::Duration;
/// use sqlmq::{Client, Message, QueueConfig};
///
/// # async fn f() -> sqlmq::Result<()> {
/// let client = Client::connect("mysql://root@127.0.0.1:3306/test").await?;
/// client.migrate().await?;
/// let emails = client.create_queue("emails", QueueConfig::default()).await?;
/// emails.send(Message::new("hello")).await?;
/// for d in emails.receive(10, Duration::from_secs(30)).await? {
///     emails.ack(d.receipt()).await?;
/// }
/// # Ok(()) }
/// ```
pub struct Client<B: Backend = crate::DefaultBackend> {
    pub(crate) inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for Client<B> {
    fn clone(&self) -> Self {
        Client {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// A client's state, in parts each owned by one concern: the database, the settings fixed at
/// build time, this process's wakeups, the housekeeping schedule, the topics' sequencing, the
/// outage report.
pub(crate) struct Inner<B: Backend> {
    pub db: Database<B>,
    pub settings: Settings,
    pub wake: wakeups::Wake,
    pub housekeeping: wakeups::Housekeeping,
    /// The background sequencers' work, by topic id (`topic/sequencer.rs` runs them).
    pub sequencing: Mutex<HashMap<i32, Arc<wakeups::Backlog>>>,
    /// Whether this client's long-running users wait for the database (`Client::outage`).
    pub outage: crate::outage::Outage,
}

/// The database: where statements run, its store, what the server is and its schema version.
pub(crate) struct Database<B: Backend> {
    /// Where sqlmq's transactions run, and the caller's (`Client::begin`, `pool`).
    pub pool: Pool<B>,
    /// The same pool as sqlmq's transactions take it: with the connections kept from their
    /// last ones (`conns.rs`).
    pub conns: crate::conns::Conns<B>,
    /// Where plain reads run (the same pool but for SQLite: see `Pools`).
    pub reader: Pool<B>,
    pub store: SqlStore<B>,
    pub server: ServerInfo,
    schema: AtomicI64,
}

/// What the builder fixed: limits, intervals and this client's owner id.
pub(crate) struct Settings {
    pub max_payload_bytes: usize,
    pub statement_budget: usize,
    pub housekeeping_interval: Duration,
    /// How long results, finished batches and ended tracked messages are kept.
    pub flow_retention: Duration,
    pub owner: String,
}

impl<B: Backend> Drop for Inner<B> {
    fn drop(&mut self) {
        // The follower holds only a weak reference; its connection closes with it.
        self.wake.notifications.stop();
    }
}

/// `host:pid:random`, recorded as the owner of the leases this client takes.
fn owner_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let suffix: u32 = rand::random();
    format!("{host}:{}:{suffix:08x}", std::process::id())
}

impl<B: Backend> std::fmt::Debug for Client<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("backend", &B::SCHEME)
            .field("server", &self.inner.db.server.version)
            .field("table_prefix", &self.inner.db.store.prefix())
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "mysql")]
impl Client<crate::MySql> {
    /// Connect to a MySQL/MariaDB `url` with default options. Reads the server's facts, refuses
    /// servers without a working `SKIP LOCKED` and schemas newer than this build, and warns
    /// (through `tracing`) when commits are not durable.
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::connect("mysql://root@127.0.0.1:3306/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Client> {
        ClientBuilder::default().connect(url).await
    }
}

impl Client {
    /// Longest name of a queue, topic, consumer group or broadcast member, and longest ordering
    /// or idempotency key of a message: 128 bytes (see [`validate_name`](crate::admin::validate_name)).
    ///
    /// ```
    /// use sqlmq::Client;
    /// assert_eq!(Client::MAX_NAME_LEN, 128);
    /// let name = format!("orders.{}", "x".repeat(Client::MAX_NAME_LEN - "orders.".len()));
    /// assert!(sqlmq::admin::validate_name("queue", &name).is_ok());
    /// assert!(sqlmq::admin::validate_name("queue", &format!("{name}x")).is_err());
    /// ```
    pub const MAX_NAME_LEN: usize = crate::domain::MAX_NAME_LEN;

    /// Most batches one [`Client::batches`] call lists: 1 000.
    ///
    /// ```
    /// assert_eq!(sqlmq::Client::MAX_BATCH_LIST, 1000);
    /// ```
    pub const MAX_BATCH_LIST: usize = 1000;

    /// Options for a client.
    ///
    /// ```
    /// let builder = sqlmq::Client::builder().table_prefix("mq_");
    /// # let _ = builder;
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }
}

impl<B: Backend> Client<B> {
    /// Connect to `url` on backend `B` with default options (see [`Client::connect`]).
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::<sqlmq::MySql>::open("mysql://root@127.0.0.1:3306/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(url: &str) -> Result<Client<B>> {
        ClientBuilder::default().open(url).await
    }

    /// Create or upgrade the schema (idempotent, safe to run from several processes at once).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<MigrationReport> {
        self.migrate_to(SqlStore::<B>::latest_version()).await
    }

    /// Take the schema to `version`: up, as [`Client::migrate`] does, or down, to roll back to
    /// an older sqlmq. Going down drops the tables the reversed migrations created, so it is
    /// refused ([`Error::DowngradeRefused`], nothing dropped) while any of them holds rows or
    /// worker processes are running; a migration that cannot be reversed refuses too.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let report = client.migrate_to(3).await?;
    /// println!("reversed {:?}", report.reverted);
    /// # Ok(()) }
    /// ```
    pub async fn migrate_to(&self, version: i64) -> Result<MigrationReport> {
        let store = &self.inner.db.store;
        let mut conn = self.inner.db.conns.acquire().await?;
        let report = migrate::migrate_to::<B>(store, &mut conn, version).await?;
        drop(conn);
        if report.from_version == 0 && report.to_version > 0 {
            B::verify_locking(store, &self.inner.db.pool).await?;
        }
        self.inner
            .db
            .schema
            .store(report.to_version, Ordering::Relaxed);
        Ok(report)
    }

    /// The GRANT statements that give `user`@`host` what `role` needs on this client's database
    /// and table prefix (the guide, "Least privilege"); empty on SQLite, which has no users.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for grant in client.grants(sqlmq::admin::GrantRole::Runtime, "app", "%").await? {
    ///     println!("{grant}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn grants(&self, role: GrantRole, user: &str, host: &str) -> Result<Vec<String>> {
        let mut conn = self.inner.db.conns.acquire().await?;
        B::grants(&self.inner.db.store, &mut conn, role, user, host).await
    }

    /// The schema version found at connect time (or set by `migrate`).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("schema v{}", client.schema_version()); }
    /// ```
    pub fn schema_version(&self) -> i64 {
        self.inner.db.schema.load(Ordering::Relaxed)
    }

    /// The schema version in the database now (read, not remembered).
    pub(crate) async fn read_schema_version(&self) -> Result<i64> {
        let mut conn = self.inner.db.reader.acquire().await?;
        self.inner.db.store.schema_version(&mut conn).await
    }

    /// Remember the schema version found (a worker that waited for `migrate`).
    pub(crate) fn set_schema_version(&self, version: i64) {
        self.inner.db.schema.store(version, Ordering::Relaxed);
    }

    /// The database's clock now: the clock every delay, lease, heartbeat and schedule of
    /// sqlmq is measured by (on SQLite, this process's).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let skew = client.database_time().await?.duration_since(std::time::SystemTime::now());
    /// println!("the database is {skew:?} ahead");
    /// # Ok(()) }
    /// ```
    pub async fn database_time(&self) -> Result<std::time::SystemTime> {
        let mut conn = self.inner.db.reader.acquire().await?;
        let us = B::now_us(&self.inner.db.store, &mut conn).await?;
        Ok(crate::domain::time_from_micros(us))
    }

    /// Facts about the server, read at connect time.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("{}", client.server().version); }
    /// ```
    pub fn server(&self) -> &ServerInfo {
        &self.inner.db.server
    }

    /// The connection pool of sqlmq's transactions (for SQLite, the process's one writer
    /// connection). Open the transactions of `send_in` and `ack_in` with [`Client::begin`],
    /// which starts them the way the backend needs.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let stats = client.pool().size();
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &Pool<B> {
        &self.inner.db.pool
    }

    /// Where sqlmq's own transactions take their connections (see `conns.rs`).
    pub(crate) fn conns(&self) -> &crate::conns::Conns<B> {
        &self.inner.db.conns
    }

    /// Where plain reads run: the same pool as [`Client::pool`] for a server database, the
    /// reader connections for SQLite. sqlmq's own reads take theirs through
    /// [`Client::conns`]; the store's tests read here.
    #[cfg(test)]
    pub(crate) fn reader(&self) -> &Pool<B> {
        &self.inner.db.reader
    }

    /// Begin a transaction for the `_in` methods (`send_in`, `ack_in`, `publish_in`...) and
    /// the application's own statements, started as the backend needs: READ COMMITTED on
    /// MySQL/MariaDB; `BEGIN IMMEDIATE` on SQLite, which takes the write lock at once (a
    /// deferred transaction that reads first and writes later fails with "database is
    /// locked" instead of waiting).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client, q: sqlmq::Queue) -> sqlmq::Result<()> {
    /// let mut tx = client.begin().await?;
    /// q.send_in(&mut tx, sqlmq::Message::new("hello")).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, B>> {
        crate::tx::begin_for_caller(&self.inner.db.pool).await
    }

    /// The table prefix in use.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { assert_eq!(client.table_prefix(), "sqlmq_"); }
    /// ```
    pub fn table_prefix(&self) -> &str {
        self.inner.db.store.prefix()
    }

    /// The largest accepted body, in bytes.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { assert_eq!(client.max_payload_bytes(), 1 << 20); }
    /// ```
    pub fn max_payload_bytes(&self) -> usize {
        self.inner.settings.max_payload_bytes
    }

    /// Whether this client's long-running users — the worker runtime, `sqlmq serve` — are
    /// waiting for the database (unreachable, at its connection limit, out of space), and since
    /// when. They retry rather than exit, and report here (see [`Outage`]).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) {
    /// if let Some(outage) = client.outage().current() {
    ///     eprintln!("waiting for the database since {:?}: {}", outage.since, outage.reason);
    /// }
    /// # }
    /// ```
    pub fn outage(&self) -> &crate::outage::Outage {
        &self.inner.outage
    }

    /// The id recorded as owner of the leases this client takes (`host:pid:random`).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("{}", client.owner_id()); }
    /// ```
    pub fn owner_id(&self) -> &str {
        &self.inner.settings.owner
    }

    /// The store, for engine code.
    pub(crate) fn store(&self) -> &SqlStore<B> {
        &self.inner.db.store
    }

    pub(crate) fn require_schema(&self) -> Result<()> {
        let found = self.schema_version();
        let required = SqlStore::<B>::latest_version();
        if found == required {
            Ok(())
        } else {
            Err(Error::SchemaOutdated { found, required })
        }
    }
}
