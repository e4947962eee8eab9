//! Opening a pool to a MySQL/MariaDB URL.

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySqlConnection, MySqlPool};

use crate::domain::{Error, Result};
use crate::store::rows::ConnectOptions;

/// Prepared statements cached per connection. sqlmq's statement texts are bounded (see
/// `statements.rs`) and fit; evictions would cost a round trip each.
const STATEMENT_CACHE_CAPACITY: usize = 512;

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
    let connect = connect.statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
    let port = connect.get_port();
    // One direct connection first: a pool would keep retrying until its acquire timeout and
    // then report only "pool timed out", hiding the cause (refused, bad password...).
    let first = tokio::time::timeout(
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
    first.close().await?;
    let lock_wait = options.lock_wait_timeout.as_secs().max(1);
    let pool = MySqlPoolOptions::new()
        .max_connections(options.max_connections.max(2))
        .acquire_timeout(options.connect_timeout)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                crate::nodelay::apply(port);
                let set = format!("SET SESSION innodb_lock_wait_timeout = {lock_wait}");
                conn.execute(sqlx::AssertSqlSafe(set)).await?;
                Ok(())
            })
        })
        .connect_with(connect)
        .await?;
    Ok(pool)
}
