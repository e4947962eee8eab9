//! Following MySQL's/MariaDB's binary log: the rows sqlmq's commits write, read as a replica
//! reads them, from one connection, so that waiting consumers wake when another process sends
//! (and running handlers learn at once of a cancel).
//!
//! The server must write row events (`log_bin` on, `binlog_format=ROW`), and the user needs
//! `REPLICATION SLAVE` (to stream the log) and `BINLOG MONITOR` on MariaDB or `REPLICATION
//! CLIENT` on MySQL (to learn where the log ends). The follower registers as a replica with a
//! random server id of its own. Only five tables matter: a row inserted into `ready` (a
//! message became claimable), one inserted into `scheduled` (a delayed message: when it comes
//! due), an updated `queues` row (a resume), an updated `topic_partitions` row (records got
//! offsets) and a row inserted into `cancels` (an in-flight message cancelled). The queue's or topic's id (and a delayed message's time) is all the follower
//! reads of a row. Changes are reported at their
//! transaction's commit event, in commit order.
//!
//! The follower's connection speaks TLS as the URL says (`tls.rs`: `ssl-mode`, `ssl-ca`,
//! `ssl-cert`, `ssl-key`, read as sqlx reads them for the pool); under `PREFERRED` it does what
//! sqlx did for the pool, TLS when the pool's connections have it.
//!
//! The server may send a transaction's events before InnoDB has made its commit visible (the
//! binary log is written first): a claim woken by them can find nothing yet. The receiver
//! then probes again shortly (`client/notifications.rs`), so this costs milliseconds, never a
//! message.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::binlog::events::{EventData, RowsEventData};
use mysql_async::binlog::row::BinlogRow;
use mysql_async::binlog::value::BinlogValue;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, OptsBuilder, Value};
use percent_encoding::percent_decode_str;
use sqlx::{MySql, Pool, Row};

use super::MySqlStore;
use super::tls::{FollowerTls, TlsParams, follower_tls};
use crate::store::follow::{Change, Follow, FollowEnd, Followed};

/// How often the server sends a heartbeat on an idle stream: a stream silent for three times
/// as long is taken as lost (a server gone without closing the connection).
const HEARTBEAT: Duration = Duration::from_secs(5);

/// The tables whose rows wake consumers, by unprefixed name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// `ready`: inserted rows.
    Ready,
    /// `scheduled`: inserted rows (when they come due).
    Scheduled,
    /// `queues`: updated rows.
    Queues,
    /// `topic_partitions`: updated rows.
    Partitions,
    /// `cancels`: inserted rows (an in-flight message cancelled).
    Cancels,
}

