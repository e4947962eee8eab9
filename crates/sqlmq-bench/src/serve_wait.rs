//! `serve.wait`: what waiting HTTP long polls cost. One `sqlmq serve` (in process) on 10 empty
//! queues; N kept-alive clients each long-poll a queue (`wait_ms` 20 000, re-polling when a
//! wait runs out) for N = 10, 1 000 and 10 000 (fewer in a scaled-down run). At each N:
//!
//! - the statements/s the server's pool runs while they all wait, counted with per-session
//!   counters on every connection of the server's pool (as `queue.idle`), minus the counting's
//!   own statements;
//! - at the largest N, the resident memory of this process above what it held before the polls
//!   started (server *and* clients are in this process: an upper bound for the server), and a
//!   check that messages sent through another client are each answered once — none lost, none
//!   twice;
//! - at N = 1 000 (or the largest below it), the latency from a send through another client
//!   (another process, as far as in-process wakeups go) to the answer of a waiting poll, each
//!   sample after the probe's delay has climbed back to its ceiling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};
use sqlmq::{Client, Message, QueueConfig};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::backend::{Db, count_statements, not_available};
use super::context::Ctx;
use super::measure::{Latencies, current_rss_bytes};
use super::outcome::Outcome;
use super::report::{Figure, Unavailable, Unit, grouped};
use super::serve::{Conn, with_server};

/// Queues the polls spread over.
const QUEUES: usize = 10;
/// Connections of the server's pool.
const SERVER_POOL: u32 = 8;
/// Read buffer of each client connection.
const CLIENT_BUFFER: usize = 1024;
/// Clients connecting at once.
const CONNECTING: usize = 200;
/// The most each poll waits (the server's cap).
const WAIT_MS: u64 = 20_000;
/// Pause before each latency sample: the probe's delay is back at its ceiling (60 ms).
const SETTLE: Duration = Duration::from_millis(400);

/// A poll's answer: the body of the message it got, when.
type Answer = (String, Instant);

