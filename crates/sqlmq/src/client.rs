//! The entry point: a connection pool, the server's facts and the schema.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySqlConnection, MySqlPool};

use crate::domain::MigrationReport;
use crate::domain::QueueConfig;
use crate::domain::QueueStats;
use crate::domain::ServerInfo;
use crate::domain::TopicConfig;
use crate::domain::{Error, Result};
use crate::domain::{validate_name, validate_table_prefix};
use crate::queue::Queue;
use crate::store::mysql::migrate::check_not_newer;
use crate::store::mysql::schema::latest_version;
use crate::store::mysql::server;
use crate::store::mysql::{MySqlStore, send::statement_budget};
use crate::topic::Topic;
use crate::tx;

/// Default table prefix.
pub const DEFAULT_TABLE_PREFIX: &str = "sqlmq_";
/// Default largest message body: 1 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Default pool size of a client that opens its own pool.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// Default interval between a queue handle's housekeeping runs inside `receive` (promotion of
/// due messages, release of expired leases).
pub const DEFAULT_HOUSEKEEPING_INTERVAL: Duration = Duration::from_millis(250);
/// Default `innodb_lock_wait_timeout` on the client's own connections: queue statements should
/// never wait long for a lock, and a short wait turns a stuck lock into a retry.
pub const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(5);
/// Prepared statements cached per connection. sqlmq's statement texts are bounded (see
/// `store/statements.rs`) and fit; evictions would cost a round trip each.
const STATEMENT_CACHE_CAPACITY: usize = 512;
/// Default time allowed to open a connection (and to wait for a free one in the pool).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between prunes of expired idempotency keys (per client).
const DEDUP_PRUNE_INTERVAL: Duration = Duration::from_secs(60);

