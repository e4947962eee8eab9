//! Redis Streams: 16 producers `XADD` one entry each call, then 8 consumers of one consumer
//! group `XREADGROUP … COUNT 100 BLOCK 100` and `XACK` each batch. Acked entries stay in the
//! stream (trimming is a separate concern in Redis), as they stay in RabbitMQ's disk log
//! until compaction.
//!
//! Durability is read from the server: an `XADD` reply means the entry is on disk only with
//! `appendonly yes` and `appendfsync always`; with the defaults of this machine (`appendonly
//! no`, `save ""`) Redis keeps nothing on disk at all, and every message is gone when it stops.
//! redis-rs leaves Nagle on by default; the bench turns `TCP_NODELAY` on like the other
//! clients.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::streams::StreamReadReply;
use redis::{AsyncConnectionConfig, IntoConnectionInfo};
use tokio::task::JoinSet;

use super::{CONNECT_TIMEOUT, ranges, reach};
use crate::args::{CONSUMERS, MANY, RECEIVE_BATCH};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::{body, body_value};
use crate::outcome::Outcome;
use crate::raw;
use crate::report::{Figure, PeerInfo};
use crate::track::Tracker;

/// The consumer group.
const GROUP: &str = "bench";
/// How long one `XREADGROUP` blocks when the stream has nothing new, in milliseconds.
const BLOCK_MS: u64 = 100;
/// Longest wait for any reply.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// `peer.redis`.
pub async fn run<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let url = &ctx.peers.redis;
    if let Err(why) = reach("Redis", url, 6379).await {
        return Ok(Outcome::Skipped(why));
    }
    let mut conn = match connect(url).await {
        Ok(conn) => conn,
        Err(e) => return Ok(Outcome::Skipped(format!("Redis: cannot connect: {e:#}"))),
    };
    ctx.touch_peer("redis");
    let info = info(&mut conn).await?;
    let stream = ctx.peer_name("stream");
    redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async::<()>(&mut conn)
        .await?;

    let n = ctx.plan.peer_messages;
    let bar = ctx.bar("peer.redis");
    bar.phase(&format!("XADD, {MANY} producers"), n);
    // Connections are opened before the clock starts.
    let mut producers = Vec::with_capacity(MANY);
    for range in ranges(n, MANY) {
        producers.push((connect(url).await?, range));
    }
    let started = Instant::now();
    let mut set = JoinSet::new();
    for (mut conn, range) in producers {
        let (stream, bar) = (stream.clone(), bar.clone());
        set.spawn(async move {
            for seq in range {
                redis::cmd("XADD")
                    .arg(&stream)
                    .arg("*")
                    .arg("b")
                    .arg(body(seq))
                    .query_async::<String>(&mut conn)
                    .await?;
                bar.inc(1);
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    let produced = started.elapsed();

    bar.phase(&format!("XREADGROUP+XACK, {CONSUMERS} consumers"), n);
    let tracker = Arc::new(Tracker::new(n));
    tracker.sending_done();
    let mut consumers = Vec::with_capacity(CONSUMERS);
    for i in 0..CONSUMERS {
        consumers.push((connect(url).await?, format!("c{i}")));
    }
    let started = Instant::now();
    let mut set = JoinSet::new();
    for (mut conn, name) in consumers {
        let (stream, tracker, bar) = (stream.clone(), Arc::clone(&tracker), bar.clone());
        set.spawn(async move {
            while !tracker.should_stop() {
                let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
                    .arg("GROUP")
                    .arg(GROUP)
                    .arg(&name)
                    .arg("COUNT")
                    .arg(RECEIVE_BATCH)
                    .arg("BLOCK")
                    .arg(BLOCK_MS)
                    .arg("STREAMS")
                    .arg(&stream)
                    .arg(">")
                    .query_async(&mut conn)
                    .await?;
                let entries: Vec<_> = reply
                    .into_iter()
                    .flat_map(|r| r.keys)
                    .flat_map(|k| k.ids)
                    .collect();
                if entries.is_empty() {
                    continue;
                }
                let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
                redis::cmd("XACK")
                    .arg(&stream)
                    .arg(GROUP)
                    .arg(&ids)
                    .query_async::<u64>(&mut conn)
                    .await?;
                let seqs = entries.iter().map(|e| {
                    e.get::<Vec<u8>>("b")
                        .and_then(|b| body_value(&b))
                        .unwrap_or(u64::MAX)
                });
                tracker.record(seqs);
                bar.inc(entries.len() as u64);
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = set.join_next().await {
        done??;
    }
    let drained = tracker.last_delivery().saturating_duration_since(started);
    let check = tracker.check((0..n).collect::<Vec<_>>().iter());
    bar.finish();
    Ok(Outcome::Peer(
        info,
        vec![
            Figure::rate(
                "peer.redis.produce.16",
                format!("Redis XADD, {MANY} producers"),
                n,
                produced,
            )
            .against(raw::INSERT_MANY),
            Figure::rate(
                "peer.redis.drain.8",
                format!("Redis drain, {CONSUMERS} consumers"),
                n,
                drained,
            )
            .against(raw::LIFECYCLE)
            .checked(check),
        ],
    ))
}

/// One connection with `TCP_NODELAY`, within [`CONNECT_TIMEOUT`].
async fn connect(url: &str) -> Result<MultiplexedConnection> {
    let info = url
        .into_connection_info()?
        .set_tcp_settings(TcpSettings::default().set_nodelay(true));
    let client = redis::Client::open(info)?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// Version and persistence settings.
async fn info(conn: &mut MultiplexedConnection) -> Result<PeerInfo> {
    let server: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    let version = server
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_owned());
    let mut settings = BTreeMap::new();
    for name in ["appendonly", "appendfsync", "save"] {
        // CONFIG may be renamed or disabled; then the setting stays unknown.
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(conn)
            .await
            .unwrap_or_default();
        if let [_, value] = pair.as_slice() {
            settings.insert(name.to_owned(), value.clone());
        }
    }
    let get = |k: &str| settings.get(k).map(String::as_str);
    let durable = get("appendonly") == Some("yes") && get("appendfsync") == Some("always");
    let durability = match (get("appendonly"), get("save")) {
        _ if durable => "appendonly yes, appendfsync always: an acknowledged XADD is on disk".to_owned(),
        (Some("no"), Some("")) => "appendonly no, save \"\": keeps nothing on disk; every message is lost when the server stops".to_owned(),
        (Some("no"), Some(save)) => format!("appendonly no, snapshots (save \"{save}\") only: writes since the last snapshot are lost in a crash"),
        (Some(_), _) => format!(
            "appendonly yes, appendfsync {}: up to a second of acknowledged writes can be lost in a crash",
            get("appendfsync").unwrap_or("?")
        ),
        (None, _) => "persistence settings unknown (CONFIG GET refused)".to_owned(),
    };
    Ok(PeerInfo {
        version,
        durable,
        durability,
        settings,
    })
}

/// Delete this run's stream.
pub async fn cleanup<B: Db>(ctx: &Ctx<B>) -> Result<()> {
    let mut conn = connect(&ctx.peers.redis).await?;
    redis::cmd("DEL")
        .arg(ctx.peer_name("stream"))
        .query_async::<u64>(&mut conn)
        .await?;
    Ok(())
}
