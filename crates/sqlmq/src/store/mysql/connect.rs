//! Opening a pool to a MySQL/MariaDB URL.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySqlConnection, MySqlPool, Row};

use crate::domain::{Error, Result};
use crate::store::rows::ConnectOptions;

/// Prepared statements cached per connection. sqlmq's statement texts are bounded (see
/// `statements.rs`) and fit; evictions would cost a round trip each.
const STATEMENT_CACHE_CAPACITY: usize = 512;

/// A pooled connection idle this long is pinged before it is handed out again.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);
/// How long a connection given back to the pool may take to read what is still owed to it
/// before it is closed instead (a healthy one answers a queued ROLLBACK in a round trip).
const RELEASE_READ: Duration = Duration::from_secs(5);

/// When a connection last failed (I/O error), in milliseconds since [`epoch`], plus one (zero:
/// never). Process-wide: a failure seen on any pool makes every pool ping the connections that
/// were idle at that moment before handing them out, so that the ones the same outage broke
/// (a server restart, a dropped network) are found by a ping rather than by a unit of work.
static LAST_FAILURE: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Record that a connection failed just now.
pub(crate) fn connection_failed() {
    let ms = epoch().elapsed().as_millis() as u64 + 1;
    LAST_FAILURE.fetch_max(ms, Ordering::Relaxed);
}

/// Whether a connection idle for `idle_for` should be pinged before it is used: idle long, or
/// idle since before the last connection failure.
fn needs_ping(idle_for: Duration) -> bool {
    if idle_for >= IDLE_BEFORE_PING {
        return true;
    }
    let last = LAST_FAILURE.load(Ordering::Relaxed);
    let idle_since = epoch().elapsed().saturating_sub(idle_for).as_millis() as u64;
    // One millisecond of slack either way: a failure in the same millisecond counts.
    last != 0 && last >= idle_since
}

/// Whether the server behind `conn` is a Galera node (`wsrep_on` ON; servers without Galera
/// have no such variable).
pub(super) async fn wsrep_on(conn: &mut MySqlConnection) -> Result<bool> {
    Ok(sqlx::query("SHOW VARIABLES LIKE 'wsrep_on'")
        .fetch_optional(&mut *conn)
        .await?
        .is_some_and(|row| {
            row.try_get::<String, _>(1)
                .is_ok_and(|v| v.eq_ignore_ascii_case("ON"))
        }))
}

/// Open a pool to `url` (`mysql://` or `mariadb://`): one direct connection first, then the
/// pool, whose connections get `TCP_NODELAY` and the lock wait timeout.
pub(super) async fn pool(url: &str, options: &ConnectOptions) -> Result<MySqlPool> {
    if !(url.starts_with("mysql://") || url.starts_with("mariadb://")) {
        return Err(Error::InvalidArgument(
            "the database URL must start with mysql:// or mariadb://".into(),
        ));
    }
    let connect: MySqlConnectOptions = url
        .parse()
        .map_err(|e| Error::InvalidArgument(format!("invalid database URL: {e}")))?;
    let mut connect = connect.statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    // A client key in PKCS#1 or SEC1 PEM, which native-tls would refuse, given as PKCS#8.
    let tls = super::tls::TlsParams::of(url);
    if let Some(key) = super::tls::pkcs8_client_key(&tls).map_err(Error::InvalidArgument)? {
        connect = connect.ssl_client_key_from_pem(key);
    }
    let port = connect.get_port();
    // One direct connection first: a pool would keep retrying until its acquire timeout and
    // then report only "pool timed out", hiding the cause (refused, bad password...).
    let mut first = tokio::time::timeout(
        options.connect_timeout,
        MySqlConnection::connect_with(&connect),
    )
    .await
    .map_err(|_| {
        Error::from(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no connection to the database within {:?}",
                options.connect_timeout
            ),
        )))
    })??;
    // Two Galera settings for our sessions (docs/design/round-trips.md):
    // - `wsrep_retry_autocommit` off: on a node, a statement of an autocommit transaction that
    //   an applier aborts is run again, outside any transaction; a script's second round trip
    //   (`script.rs`: the writes and the COMMIT of a claim or an ack, after the transaction's
    //   reads) would then write without the locks it was decided under — a lease for a message
    //   another node leased. The engine retries whole transactions itself.
    // - `wsrep_sync_wait` bit 1 on: a transaction's start waits until the node has applied what
    //   the cluster committed before it, so an ack sent through one node finds the lease a
    //   claim just wrote through another (connections spread by a balancer); without it such
    //   acks report the lease lost and the message comes back when the lease ends.
    let galera = wsrep_on(&mut first).await?;
    first.close().await?;
    let lock_wait = options.lock_wait_timeout.as_secs().max(1);
    let pool = MySqlPoolOptions::new()
        .max_connections(options.max_connections.max(2))
        .acquire_timeout(options.connect_timeout)
        // sqlx pings every connection it hands out by default: a round trip before every unit
        // of work. A connection used within the last second, with no connection failure since,
        // is as good as known alive; a unit that meets a dead one anyway is retried on another
        // (see `tx.rs`).
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if !needs_ping(meta.idle_for) {
                    return Ok(true);
                }
                Ok(conn.ping().await.is_ok())
            })
        })
        // A connection given back half-way through a reply — its user (one of sqlmq's reads,
        // the application's transaction) dropped while a packet was half read — would make the
        // pool's own test of it, a ping, wait with no end for bytes that never come, holding
        // its slot (sqlx 0.9 bounds neither; see `conns.rs`). Reading what is still owed to it,
        // within a bound, tells: a connection in step owes nothing, or a dropped transaction's
        // queued ROLLBACK answer. One that does not answer in time is closed.
        .after_release(|conn, _meta| {
            Box::pin(async move {
                let caught_up = tokio::time::timeout(RELEASE_READ, conn.flush()).await;
                Ok(matches!(caught_up, Ok(Ok(()))))
            })
        })
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                crate::nodelay::apply(port);
                // READ COMMITTED for the whole session, so that the pool's transactions begin
                // with a bare START TRANSACTION (see `BEGIN_POOLED`).
                let mut set = format!(
                    "SET SESSION innodb_lock_wait_timeout = {lock_wait}; \
                     SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
                );
                if galera {
                    set.push_str(
                        "; SET SESSION wsrep_retry_autocommit = 0, \
                         SESSION wsrep_sync_wait = @@session.wsrep_sync_wait | 1",
                    );
                }
                conn.execute(sqlx::AssertSqlSafe(set)).await?;
                Ok(())
            })
        })
        .connect_with(connect)
        .await?;
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_idle_since_before_a_failure_is_pinged() {
        assert!(needs_ping(IDLE_BEFORE_PING));
        std::thread::sleep(Duration::from_millis(5));
        // Idle since 3 ms ago: pinged only if a connection failed in the meantime.
        connection_failed();
        assert!(needs_ping(Duration::from_millis(3)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!needs_ping(Duration::from_millis(10)));
    }
}