/// Options for a [`Client`].
///
/// ```no_run
/// # async fn f() -> sqlmq::Result<()> {
/// let client = sqlmq::Client::builder()
///     .table_prefix("app_mq_")
///     .max_payload_bytes(256 * 1024)
///     .max_connections(32)
///     .connect("mysql://root@127.0.0.1:3306/app")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    table_prefix: String,
    max_payload_bytes: usize,
    max_connections: u32,
    housekeeping_interval: Duration,
    lock_wait_timeout: Duration,
    connect_timeout: Duration,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            table_prefix: DEFAULT_TABLE_PREFIX.to_owned(),
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            housekeeping_interval: DEFAULT_HOUSEKEEPING_INTERVAL,
            lock_wait_timeout: DEFAULT_LOCK_WAIT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl ClientBuilder {
    /// Prefix of every table sqlmq creates (default `sqlmq_`), so that they can live in the
    /// application's own database. Up to 32 characters of `[A-Za-z0-9_]`.
    ///
    /// ```
    /// let b = sqlmq::Client::builder().table_prefix("mq_");
    /// # let _ = b;
    /// ```
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = prefix.into();
        self
    }

    /// Largest accepted message body in bytes (default 1 MiB, at most 16 MiB − 1 and below the
    /// server's `max_allowed_packet`).
    ///
    /// ```
    /// let b = sqlmq::Client::builder().max_payload_bytes(64 * 1024);
    /// # let _ = b;
    /// ```
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Size of the connection pool the client opens (default 16). Ignored by `from_pool`.
    ///
    /// ```
    /// let b = sqlmq::Client::builder().max_connections(4);
    /// # let _ = b;
    /// ```
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// How often `receive` also promotes due delayed messages and releases expired leases of its
    /// queue (default 250 ms). This bounds how late a delayed message or an expired lease is
    /// noticed when no maintenance service runs.
    ///
    /// ```
    /// let b = sqlmq::Client::builder().housekeeping_interval(std::time::Duration::from_millis(100));
    /// # let _ = b;
    /// ```
    pub fn housekeeping_interval(mut self, interval: Duration) -> Self {
        self.housekeeping_interval = interval;
        self
    }

    /// `innodb_lock_wait_timeout` for the client's own connections (default 5 s, whole seconds).
    ///
    /// ```
    /// let b = sqlmq::Client::builder().lock_wait_timeout(std::time::Duration::from_secs(2));
    /// # let _ = b;
    /// ```
    pub fn lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.lock_wait_timeout = timeout;
        self
    }

    /// Time allowed to open a connection, and to wait for a free pooled one (default 10 s).
    ///
    /// ```
    /// let b = sqlmq::Client::builder().connect_timeout(std::time::Duration::from_secs(3));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Open a pool to `url` (`mysql://user:password@host:port/database`) and connect.
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::builder().connect("mysql://root@127.0.0.1/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self, url: &str) -> Result<Client> {
        validate_table_prefix(&self.table_prefix)?;
        if !(url.starts_with("mysql://") || url.starts_with("mariadb://")) {
            return Err(Error::InvalidArgument(
                "the database URL must start with mysql:// or mariadb://".into(),
            ));
        }
        let options: MySqlConnectOptions = url
            .parse()
            .map_err(|e| Error::InvalidArgument(format!("invalid database URL: {e}")))?;
        let options = options.statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        let port = options.get_port();
        // One direct connection first: a pool would keep retrying until its acquire timeout
        // and then report only "pool timed out", hiding the cause (refused, bad password...).
        let first = tokio::time::timeout(
            self.connect_timeout,
            MySqlConnection::connect_with(&options),
        )
        .await
        .map_err(|_| {
            Error::from(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no connection to the database within {:?}",
                    self.connect_timeout
                ),
            )))
        })??;
        first.close().await?;
        let lock_wait = self.lock_wait_timeout.as_secs().max(1);
        let pool = MySqlPoolOptions::new()
            .max_connections(self.max_connections.max(2))
            .acquire_timeout(self.connect_timeout)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    crate::nodelay::apply(port);
                    let set = format!("SET SESSION innodb_lock_wait_timeout = {lock_wait}");
                    conn.execute(sqlx::AssertSqlSafe(set)).await?;
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        self.build(pool).await
    }

    /// Use an existing pool (for example the application's, so that `send_in` and `ack_in` share
    /// its transactions). Prefer a pool with `statement_cache_capacity` ≥ 256; the pool's own
    /// settings (lock wait timeout, time zone) are left as they are.
    ///
    /// ```no_run
    /// # async fn f(pool: sqlx::MySqlPool) -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::builder().from_pool(pool).await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_pool(self, pool: MySqlPool) -> Result<Client> {
        validate_table_prefix(&self.table_prefix)?;
        crate::nodelay::apply(pool.connect_options().get_port());
        self.build(pool).await
    }

    async fn build(self, pool: MySqlPool) -> Result<Client> {
        let store = MySqlStore::new(&self.table_prefix);
        let mut conn = pool.acquire().await?;
        let server = server::detect(&mut conn).await?;
        let max_payload = self.max_payload_bytes;
        if max_payload == 0 || max_payload >= 16 * 1024 * 1024 {
            return Err(Error::InvalidArgument(format!(
                "max_payload_bytes must be between 1 and 16 MiB - 1, got {max_payload}"
            )));
        }
        let budget = statement_budget(server.max_allowed_packet);
        if max_payload + 64 * 1024 > budget {
            return Err(Error::InvalidArgument(format!(
                "max_payload_bytes {max_payload} does not fit the server's max_allowed_packet \
                 ({} bytes): lower it or raise max_allowed_packet",
                server.max_allowed_packet
            )));
        }
        let schema = store.schema_version(&mut conn).await?;
        check_not_newer(schema)?;
        drop(conn);
        if schema >= 1 {
            let mut a = pool.acquire().await?;
            let mut b = pool.acquire().await?;
            store.verify_skip_locked(&mut a, &mut b).await?;
        }
        Ok(Client {
            inner: Arc::new(Inner {
                pool,
                store,
                server,
                schema: AtomicI64::new(schema),
                max_payload_bytes: max_payload,
                statement_budget: budget,
                housekeeping_interval: self.housekeeping_interval,
                owner: owner_id(),
                housekeeping: Mutex::default(),
                wakeups: Mutex::default(),
                sequencers: Mutex::default(),
                last_dedup_prune: Mutex::new(Instant::now()),
            }),
        })
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

/// A handle to sqlmq in one MySQL/MariaDB database. Cheap to clone; clones share the pool.
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
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub pool: MySqlPool,
    pub store: MySqlStore,
    pub server: ServerInfo,
    schema: AtomicI64,
    pub max_payload_bytes: usize,
    pub statement_budget: usize,
    pub housekeeping_interval: Duration,
    pub owner: String,
    /// When each queue or group last ran its housekeeping in this client.
    pub housekeeping: Mutex<HashMap<Subject, Instant>>,
    /// In-process wakeups: a worker consuming a queue registers a `Notify` here, and sends
    /// through this client notify it after their commit (a hint; polling stays the authority).
    pub wakeups: Mutex<HashMap<Subject, Arc<tokio::sync::Notify>>>,
    /// Background sequencers by (topic id, partition), started by local publishes.
    pub sequencers: Mutex<HashMap<(i32, i32), Arc<tokio::sync::Notify>>>,
    pub last_dedup_prune: Mutex<Instant>,
}