impl Follow for sqlx::MySql {
    async fn follow(
        store: &MySqlStore,
        pool: &Pool<MySql>,
        url: &str,
        report: &(dyn Fn(Followed) + Send + Sync),
    ) -> FollowEnd {
        let (opts, tls) = match options(url) {
            Ok(o) => o,
            Err(why) => return FollowEnd::Off(why),
        };
        let database = mysql_async::Opts::from(opts.clone())
            .db_name()
            .unwrap_or_default()
            .to_owned();
        let (file, position) = match start(pool).await {
            Ok(p) => p,
            Err(end) => return end,
        };
        // TLS as the pool's connections: under PREFERRED, whatever sqlx chose for them (TLS
        // when the server offers it), learnt without a connection attempt of the follower's.
        let ssl = match tls {
            FollowerTls::Off => None,
            FollowerTls::Required(ssl) => Some(ssl),
            FollowerTls::Preferred(ssl) => match encrypted(pool).await {
                Ok(true) => Some(ssl),
                Ok(false) => None,
                Err(e) => return FollowEnd::Lost(format!("checking the server: {e}")),
            },
        };
        // The one connection beyond the pool, while notifications are live.
        let mut conn = match Conn::new(opts.ssl_opts(ssl)).await {
            Ok(c) => c,
            Err(e) => return FollowEnd::Lost(format!("connecting: {e}")),
        };
        let tables: HashMap<String, Watched> = [
            ("ready", Watched::Ready),
            ("scheduled", Watched::Scheduled),
            ("queues", Watched::Queues),
            ("topic_partitions", Watched::Partitions),
            ("cancels", Watched::Cancels),
        ]
        .into_iter()
        .map(|(t, w)| (format!("{}{t}", store.prefix()), w))
        .collect();
        // A heartbeat from the server on an idle stream (nanoseconds).
        let heartbeat = format!("SET @master_heartbeat_period = {}", HEARTBEAT.as_nanos());
        if let Err(e) = conn.query_drop(heartbeat).await {
            return FollowEnd::Lost(format!("setting the heartbeat: {e}"));
        }
        // A server id of its own: the server drops a replica's stream when another registers
        // with the same id. (Ids below 2^31 are left to real replicas.)
        let server_id = rand::random::<u32>() | 0x8000_0000;
        let request = BinlogStreamRequest::new(server_id)
            .with_filename(file.as_bytes())
            .with_pos(position);
        let mut stream = match conn.get_binlog_stream(request).await {
            Ok(s) => s,
            Err(e) => return refused(e),
        };
        report(Followed::Live);
        // The open transaction's changes, each once, in the order first seen (a set beside
        // the list: a batch of thousands of delayed messages is thousands of changes).
        let mut pending: Vec<Change> = Vec::new();
        let mut seen: HashSet<Change> = HashSet::new();
        loop {
            let event = match tokio::time::timeout(3 * HEARTBEAT, stream.next()).await {
                Err(_) => return FollowEnd::Lost("the stream went silent".into()),
                Ok(None) => return FollowEnd::Lost("the server ended the stream".into()),
                Ok(Some(Err(e))) => return refused(e),
                Ok(Some(Ok(event))) => event,
            };
            let data = match event.read_data() {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(e) => return FollowEnd::Lost(format!("reading an event: {e}")),
            };
            // Whether the event commits a transaction (an XID, or a `COMMIT` statement): its
            // changes are then visible (or about to be).
            let commit = match data {
                EventData::RowsEvent(rows) => {
                    let Some(tme) = stream.get_tme(rows.table_id()) else {
                        continue;
                    };
                    if tme.database_name() != database {
                        continue;
                    }
                    let Some(&table) = tables.get(tme.table_name().as_ref()) else {
                        continue;
                    };
                    let wanted = matches!(
                        (table, &rows),
                        (
                            Watched::Ready | Watched::Scheduled | Watched::Cancels,
                            RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_)
                        ) | (
                            Watched::Queues | Watched::Partitions,
                            RowsEventData::UpdateRowsEvent(_) | RowsEventData::UpdateRowsEventV1(_)
                        )
                    );
                    if !wanted {
                        continue;
                    }
                    for row in rows.rows(tme) {
                        let Ok((_, Some(after))) = row else { continue };
                        let change = match table {
                            Watched::Ready | Watched::Queues => int(&after, 0).map(Change::Queue),
                            Watched::Partitions => int(&after, 0).map(Change::Topic),
                            // (id, queue_id, …)
                            Watched::Cancels => int(&after, 1).map(Change::Cancel),
                            // (id, queue_id, priority, run_at, …)
                            Watched::Scheduled => int(&after, 1)
                                .zip(micros(&after, 3))
                                .map(|(queue, at_us)| Change::Due { queue, at_us }),
                        };
                        let Some(change) = change else { continue };
                        if seen.insert(change) {
                            pending.push(change);
                        }
                    }
                    false
                }
                EventData::XidEvent(_) => true,
                EventData::QueryEvent(q) => q.query().eq_ignore_ascii_case("COMMIT"),
                _ => false,
            };
            if commit {
                seen.clear();
                for change in pending.drain(..) {
                    report(Followed::Change(change));
                }
            }
        }
    }
}

/// Column `i` of `row` as an INT.
fn int(row: &BinlogRow, i: usize) -> Option<i32> {
    match row.as_ref(i) {
        Some(BinlogValue::Value(Value::Int(v))) => i32::try_from(*v).ok(),
        _ => None,
    }
}

