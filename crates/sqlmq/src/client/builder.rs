//! Building a [`Client`]: options, then a URL or an existing pool.

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Pool;

use super::wakeups::Wake;
use super::{Client, Database, Inner, Settings, owner_id};
use crate::domain::{Error, Result, check_not_newer, validate_table_prefix};
use crate::store::Backend;
use crate::store::SqlStore;
use crate::store::rows::{ConnectOptions, Pools};

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
    notifications: bool,
    flow_retention: Duration,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            table_prefix: Self::DEFAULT_TABLE_PREFIX.to_owned(),
            max_payload_bytes: Self::DEFAULT_MAX_PAYLOAD_BYTES,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            housekeeping_interval: Self::DEFAULT_HOUSEKEEPING_INTERVAL,
            lock_wait_timeout: Self::DEFAULT_LOCK_WAIT_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            notifications: true,
            flow_retention: crate::domain::FLOW_RETENTION,
        }
    }
}

/// The defaults of a client's options.
impl ClientBuilder {
    /// Default table prefix: `sqlmq_` (see [`ClientBuilder::table_prefix`]).
    ///
    /// ```
    /// use sqlmq::client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_TABLE_PREFIX, "sqlmq_");
    /// // A second set of tables beside the default one:
    /// let prefix = format!("{}audit_", ClientBuilder::DEFAULT_TABLE_PREFIX);
    /// let b = sqlmq::Client::builder().table_prefix(prefix);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_TABLE_PREFIX: &str = "sqlmq_";

    /// Default largest message body: 1 MiB (see [`ClientBuilder::max_payload_bytes`]).
    ///
    /// ```
    /// use sqlmq::client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_MAX_PAYLOAD_BYTES, 1024 * 1024);
    /// let b = sqlmq::Client::builder()
    ///     .max_payload_bytes(4 * ClientBuilder::DEFAULT_MAX_PAYLOAD_BYTES);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

    /// Default pool size of a client that opens its own pool: 16 (see
    /// [`ClientBuilder::max_connections`]).
    ///
    /// ```
    /// use sqlmq::client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_MAX_CONNECTIONS, 16);
    /// let b = sqlmq::Client::builder()
    ///     .max_connections(2 * ClientBuilder::DEFAULT_MAX_CONNECTIONS);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

    /// Default interval between a queue handle's housekeeping runs inside `receive` (promotion
    /// of due messages, release of expired leases): 250 ms (see
    /// [`ClientBuilder::housekeeping_interval`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_HOUSEKEEPING_INTERVAL, Duration::from_millis(250));
    /// let b = sqlmq::Client::builder()
    ///     .housekeeping_interval(ClientBuilder::DEFAULT_HOUSEKEEPING_INTERVAL / 5);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_HOUSEKEEPING_INTERVAL: Duration = Duration::from_millis(250);

    /// Default time a statement of the client's own connections may wait for a row lock: 5 s
    /// (see [`ClientBuilder::lock_wait_timeout`]). Queue statements should never wait long, and
    /// a short wait turns a stuck lock into a retry.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_LOCK_WAIT_TIMEOUT, Duration::from_secs(5));
    /// let b = sqlmq::Client::builder()
    ///     .lock_wait_timeout(ClientBuilder::DEFAULT_LOCK_WAIT_TIMEOUT * 2);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(5);

    /// Default time allowed to open a connection (and to wait for a free one in the pool):
    /// 10 s (see [`ClientBuilder::connect_timeout`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sqlmq::client::ClientBuilder;
    /// assert_eq!(ClientBuilder::DEFAULT_CONNECT_TIMEOUT, Duration::from_secs(10));
    /// let b = sqlmq::Client::builder()
    ///     .connect_timeout(ClientBuilder::DEFAULT_CONNECT_TIMEOUT * 3);
    /// # let _ = b;
    /// ```
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
}