/// What in-process wakeups and housekeeping times are kept for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Subject {
    /// A queue, by id: woken by local sends.
    Queue(i32),
    /// A topic, by id: woken when local sequencing gave records their offsets.
    Topic(i32),
    /// A consumer group, by id (housekeeping).
    Group(i32),
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.inner.server.version)
            .field("table_prefix", &self.inner.store.st.prefix())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connect with default options. Reads the server's facts, refuses servers without a working
    /// `SKIP LOCKED` and schemas newer than this build, and warns (through `tracing`) when
    /// commits are not durable.
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::connect("mysql://root@127.0.0.1:3306/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Client> {
        ClientBuilder::default().connect(url).await
    }

    /// Options for a client.
    ///
    /// ```
    /// let builder = sqlmq::Client::builder().table_prefix("mq_");
    /// # let _ = builder;
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Create or upgrade the schema (idempotent, safe to run from several processes at once).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<MigrationReport> {
        let mut conn = self.inner.pool.acquire().await?;
        let report = self.inner.store.migrate(&mut conn).await?;
        drop(conn);
        if report.from_version == 0 {
            let mut a = self.inner.pool.acquire().await?;
            let mut b = self.inner.pool.acquire().await?;
            self.inner.store.verify_skip_locked(&mut a, &mut b).await?;
        }
        self.inner
            .schema
            .store(report.to_version, Ordering::Relaxed);
        Ok(report)
    }

    /// The schema version found at connect time (or set by `migrate`).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("schema v{}", client.schema_version()); }
    /// ```
    pub fn schema_version(&self) -> i64 {
        self.inner.schema.load(Ordering::Relaxed)
    }

    /// Facts about the server, read at connect time.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("{}", client.server().version); }
    /// ```
    pub fn server(&self) -> &ServerInfo {
        &self.inner.server
    }

    /// The connection pool (to open transactions for `send_in`/`ack_in`).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &MySqlPool {
        &self.inner.pool
    }

    /// The table prefix in use.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { assert_eq!(client.table_prefix(), "sqlmq_"); }
    /// ```
    pub fn table_prefix(&self) -> &str {
        self.inner.store.st.prefix()
    }

    /// The largest accepted body, in bytes.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { assert_eq!(client.max_payload_bytes(), 1 << 20); }
    /// ```
    pub fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload_bytes
    }

    /// The id recorded as owner of the leases this client takes (`host:pid:random`).
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("{}", client.owner_id()); }
    /// ```
    pub fn owner_id(&self) -> &str {
        &self.inner.owner
    }

    pub(crate) fn require_schema(&self) -> Result<()> {
        let found = self.schema_version();
        let required = latest_version();
        if found == required {
            Ok(())
        } else {
            Err(Error::SchemaOutdated { found, required })
        }
    }

    /// Create a queue, or update the configuration of an existing one (its messages are kept).
    /// Declaring queues at application start-up is the intended use.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// use sqlmq::{Backoff, QueueConfig};
    /// let config = QueueConfig::default().max_attempts(5).backoff("10s,1m,10m".parse()?);
    /// let q = client.create_queue("webhooks", config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_queue(&self, name: &str, config: QueueConfig) -> Result<Queue> {
        validate_name("queue", name)?;
        config.validate()?;
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        let row = self
            .inner
            .store
            .upsert_queue(&mut conn, name, &config)
            .await?;
        Ok(Queue::new(self.clone(), row.id, row.name))
    }

    /// Create a topic, or update the configuration of an existing one (partitions only grow).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let t = client.create_topic("orders", sqlmq::TopicConfig::default().partitions(8)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_topic(&self, name: &str, config: TopicConfig) -> Result<Topic> {
        validate_name("topic", name)?;
        config.validate()?;
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        let row = self
            .inner
            .store
            .upsert_topic(&mut conn, name, &config)
            .await?;
        Ok(Topic::new(self.clone(), row.id, row.name, row.config))
    }

    /// A handle to an existing topic.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let t = client.topic("orders").await?;
    /// # Ok(()) }
    /// ```
    pub async fn topic(&self, name: &str) -> Result<Topic> {
        validate_name("topic", name)?;
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        match self.inner.store.topic_by_name(&mut conn, name).await? {
            Some(row) => Ok(Topic::new(self.clone(), row.id, row.name, row.config)),
            None => Err(Error::UnknownTopic(name.to_owned())),
        }
    }

    /// Handles to every topic, by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for t in client.topics().await? { println!("{} ({} partitions)", t.name(), t.config().partitions) }
    /// # Ok(()) }
    /// ```
    pub async fn topics(&self) -> Result<Vec<Topic>> {
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        let rows = self.inner.store.all_topics(&mut conn).await?;
        Ok(rows
            .into_iter()
            .map(|r| Topic::new(self.clone(), r.id, r.name, r.config))
            .collect())
    }

    /// A handle to an existing queue.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// match client.queue("emails").await {
    ///     Ok(q) => println!("found {}", q.name()),
    ///     Err(sqlmq::Error::UnknownQueue(name)) => println!("no queue {name}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn queue(&self, name: &str) -> Result<Queue> {
        validate_name("queue", name)?;
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        match self.inner.store.queue_by_name(&mut conn, name).await? {
            Some(row) => Ok(Queue::new(self.clone(), row.id, row.name)),
            None => Err(Error::UnknownQueue(name.to_owned())),
        }
    }

    /// The configuration of every queue, by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for (name, config) in client.queue_configs().await? { println!("{name}: {config:?}") }
    /// # Ok(()) }
    /// ```
    pub async fn queue_configs(&self) -> Result<Vec<(String, QueueConfig)>> {
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        let rows = self.inner.store.all_queues(&mut conn).await?;
        Ok(rows.into_iter().map(|r| (r.name, r.config)).collect())
    }

    /// Counts of every queue's messages by state, sorted by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for s in client.queue_stats().await? { println!("{} {}", s.name, s.ready) }
    /// # Ok(()) }
    /// ```
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>> {
        self.require_schema()?;
        let store = &self.inner.store;
        let mut conn = self.inner.pool.acquire().await?;
        let queues = store.all_queues(&mut conn).await?;
        let counts = store.counts(&mut conn).await?;
        let mut out = Vec::with_capacity(queues.len());
        for q in queues {
            let [ready, scheduled, blocked, in_flight, dead] =
                counts.get(&q.id).copied().unwrap_or_default();
            let oldest = if ready > 0 {
                store.oldest_ready_us(&mut conn, q.id).await?
            } else {
                None
            };
            out.push(QueueStats {
                name: q.name,
                paused: q.paused,
                ready,
                scheduled,
                blocked,
                in_flight,
                dead,
                oldest_ready_age_ms: oldest.map(|us| (us.max(0) / 1000) as u64),
            });
        }
        Ok(out)
    }

    /// Delete a queue with all its messages and dead letters. Stop its producers first: a
    /// message sent while the queue is being deleted may be lost with it, and a `Queue` handle
    /// taken before the deletion is not re-checked on send (its messages would be orphans, never
    /// delivered).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.delete_queue("old-jobs").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let queue = self.queue(name).await?;
        queue.purge().await?;
        queue.purge_dead_letters().await?;
        let mut conn = self.inner.pool.acquire().await?;
        self.inner
            .store
            .delete_queue_row(&mut conn, queue.id())
            .await?;
        self.inner
            .housekeeping
            .lock()
            .expect("poisoned")
            .remove(&Subject::Queue(queue.id()));
        Ok(())
    }

    /// The wakeup probe over `queue_ids` (one non-locking query).
    pub(crate) async fn probe(
        &self,
        queue_ids: &[i32],
    ) -> Result<Vec<crate::store::mysql::probe::QueueSignal>> {
        if queue_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.inner.pool.acquire().await?;
        self.inner.store.probe(&mut conn, queue_ids).await
    }

    /// The wakeup probe over consumer groups `group_ids` (one non-locking query).
    pub(crate) async fn probe_groups(
        &self,
        group_ids: &[i32],
    ) -> Result<Vec<crate::store::mysql::probe::GroupSignal>> {
        let mut conn = self.inner.pool.acquire().await?;
        self.inner.store.probe_groups(&mut conn, group_ids).await
    }

    /// Every registered worker process.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for p in client.processes().await? { println!("{} {:?}", p.id, p.silent_for) }
    /// # Ok(()) }
    /// ```
    pub async fn processes(&self) -> Result<Vec<crate::domain::ProcessInfo>> {
        self.require_schema()?;
        let mut conn = self.inner.pool.acquire().await?;
        self.inner.store.processes(&mut conn).await
    }

    /// The in-process wakeup of `subject` (created on first use).
    pub(crate) fn wakeup(&self, subject: Subject) -> Arc<tokio::sync::Notify> {
        let mut map = self.inner.wakeups.lock().expect("poisoned");
        map.entry(subject).or_default().clone()
    }

    /// Wake this process's consumers of `subject`, if any wait.
    pub(crate) fn notify_local(&self, subject: Subject) {
        if let Some(n) = self.inner.wakeups.lock().expect("poisoned").get(&subject) {
            n.notify_waiters();
        }
    }

    /// Delete idempotency keys whose window has passed, if the last prune is a minute old.
    pub(crate) async fn prune_dedup_if_due(&self) -> Result<usize> {
        {
            let mut last = self.inner.last_dedup_prune.lock().expect("poisoned");
            if last.elapsed() < DEDUP_PRUNE_INTERVAL {
                return Ok(0);
            }
            *last = Instant::now();
        }
        let store = &self.inner.store;
        tx::run(&self.inner.pool, "prune_dedup", |conn, _| {
            Box::pin(store.prune_dedup(conn, 1000))
        })
        .await
    }
}