/// `serve.wait`.
pub async fn wait<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let plan = &ctx.plan;
    let levels = levels_within_fd_limit(&plan.wait_levels);
    let at_latency = latency_level(&levels);
    let bar = ctx.bar("serve.wait");
    let client = ctx.client("swait", SERVER_POOL).await?;
    let sender = Client::builder()
        .table_prefix(client.table_prefix())
        .max_connections(2)
        .open::<B>(&ctx.scratch.url)
        .await?;
    let result = async {
        for i in 0..QUEUES {
            client
                .create_queue(&format!("w{i}"), QueueConfig::default())
                .await?;
        }
        let (b, server_client, levels, sender) =
            (bar.clone(), client.clone(), levels.clone(), sender.clone());
        with_server(client.clone(), |addr| async move {
            let (tx, mut answers) = mpsc::unbounded_channel::<Answer>();
            // Clients connect a few hundred at a time, as a fleet would, not in one burst
            // that overflows the listener's accept queue.
            let connecting = Arc::new(Semaphore::new(CONNECTING));
            let mut polls = JoinSet::new();
            let before_rss = current_rss_bytes();
            let mut rows = Vec::new();
            let mut latency = None;
            let top = *levels.last().expect("at least one level");
            for &n in &levels {
                b.phase(&format!("{} long polls: seating", grouped(n)), n);
                while (polls.len() as u64) < n {
                    let queue = format!("w{}", polls.len() % QUEUES);
                    polls.spawn(poll_forever(addr, queue, tx.clone(), connecting.clone()));
                }
                let seating = Instant::now();
                while (server_client.long_polls() as u64) < n {
                    b.set(server_client.long_polls() as u64);
                    if let Some(stopped) = polls.try_join_next() {
                        bail!("a long poll stopped: {:?}", stopped?);
                    }
                    if seating.elapsed() > Duration::from_secs(120) {
                        bail!(
                            "{} of {n} long polls seated after 2 minutes",
                            server_client.long_polls()
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                // The probe's delay climbs to its ceiling.
                tokio::time::sleep(Duration::from_secs(1)).await;
                let statements = if B::NO_STATEMENT_COUNTER.is_none() {
                    b.phase(&format!("{} long polls: counting", grouped(n)), 0);
                    Some(count_statements(&[server_client.pool()], plan.wait_window).await?)
                } else {
                    None
                };
                let rss = current_rss_bytes()
                    .zip(before_rss)
                    .map(|(now, before)| now.saturating_sub(before));
                rows.push((n, statements, rss));
                if n == at_latency {
                    b.phase("wakeups from another client", plan.wait_samples);
                    let lat = Latencies::default();
                    for i in 0..plan.wait_samples {
                        tokio::time::sleep(SETTLE).await;
                        let body = format!("lat{i}");
                        let queue = sender.queue(&format!("w{}", i as usize % QUEUES)).await?;
                        let sent = Instant::now();
                        queue.send(Message::new(body.clone())).await?;
                        let at = answered(&mut answers, &body).await?;
                        lat.record(at.duration_since(sent));
                        b.set(i + 1);
                    }
                    latency = Some(lat.summary());
                }
                if n == top {
                    b.phase("each message answered once", plan.wait_samples);
                    each_once(&sender, &mut answers, plan.wait_samples).await?;
                }
            }
            polls.abort_all();
            anyhow::Ok((rows, latency))
        })
        .await
    }
    .await;
    bar.finish();
    let notifications = client.notifications();
    sender.pool().close().await;
    ctx.release(client).await?;
    let (rows, latency) = result?;
    let mut figures = Vec::new();
    let mut unavailable = Vec::new();
    for (n, statements, rss) in &rows {
        let key = format!("serve.wait.queries.{n}");
        let label = format!(
            "sqlmq serve, {} waiting long polls on {QUEUES} queues",
            grouped(*n)
        );
        match statements {
            Some((count, window)) => figures.push(
                Figure::new(
                    key,
                    label,
                    *count as f64 / window.as_secs_f64(),
                    Unit::QueriesPerS,
                )
                .note(format!(
                    "{count} statements in {:.1} s on the server's pool, per-session Questions \
                     counters",
                    window.as_secs_f64()
                )),
            ),
            None => unavailable.push(Unavailable {
                key,
                label,
                reason: not_available::<B>(B::NO_STATEMENT_COUNTER.unwrap_or_default()),
            }),
        }
        if *n == rows.last().map_or(0, |r| r.0)
            && let Some(bytes) = rss
        {
            figures.push(
                Figure::new(
                    format!("serve.wait.memory.{n}"),
                    format!("memory held by {} waiting long polls", grouped(*n)),
                    *bytes as f64 / (1024.0 * 1024.0),
                    Unit::MiB,
                )
                .note(format!(
                    "resident memory above the server's before the polls (the server and its \
                     HTTP clients share this process); {} messages sent through another client \
                     meanwhile were each answered by exactly one poll",
                    plan.wait_samples
                )),
            );
        }
    }
    if let Some(summary) = latency {
        figures.push(
            Figure::latency(
                "serve.wait.latency",
                format!(
                    "send from another client → waiting long poll answered ({} waiting)",
                    grouped(at_latency)
                ),
                summary,
            )
            .note(format!(
                "no in-process wakeup; notifications {notifications} (when not live the shared \
                 probe, 10 ms doubling to 60 ms, finds it)"
            )),
        );
    }
    if unavailable.is_empty() {
        Ok(Outcome::Ran(figures))
    } else {
        Ok(Outcome::Partly(figures, unavailable))
    }
}

/// The level the latency is sampled at: 1 000, or the largest below it.
fn latency_level(levels: &[u64]) -> u64 {
    levels
        .iter()
        .copied()
        .filter(|n| *n <= 1_000)
        .max()
        .unwrap_or(levels[0])
}

/// The levels this process can hold: each poll takes two descriptors (its client and server
/// ends), so the file limit is raised to its hard limit and the levels capped below it.
fn levels_within_fd_limit(levels: &[u64]) -> Vec<u64> {
    let limit = raise_fd_limit();
    let most = limit.saturating_sub(256) / 2;
    let mut kept: Vec<u64> = levels.iter().map(|n| (*n).min(most)).collect();
    kept.dedup();
    kept
}

/// Raise this process's soft limit on open files to its hard limit; the soft limit after.
fn raise_fd_limit() -> u64 {
    // SAFETY: getrlimit/setrlimit on a valid, initialised struct.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur
    }
}

/// Long-poll `queue` until aborted: report and ack each message got.
async fn poll_forever(
    addr: std::net::SocketAddr,
    queue: String,
    answers: mpsc::UnboundedSender<Answer>,
    connecting: Arc<Semaphore>,
) -> Result<()> {
    let mut conn = {
        let _turn = connecting.acquire().await?;
        Conn::with_buffer(addr, CLIENT_BUFFER).await?
    };
    let base = format!("/v1/queues/{queue}");
    let receive = json!({"max": 1, "lease_ms": 600_000, "wait_ms": WAIT_MS});
    loop {
        let (status, got) = conn.post(&format!("{base}/receive"), &receive).await?;
        if status != 200 {
            bail!("receive answered {status}: {got}");
        }
        let messages = got["messages"].as_array().cloned().unwrap_or_default();
        let at = Instant::now();
        for m in &messages {
            let body = m["body"].as_str().unwrap_or_default().to_owned();
            let _ = answers.send((body, at));
        }
        if !messages.is_empty() {
            let receipts: Vec<Value> = messages.iter().map(|m| m["receipt"].clone()).collect();
            let (status, res) = conn
                .post(&format!("{base}/ack"), &json!({"receipts": receipts}))
                .await?;
            if status != 200 {
                bail!("ack answered {status}: {res}");
            }
        }
    }
}

/// Wait for the answer carrying `body` (answers to earlier samples are skipped).
async fn answered(answers: &mut mpsc::UnboundedReceiver<Answer>, body: &str) -> Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, answers.recv()).await {
            Ok(Some((got, at))) if got == body => return Ok(at),
            Ok(Some(_)) => continue,
            Ok(None) => bail!("every poll stopped"),
            Err(_) => bail!("no waiting poll answered {body:?} within 30 s"),
        }
    }
}

/// Send `n` messages through `sender`, spread over the queues, and check that each is answered
/// by exactly one poll.
async fn each_once<B: Db>(
    sender: &Client<B>,
    answers: &mut mpsc::UnboundedReceiver<Answer>,
    n: u64,
) -> Result<()> {
    let mut seen: HashMap<String, u32> = HashMap::new();
    for i in 0..n {
        let queue = sender.queue(&format!("w{}", i as usize % QUEUES)).await?;
        queue.send(Message::new(format!("once{i}"))).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < n as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, answers.recv()).await {
            Ok(Some((body, _))) if body.starts_with("once") => {
                *seen.entry(body).or_default() += 1;
            }
            Ok(Some(_)) => {}
            Ok(None) => bail!("every poll stopped"),
            Err(_) => bail!("{} of {n} messages answered within 60 s: lost", seen.len()),
        }
    }
    // Anything answered twice would arrive now.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok((body, _)) = answers.try_recv() {
        *seen.entry(body).or_default() += 1;
    }
    if let Some((body, times)) = seen.iter().find(|(_, t)| **t > 1) {
        bail!("{body} was answered {times} times");
    }
    Ok(())
}