impl ClientBuilder {
    /// Prefix of every table sqlmq creates (default `sqlmq_`,
    /// [`ClientBuilder::DEFAULT_TABLE_PREFIX`]), so that they can live in the application's own
    /// database. Up to 32 characters of `[A-Za-z0-9_]`.
    ///
    /// ```
    /// let b = sqlmq::Client::builder().table_prefix("mq_");
    /// # let _ = b;
    /// ```
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.table_prefix = prefix.into();
        self
    }

    /// Largest accepted message body in bytes (default 1 MiB,
    /// [`ClientBuilder::DEFAULT_MAX_PAYLOAD_BYTES`]; at most 16 MiB − 1 and below the server's
    /// `max_allowed_packet`).
    ///
    /// ```
    /// let b = sqlmq::Client::builder().max_payload_bytes(64 * 1024);
    /// # let _ = b;
    /// ```
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Size of the connection pool the client opens (default 16,
    /// [`ClientBuilder::DEFAULT_MAX_CONNECTIONS`]). Ignored by `from_pool`.
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
    /// queue (default 250 ms, [`ClientBuilder::DEFAULT_HOUSEKEEPING_INTERVAL`]). This bounds how
    /// late a delayed message or an expired lease is noticed when no maintenance service runs.
    ///
    /// ```
    /// let b = sqlmq::Client::builder().housekeeping_interval(std::time::Duration::from_millis(100));
    /// # let _ = b;
    /// ```
    pub fn housekeeping_interval(mut self, interval: Duration) -> Self {
        self.housekeeping_interval = interval;
        self
    }

    /// How long results of acks ([`Queue::ack_with_result`](crate::Queue::ack_with_result)) are
    /// kept, and how long this client's housekeeping keeps finished batches and the records of
    /// ended tracked messages (default 7 days, [`FLOW_RETENTION`](crate::flow::FLOW_RETENTION)). A
    /// dependency on a tracked message acked longer ago than that is refused as unknown.
    ///
    /// ```
    /// let b = sqlmq::Client::builder().flow_retention(std::time::Duration::from_secs(86_400));
    /// # let _ = b;
    /// ```
    pub fn flow_retention(mut self, retention: Duration) -> Self {
        self.flow_retention = retention;
        self
    }

    /// How long a statement of the client's own connections may wait for a row lock (default
    /// 5 s, [`ClientBuilder::DEFAULT_LOCK_WAIT_TIMEOUT`]; whole seconds; MySQL's
    /// `innodb_lock_wait_timeout`).
    ///
    /// ```
    /// let b = sqlmq::Client::builder().lock_wait_timeout(std::time::Duration::from_secs(2));
    /// # let _ = b;
    /// ```
    pub fn lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.lock_wait_timeout = timeout;
        self
    }

    /// Time allowed to open a connection, and to wait for a free pooled one (default 10 s,
    /// [`ClientBuilder::DEFAULT_CONNECT_TIMEOUT`]).
    ///
    /// ```
    /// let b = sqlmq::Client::builder().connect_timeout(std::time::Duration::from_secs(3));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether waiting consumers are woken by the database's commits (default: on). On
    /// MySQL/MariaDB the client then follows the server's binary log from one extra
    /// connection, which needs `binlog_format=ROW` and a grant to read the log (`sqlmq
    /// grants`); on SQLite it watches the database's files. Where that is not possible it
    /// says why once and polls as it would without ([`Client::notifications`]). Off: one
    /// connection fewer, and waiting costs a probe per 60–100 ms.
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::builder()
    ///     .notifications(false)
    ///     .connect("mysql://root@127.0.0.1/test")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn notifications(mut self, on: bool) -> Self {
        self.notifications = on;
        self
    }

    /// Open a pool to a MySQL/MariaDB `url` (`mysql://user:password@host:port/database`) and
    /// connect (see [`ClientBuilder::open`] for other backends).
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::builder().connect("mysql://root@127.0.0.1/test").await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "mysql")]
    pub async fn connect(self, url: &str) -> Result<Client<crate::MySql>> {
        self.open(url).await
    }

    /// Open a pool to `url` on backend `B` and connect; the type says which backend.
    ///
    /// ```no_run
    /// # async fn f() -> sqlmq::Result<()> {
    /// let client: sqlmq::Client<sqlmq::MySql> =
    ///     sqlmq::Client::builder().open("mysql://root@127.0.0.1/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn open<B: Backend>(self, url: &str) -> Result<Client<B>> {
        validate_table_prefix(&self.table_prefix)?;
        let options = ConnectOptions {
            max_connections: self.max_connections,
            connect_timeout: self.connect_timeout,
            lock_wait_timeout: self.lock_wait_timeout,
        };
        // The backend's error classes from the first connection attempt on.
        crate::store::register::<B>();
        let pools = B::connect(url, &options).await?;
        let follow = if self.notifications {
            Ok(url.to_owned())
        } else {
            Err("turned off (ClientBuilder::notifications)".to_owned())
        };
        self.build(pools, follow).await
    }

    /// Use an existing pool (for example the application's, so that `send_in` and `ack_in` share
    /// its transactions). The pool's own settings (lock wait timeout, time zone) are left as they
    /// are; prefer a statement cache of at least 256 statements. Its release check too: a pool
    /// sqlmq opens itself closes a connection given back half-way through a reply (its user
    /// dropped mid-read, which sqlx 0.9's own check would wait on forever); a pool of yours
    /// does that only if you give it such an `after_release`.
    ///
    /// ```no_run
    /// # async fn f(pool: sqlx::MySqlPool) -> sqlmq::Result<()> {
    /// let client = sqlmq::Client::builder().from_pool(pool).await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_pool<B: Backend>(self, pool: Pool<B>) -> Result<Client<B>> {
        validate_table_prefix(&self.table_prefix)?;
        B::adopt(&pool);
        self.build(
            Pools {
                write: pool.clone(),
                read: pool,
            },
            Err("a client made from a pool has no URL to follow the database with".to_owned()),
        )
        .await
    }

    /// The client over `pools`; `follow` is the URL its notifications follow, or why they are
    /// disabled.
    async fn build<B: Backend>(
        self,
        pools: Pools<B>,
        follow: std::result::Result<String, String>,
    ) -> Result<Client<B>> {
        let Pools { write: pool, read } = pools;
        let store = SqlStore::<B>::with_prefix(&self.table_prefix);
        let mut conn = pool.acquire().await?;
        let server = B::detect(&mut conn).await?;
        B::fit(&store, &server);
        let max_payload = self.max_payload_bytes;
        if max_payload == 0 || max_payload >= 16 * 1024 * 1024 {
            return Err(Error::InvalidArgument(format!(
                "max_payload_bytes must be between 1 and 16 MiB - 1, got {max_payload}"
            )));
        }
        let budget = B::statement_budget(&server);
        if max_payload + 64 * 1024 > budget {
            return Err(Error::InvalidArgument(format!(
                "max_payload_bytes {max_payload} does not fit the server's max_allowed_packet \
                 ({} bytes): lower it or raise max_allowed_packet",
                server.max_allowed_packet
            )));
        }
        let schema = store.schema_version(&mut conn).await?;
        check_not_newer(schema, SqlStore::<B>::latest_version())?;
        drop(conn);
        if schema >= 1 {
            B::verify_locking(&store, &pool).await?;
        }
        Ok(Client {
            inner: Arc::new(Inner {
                db: Database {
                    conns: crate::conns::Conns::new(pool.clone(), read.clone()),
                    pool,
                    reader: read,
                    store,
                    server,
                    schema: AtomicI64::new(schema),
                },
                settings: Settings {
                    max_payload_bytes: max_payload,
                    statement_budget: budget,
                    housekeeping_interval: self.housekeeping_interval,
                    flow_retention: self.flow_retention,
                    owner: owner_id(),
                },
                wake: Wake {
                    local: Mutex::default(),
                    waitroom: Default::default(),
                    notifications: super::notifications::Notifications::new(follow),
                },
                housekeeping: Default::default(),
                sequencing: Mutex::default(),
                outage: crate::outage::Outage::default(),
            }),
        })
    }
}
