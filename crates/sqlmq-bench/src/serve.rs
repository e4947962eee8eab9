//! `serve.send` and `serve.drain`: the HTTP API of `sqlmq serve` (in-process, on loopback)
//! driven by keep-alive clients, beside the library's own figures of the same run —
//! `serve.send.16` (16 clients, one message per request) against `queue.send.16`, and
//! `serve.drain.8` (8 clients, receive 100 + ack per round trip pair) against `queue.drain.8`.
//!
//! The clients speak HTTP/1.1 over one kept-alive TCP connection each (a minimal client below:
//! request out, `Content-Length` body in), so the figures measure the server, not a client
//! library.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use super::args::{CONSUMERS, MANY, RECEIVE_BATCH};
use super::backend::Db;
use super::context::Ctx;
use super::outcome::Outcome;
use super::queue::{POOL, fill, with_queue};
use super::raw::split;
use super::report::Figure;

/// One kept-alive HTTP/1.1 connection.
pub(crate) struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    pub(crate) async fn open(addr: std::net::SocketAddr) -> Result<Conn> {
        Conn::with_buffer(addr, 8 * 1024).await
    }

    /// With a read buffer of `capacity` bytes (thousands of idle connections: keep it small).
    pub(crate) async fn with_buffer(addr: std::net::SocketAddr, capacity: usize) -> Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::with_capacity(capacity, stream),
        })
    }

    /// POST `body` as JSON to `path`; the answer's status and JSON body.
    pub(crate) async fn post(&mut self, path: &str, body: &Value) -> Result<(u16, Value)> {
        let body = serde_json::to_vec(body)?;
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let s = self.stream.get_mut();
        s.write_all(head.as_bytes()).await?;
        s.write_all(&body).await?;
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {line:?}"))?;
        let mut length = 0usize;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse()?;
            }
        }
        let mut buf = vec![0; length];
        self.stream.read_exact(&mut buf).await?;
        let value = if buf.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&buf)?
        };
        Ok((status, value))
    }
}

/// Run `work` against a server started in-process on `client` (its pool is the server's).
pub(crate) async fn with_server<B, F, Fut, T>(client: sqlmq::Client<B>, work: F) -> Result<T>
where
    B: Db,
    F: FnOnce(std::net::SocketAddr) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let config = sqlmq_serve::ServeConfig::default().listen("127.0.0.1:0".parse()?);
    let server = sqlmq_serve::Server::bind(client, config).await?;
    let addr = server.local_addr();
    let stop = sqlmq::worker::CancellationToken::new();
    let running = tokio::spawn(server.run(stop.clone()));
    let result = work(addr).await;
    stop.cancel();
    running.await??;
    result
}

/// `serve.send`: single-message sends by 16 keep-alive clients.
pub async fn send<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.send_many;
    let bar = ctx.bar("serve.send");
    let b = bar.clone();
    let elapsed = with_queue(ctx, "hsend", POOL, |queue| async move {
        let path = format!("/v1/queues/{}/messages", queue.name());
        with_server(queue.client().clone(), |addr| async move {
            b.phase(&format!("HTTP send, {MANY} clients"), n);
            let started = Instant::now();
            let mut set = JoinSet::new();
            for count in split(n, MANY) {
                let (path, b) = (path.clone(), b.clone());
                set.spawn(async move {
                    let mut conn = Conn::open(addr).await?;
                    let body = json!({"messages": [{"body": "x".repeat(super::args::BODY_BYTES)}]});
                    for _ in 0..count {
                        let (status, v) = conn.post(&path, &body).await?;
                        if status != 200 {
                            bail!("send answered {status}: {v}");
                        }
                        b.inc(1);
                    }
                    anyhow::Ok(())
                });
            }
            while let Some(done) = set.join_next().await {
                done??;
            }
            Ok(started.elapsed())
        })
        .await
    })
    .await?;
    bar.finish();
    let label = format!("HTTP send, {MANY} keep-alive clients");
    Ok(Outcome::Ran(vec![
        Figure::rate("serve.send.16", label, n, elapsed).against("queue.send.16"),
    ]))
}

/// `serve.drain`: a pre-filled queue drained by 8 keep-alive clients (receive up to 100, then
/// one ack request for them).
pub async fn drain<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let n = ctx.plan.drain;
    let bar = ctx.bar("serve.drain");
    let b = bar.clone();
    let (elapsed, lost) = with_queue(ctx, "hdrain", POOL, |queue| async move {
        fill(&queue, n, &b).await?;
        let base = format!("/v1/queues/{}", queue.name());
        with_server(queue.client().clone(), |addr| async move {
            b.phase(&format!("HTTP receive + ack, {CONSUMERS} clients"), n);
            let acked = Arc::new(AtomicU64::new(0));
            let lost = Arc::new(AtomicU64::new(0));
            let started = Instant::now();
            let mut set = JoinSet::new();
            for _ in 0..CONSUMERS {
                let (base, b, acked, lost) = (base.clone(), b.clone(), acked.clone(), lost.clone());
                set.spawn(async move {
                    let mut conn = Conn::open(addr).await?;
                    let receive = json!({"max": RECEIVE_BATCH, "lease_ms": 600_000});
                    while acked.load(Ordering::Relaxed) < n {
                        let (status, got) = conn.post(&format!("{base}/receive"), &receive).await?;
                        if status != 200 {
                            bail!("receive answered {status}: {got}");
                        }
                        let receipts: Vec<Value> = got["messages"]
                            .as_array()
                            .map(|m| m.iter().map(|d| d["receipt"].clone()).collect())
                            .unwrap_or_default();
                        if receipts.is_empty() {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        }
                        let (status, res) = conn
                            .post(&format!("{base}/ack"), &json!({"receipts": receipts}))
                            .await?;
                        if status != 200 {
                            bail!("ack answered {status}: {res}");
                        }
                        let results = res["results"]
                            .as_array()
                            .map(Vec::as_slice)
                            .unwrap_or_default();
                        let ok = results.iter().filter(|r| r["result"] == "ok").count() as u64;
                        lost.fetch_add(results.len() as u64 - ok, Ordering::Relaxed);
                        acked.fetch_add(ok, Ordering::Relaxed);
                        b.inc(ok);
                    }
                    anyhow::Ok(())
                });
            }
            while let Some(done) = set.join_next().await {
                done??;
            }
            Ok((started.elapsed(), lost.load(Ordering::Relaxed)))
        })
        .await
    })
    .await?;
    bar.finish();
    let label = format!("HTTP receive + ack, {CONSUMERS} keep-alive clients");
    let mut f = Figure::rate("serve.drain.8", label, n, elapsed).against("queue.drain.8");
    if lost > 0 {
        f = f.note(format!("{lost} acks found their lease lost"));
    }
    Ok(Outcome::Ran(vec![f]))
}
