//! Peers: what a user would run instead of sqlmq, measured on the same machine in the same
//! run, with the same message count and body size, when their servers answer. A peer whose
//! server does not answer within [`CONNECT_TIMEOUT`] is skipped with one line, never failing
//! the bench.
//!
//! | file | peer | durable here? |
//! |---|---|---|
//! | `postgres.rs` | PostgreSQL, the same `SKIP LOCKED` queue pattern, plus its own raw baselines | yes, with `fsync=on`, `synchronous_commit=on` |
//! | `rabbitmq.rs` | RabbitMQ: durable queue, persistent messages, publisher confirms, manual acks | yes: a confirm follows the write to disk |
//! | `redis.rs` | Redis Streams: XADD, XREADGROUP, XACK | only with `appendonly yes` + `appendfsync always` (read from the server) |

pub mod postgres;
pub mod rabbitmq;
pub mod redis;

use std::ops::Range;
use std::time::Duration;

use super::backend::Db;
use super::context::Ctx;

/// Time a peer has to accept a connection before it is skipped.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Time the clean-up of one peer may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);

/// `(host, port)` of a `scheme://[user[:password]@]host[:port][/path]` URL.
pub fn host_port(url: &str, default_port: u16) -> Option<(String, u16)> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after.strip_prefix(':').and_then(|p| p.parse().ok());
        return Some((host.to_owned(), port.unwrap_or(default_port)));
    }
    match host_port.rsplit_once(':') {
        Some((h, p)) => Some((h.to_owned(), p.parse().ok()?)),
        None if !host_port.is_empty() => Some((host_port.to_owned(), default_port)),
        None => None,
    }
}

/// Ok when a TCP connection to the peer at `url` opens within [`CONNECT_TIMEOUT`]; otherwise
/// the reason to skip it.
pub async fn reach(name: &str, url: &str, default_port: u16) -> Result<(), String> {
    let Some((host, port)) = host_port(url, default_port) else {
        return Err(format!("{name}: cannot read host and port from its URL"));
    };
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("{name} not reachable at {host}:{port}: {e}")),
        Err(_) => Err(format!(
            "{name} not reachable at {host}:{port}: no answer within {CONNECT_TIMEOUT:?}"
        )),
    }
}

/// Sequence numbers `0..n` split into `parts` contiguous ranges (one per producer).
pub fn ranges(n: u64, parts: usize) -> Vec<Range<u64>> {
    let mut start = 0;
    super::raw::split(n, parts)
        .into_iter()
        .map(|count| {
            let r = start..start + count;
            start += count;
            r
        })
        .collect()
}

/// Remove what this run left on the peers it touched (tables, queues, streams). Best effort:
/// failures are reported on stderr.
pub async fn cleanup<B: Db>(ctx: &Ctx<B>) {
    let touched = ctx.peers_touched.lock().expect("poisoned").clone();
    for peer in touched {
        let done = match peer {
            "postgres" => tokio::time::timeout(CLEANUP_TIMEOUT, postgres::cleanup(ctx)).await,
            "rabbitmq" => tokio::time::timeout(CLEANUP_TIMEOUT, rabbitmq::cleanup(ctx)).await,
            "redis" => tokio::time::timeout(CLEANUP_TIMEOUT, redis::cleanup(ctx)).await,
            _ => continue,
        };
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("bench: could not clean up on {peer}: {e:#}"),
            Err(_) => eprintln!("bench: could not clean up on {peer}: no answer in time"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_host_and_port() {
        let hp = |u| host_port(u, 9);
        assert_eq!(
            hp("amqp://guest:guest@127.0.0.1:5672/%2f"),
            Some(("127.0.0.1".into(), 5672))
        );
        assert_eq!(hp("redis://127.0.0.1"), Some(("127.0.0.1".into(), 9)));
        assert_eq!(hp("postgres://u@db/test?x=1"), Some(("db".into(), 9)));
        assert_eq!(hp("redis://[::1]:7000"), Some(("::1".into(), 7000)));
        assert_eq!(hp("nonsense"), None);
        assert_eq!(ranges(5, 2), vec![0..3, 3..5]);
    }
}