/// Column `i` of `row`, a DATETIME(6) in UTC, as microseconds since the Unix epoch.
fn micros(row: &BinlogRow, i: usize) -> Option<i64> {
    match row.as_ref(i) {
        Some(BinlogValue::Value(Value::Date(y, mo, d, h, mi, s, us))) => {
            let days = days_from_civil(i64::from(*y), i64::from(*mo), i64::from(*d));
            let secs = days * 86_400 + i64::from(*h) * 3_600 + i64::from(*mi) * 60 + i64::from(*s);
            Some(secs * 1_000_000 + i64::from(*us))
        }
        _ => None,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether the pool's connections are encrypted (a session's `Ssl_cipher` is empty without
/// TLS). A plain text statement: not every server prepares SHOW.
async fn encrypted(pool: &Pool<MySql>) -> Result<bool, sqlx::Error> {
    let row = sqlx::raw_sql("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_optional(pool)
        .await?;
    Ok(row
        .and_then(|r| r.try_get::<String, _>(1).ok())
        .is_some_and(|cipher| !cipher.is_empty()))
}

/// The follower's connection options, from sqlmq's URL (`mysql://user:password@host:port/db`
/// and sqlx's `socket`, `ssl-mode`, `ssl-ca`, `ssl-cert` and `ssl-key` parameters).
fn options(url: &str) -> Result<(OptsBuilder, FollowerTls), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("invalid database URL: {e}"))?;
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    let mut opts = OptsBuilder::default()
        .ip_or_hostname(parsed.host_str().unwrap_or("localhost"))
        .tcp_port(parsed.port().unwrap_or(3306))
        .user(Some(decode(parsed.username())).filter(|u| !u.is_empty()))
        .pass(parsed.password().map(decode))
        .db_name(Some(decode(parsed.path().trim_start_matches('/'))).filter(|d| !d.is_empty()))
        .prefer_socket(false);
    if let Some((_, socket)) = parsed.query_pairs().find(|(key, _)| key == "socket") {
        opts = opts.socket(Some(socket.into_owned()));
    }
    let tls = follower_tls(&TlsParams::of(url))?;
    Ok((opts, tls))
}

/// Check that the server writes row events, and find where its binary log ends: on a
/// connection of the client's own pool, so that a server without the log (or a user without
/// the grant) never sees a connection beyond the pool.
async fn start(pool: &Pool<MySql>) -> Result<(String, u64), FollowEnd> {
    let lost = |e: sqlx::Error| FollowEnd::Lost(format!("checking the server: {e}"));
    let mut conn = pool.acquire().await.map_err(lost)?;
    let (log_bin, format): (i64, String) =
        sqlx::query_as("SELECT CAST(@@log_bin AS SIGNED), CAST(@@binlog_format AS CHAR)")
            .fetch_one(&mut *conn)
            .await
            .map_err(lost)?;
    if log_bin == 0 {
        return Err(FollowEnd::Off(
            "the server's binary log is off (start it with --log-bin --binlog-format=ROW)".into(),
        ));
    }
    if !format.eq_ignore_ascii_case("ROW") {
        return Err(FollowEnd::Off(format!(
            "binlog_format is {format}; notifications need ROW (SET GLOBAL binlog_format=ROW)"
        )));
    }
    // MySQL 8.4 renamed the statement; MariaDB and older MySQL know the old one. (Plain text
    // statements: not every server prepares SHOW.)
    let mut status = sqlx::raw_sql("SHOW MASTER STATUS")
        .fetch_optional(&mut *conn)
        .await;
    if matches!(&status, Err(e) if number(e) == Some(1064)) {
        status = sqlx::raw_sql("SHOW BINARY LOG STATUS")
            .fetch_optional(&mut *conn)
            .await;
    }
    let row = match status {
        Ok(Some(row)) => row,
        Ok(None) => {
            return Err(FollowEnd::Off(
                "SHOW MASTER STATUS answers nothing: the binary log is off".into(),
            ));
        }
        Err(e) => {
            return Err(match number(&e) {
                Some(n) if DENIED.contains(&n) => denied(&e.to_string()),
                _ => lost(e),
            });
        }
    };
    let file: Option<String> = row.try_get(0).ok();
    let position: Option<u64> = row.try_get(1).ok();
    match (file, position) {
        (Some(f), Some(p)) => Ok((f, p)),
        _ => Err(FollowEnd::Lost(
            "SHOW MASTER STATUS answered no position".into(),
        )),
    }
}

/// ER_SPECIFIC_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR.
const DENIED: [u16; 3] = [1227, 1045, 1044];

/// The server's error number of a sqlx error.
fn number(e: &sqlx::Error) -> Option<u16> {
    e.as_database_error()
        .and_then(|d| d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .map(|m| m.number())
}

/// Notifications off for want of a grant, saying which.
fn denied(message: &str) -> FollowEnd {
    FollowEnd::Off(format!(
        "the user may not read the binary log ({message}): GRANT REPLICATION SLAVE, BINLOG \
         MONITOR (MariaDB) or REPLICATION SLAVE, REPLICATION CLIENT (MySQL) ON *.* \
         (`sqlmq grants --notifications` prints it)"
    ))
}

/// A server error as a reason to stop: a missing privilege turns notifications off and says
/// which grant is missing; anything else is a lost stream, tried again.
fn refused(e: mysql_async::Error) -> FollowEnd {
    match &e {
        mysql_async::Error::Server(s) if DENIED.contains(&s.code) => denied(&s.message),
        _ => FollowEnd::Lost(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_gives_host_user_password_database_and_socket() {
        let (o, _) =
            options("mysql://us%40r:p%2Fss@db.example:3307/app?socket=/tmp/s.sock").unwrap();
        let o = mysql_async::Opts::from(o);
        assert_eq!(o.ip_or_hostname(), "db.example");
        assert_eq!(o.tcp_port(), 3307);
        assert_eq!(o.user(), Some("us@r"));
        assert_eq!(o.pass(), Some("p/ss"));
        assert_eq!(o.db_name(), Some("app"));
        assert_eq!(o.socket(), Some("/tmp/s.sock"));
    }

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 11, 26), 20_783);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn the_follower_speaks_tls_as_the_url_says() {
        let tls = |url: &str| options(url).unwrap().1;
        assert!(matches!(
            tls("mysql://root@h/db?ssl-mode=REQUIRED"),
            FollowerTls::Required(_)
        ));
        assert!(matches!(
            tls("mysql://root@h/db"),
            FollowerTls::Preferred(_)
        ));
        assert!(matches!(
            tls("mysql://root@h/db?ssl-mode=DISABLED"),
            FollowerTls::Off
        ));
        // What cannot be used turns notifications off with the reason.
        let why = options("mysql://root@h/db?ssl-mode=REQUIRED&ssl-key=/k.pem").unwrap_err();
        assert!(why.contains("ssl-cert"), "{why}");
    }
}
