//! `soak`: mixed traffic for a long while (`--minutes`, default 30), to see whether anything
//! grows that should stay flat. Not one of the scenarios of a normal run, and not in CI.
//!
//! Two producers offer `--rate` messages per second in all to one queue; a worker (the library's
//! runtime, 8 handlers) consumes them. One message in 20 fails its first attempt (a retry on the
//! queue's backoff), one in 100 fails every attempt (a dead letter after 3); an operator task
//! purges dead letters every 30 s, as a real one would. Every 5 s the soak samples the process's
//! resident memory, the server's InnoDB history list length and the queue's depth; the worker's
//! handlers record each first attempt's *pickup latency* — from the producer's `send` call to the
//! handler starting, so the claim and the worker's polling together.
//!
//! The report compares a window at the start (after a warm-up of a minute or a tenth of the run,
//! whichever is shorter; a tenth of the run long, at least 12.5 s) with the last such window. Memory and latency are FLAT when the end
//! is within 10 % above the start (lower is fine), throughput when within 10 % below; the history
//! list length when within 10 % or under 1 000 at the end (it moves near zero on a quiet server).
//! At the end the producers stop, the worker drains the queue and every message is accounted
//! for: handled, dead-lettered, or lost.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Serialize;
use sqlmq::queue::Backoff;
use sqlmq::worker::CancellationToken;
use sqlmq::{Delivery, JobContext, Message, Outcome, QueueConfig};

use crate::backend::Db;
use crate::context::Ctx;

/// How often the soak samples memory, history length and depth.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// How often the operator purges dead letters.
const PURGE_EVERY: Duration = Duration::from_secs(30);
/// One message in this many fails its first attempt.
const FAIL_ONCE_EVERY: u64 = 20;
/// One message in this many fails every attempt.
const POISON_EVERY: u64 = 100;
/// Attempts before a dead letter.
const MAX_ATTEMPTS: u32 = 3;
/// The queue's retry delay.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Relative change within which a figure is flat.
const FLAT: f64 = 0.10;
/// History list length below which it counts as flat whatever the ratio.
const HISTORY_FLOOR: f64 = 1000.0;

/// One figure in both windows.
#[derive(Debug, Serialize)]
pub struct Compared {
    /// What it is.
    pub what: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// In the start window (`None`: not measured there).
    pub start: Option<f64>,
    /// In the end window.
    pub end: Option<f64>,
    /// `FLAT`, `GREW`, `FELL` or `n/a`.
    pub verdict: &'static str,
}

/// The soak's report.
#[derive(Debug, Serialize)]
pub struct SoakReport {
    /// Length of the run, seconds.
    pub seconds: f64,
    /// Offered rate, messages per second.
    pub rate: u32,
    /// The start window, seconds from the start.
    pub start_window: (f64, f64),
    /// The end window.
    pub end_window: (f64, f64),
    /// The figures.
    pub figures: Vec<Compared>,
    /// Messages sent (send returned Ok).
    pub sent: u64,
    /// Handled with success (first attempts and retries).
    pub handled: u64,
    /// Messages that failed once and were handled on a retry.
    pub retried: u64,
    /// Dead letters (purged during the run or left at the end).
    pub dead: u64,
    /// Messages that should have been handled or dead-lettered and were not.
    pub lost: u64,
    /// Messages handled with success more than once.
    pub duplicates: u64,
}

/// What the sampler saw at one moment.
#[derive(Clone, Copy)]
struct Sample {
    at: f64,
    rss_kib: Option<f64>,
    history: Option<f64>,
    depth: f64,
    handled: u64,
}

/// Pickup latencies of the start and end windows (nothing else is kept, so that the soak's own
/// memory does not grow with the run).
struct Latencies {
    start: (f64, f64),
    end_len: f64,
    first: Vec<f64>,
    last: VecDeque<(f64, f64)>,
}

impl Latencies {
    fn record(&mut self, at: f64, ms: f64) {
        if at >= self.start.0 && at < self.start.1 && self.first.len() < self.first.capacity() {
            self.first.push(ms);
        }
        while self
            .last
            .front()
            .is_some_and(|(t, _)| *t < at - self.end_len)
        {
            self.last.pop_front();
        }
        if self.last.len() < self.last.capacity() {
            self.last.push_back((at, ms));
        }
    }
}

/// Counters shared by the producers, the handlers and the operator.
#[derive(Default)]
struct Counts {
    sent_fine: AtomicU64,
    sent_fail_once: AtomicU64,
    sent_poison: AtomicU64,
    handled: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
}

/// The process's resident memory, KiB (Linux).
fn rss_kib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The `q`-quantile of `values` (sorted in place).
fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let i = ((values.len() - 1) as f64 * q).round() as usize;
    Some(values[i])
}

/// The mean of `f` over the samples inside `window`.
fn mean_in(
    samples: &[Sample],
    window: (f64, f64),
    f: impl Fn(&Sample) -> Option<f64>,
) -> Option<f64> {
    let values: Vec<f64> = samples
        .iter()
        .filter(|s| s.at >= window.0 && s.at <= window.1)
        .filter_map(f)
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Messages handled per second inside `window`, from the samples' running count.
fn rate_in(samples: &[Sample], window: (f64, f64)) -> Option<f64> {
    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.at >= window.0 && s.at <= window.1)
        .collect();
    let (first, last) = (inside.first()?, inside.last()?);
    (last.at > first.at).then(|| (last.handled - first.handled) as f64 / (last.at - first.at))
}

/// The verdict on a figure that must not grow (`lower_is_better`) or must not fall.
fn verdict(
    start: Option<f64>,
    end: Option<f64>,
    lower_is_better: bool,
    floor: f64,
) -> &'static str {
    let (Some(start), Some(end)) = (start, end) else {
        return "n/a";
    };
    if lower_is_better && end < floor {
        return "FLAT";
    }
    let ratio = if start > 0.0 { end / start } else { 1.0 };
    match (lower_is_better, ratio) {
        (true, r) if r <= 1.0 + FLAT => "FLAT",
        (true, _) => "GREW",
        (false, r) if r >= 1.0 - FLAT => "FLAT",
        (false, _) => "FELL",
    }
}

/// Run the soak for `minutes` at `rate` messages per second.
pub async fn soak<B: Db>(ctx: &Ctx<B>, minutes: f64, rate: u32) -> Result<SoakReport> {
    let total = Duration::from_secs_f64(minutes * 60.0);
    let secs = total.as_secs_f64();
    let warm = (secs / 10.0).min(60.0);
    // A tenth of the run, but at least a few samples (short runs, the bench's own test).
    let window = (secs / 10.0).max(2.5 * SAMPLE_EVERY.as_secs_f64());
    let start_window = (warm, warm + window);
    // The last sample is taken just after the end.
    let end_window = (secs - window, secs + SAMPLE_EVERY.as_secs_f64());
    let client = ctx.client("soak", 16).await?;
    let queue = client
        .create_queue(
            "soak",
            QueueConfig::default()
                .max_attempts(MAX_ATTEMPTS)
                .backoff(Backoff::Ladder(vec![RETRY_AFTER])),
        )
        .await?;

    let origin = Instant::now();
    let counts = Arc::new(Counts::default());
    // Room for the windows' latencies, reserved now: growing later would show as memory growth.
    let room = (f64::from(rate) * window * 1.5) as usize + 16;
    let latencies = Arc::new(Mutex::new(Latencies {
        start: start_window,
        end_len: window,
        first: Vec::with_capacity(room),
        last: VecDeque::with_capacity(room),
    }));

    let stop_producing = CancellationToken::new();
    let mut producers = Vec::new();
    for p in 0..2u64 {
        let (queue, counts, stop) = (queue.clone(), counts.clone(), stop_producing.clone());
        let every = Duration::from_secs_f64(2.0 / f64::from(rate));
        producers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n = p;
            while !stop.is_cancelled() {
                tick.tick().await;
                n += 2;
                let kind = if n % POISON_EVERY == 0 {
                    'p'
                } else if n % FAIL_ONCE_EVERY == 0 {
                    'f'
                } else {
                    'n'
                };
                let sent_at = origin.elapsed().as_micros();
                if queue
                    .send(Message::new(format!("{kind}:{sent_at}")))
                    .await
                    .is_ok()
                {
                    let counter = match kind {
                        'p' => &counts.sent_poison,
                        'f' => &counts.sent_fail_once,
                        _ => &counts.sent_fine,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }

    let stop_working = CancellationToken::new();
    let worker = {
        let (counts, latencies) = (counts.clone(), latencies.clone());
        let handler = move |d: Delivery, _: JobContext<B>| {
            let (counts, latencies) = (counts.clone(), latencies.clone());
            async move {
                let body = String::from_utf8_lossy(&d.body).into_owned();
                let (kind, sent_at) = body.split_once(':').unwrap_or(("n", "0"));
                if d.attempt == 1 {
                    let now = origin.elapsed();
                    let sent = Duration::from_micros(sent_at.parse().unwrap_or(0));
                    let ms = now.saturating_sub(sent).as_secs_f64() * 1000.0;
                    latencies.lock().unwrap().record(now.as_secs_f64(), ms);
                }
                match kind {
                    "p" => Err(format!("poison, attempt {}", d.attempt)),
                    "f" if d.attempt == 1 => Err("fails its first attempt".to_owned()),
                    _ => {
                        counts.handled.fetch_add(1, Ordering::Relaxed);
                        if d.attempt > 1 {
                            counts.retried.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Outcome::Done)
                    }
                }
            }
        };
        let builder = sqlmq::Worker::builder(&client)
            .queue_raw("soak", handler)
            .concurrency(8);
        let stop = stop_working.clone();
        tokio::spawn(async move { builder.run(stop).await })
    };

    // Sample and purge until the end of the run.
    let mut samples: Vec<Sample> = Vec::with_capacity((secs / 5.0) as usize + 8);
    let mut next_purge = PURGE_EVERY;
    let mut next_progress = Duration::from_secs(60);
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while origin.elapsed() < total {
        tick.tick().await;
        let now = origin.elapsed();
        if now >= next_purge {
            next_purge += PURGE_EVERY;
            purge(&queue, &counts).await?;
        }
        let stats = queue.stats().await?;
        let sample = Sample {
            at: now.as_secs_f64(),
            rss_kib: rss_kib(),
            history: B::history_length(&ctx.scratch).await.map(|h| h as f64),
            depth: (stats.ready + stats.scheduled + stats.in_flight) as f64,
            handled: counts.handled.load(Ordering::Relaxed),
        };
        samples.push(sample);
        if now >= next_progress {
            next_progress += Duration::from_secs(60);
            eprintln!(
                "soak: {:.0}/{:.0} min, handled {}, depth {}, rss {:.1} MiB, history {}",
                now.as_secs_f64() / 60.0,
                secs / 60.0,
                sample.handled,
                sample.depth,
                sample.rss_kib.unwrap_or(0.0) / 1024.0,
                sample
                    .history
                    .map_or("n/a".to_owned(), |h| format!("{h:.0}"))
            );
        }
    }

    // Drain: stop producing, let the worker finish what is stored (retries included).
    stop_producing.cancel();
    for p in producers {
        p.await?;
    }
    let drained_by = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = queue.stats().await?;
        if stats.ready + stats.scheduled + stats.in_flight == 0 {
            break;
        }
        if Instant::now() > drained_by {
            bail!("the queue did not drain within a minute after the producers stopped: {stats:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_working.cancel();
    worker.await??;
    purge(&queue, &counts).await?;
    ctx.release(client).await?;

    let latencies = latencies.lock().unwrap();
    let (mut first, mut last): (Vec<f64>, Vec<f64>) = (
        latencies.first.clone(),
        latencies.last.iter().map(|(_, ms)| *ms).collect(),
    );
    let mem = |s: &Sample| s.rss_kib.map(|k| k / 1024.0);
    let (mem_start, mem_end) = (
        mean_in(&samples, start_window, mem),
        mean_in(&samples, end_window, mem),
    );
    let (p50_start, p50_end) = (quantile(&mut first, 0.5), quantile(&mut last, 0.5));
    let (p99_start, p99_end) = (quantile(&mut first, 0.99), quantile(&mut last, 0.99));
    let (rate_start, rate_end) = (
        rate_in(&samples, start_window),
        rate_in(&samples, end_window),
    );
    let hist = |s: &Sample| s.history;
    let (hist_start, hist_end) = (
        mean_in(&samples, start_window, hist),
        mean_in(&samples, end_window, hist),
    );
    let depth = |s: &Sample| Some(s.depth);
    let (depth_start, depth_end) = (
        mean_in(&samples, start_window, depth),
        mean_in(&samples, end_window, depth),
    );
    let figures = vec![
        Compared {
            what: "process memory (RSS)",
            unit: "MiB",
            start: mem_start,
            end: mem_end,
            verdict: verdict(mem_start, mem_end, true, 0.0),
        },
        Compared {
            what: "pickup latency p50",
            unit: "ms",
            start: p50_start,
            end: p50_end,
            verdict: verdict(p50_start, p50_end, true, 0.0),
        },
        Compared {
            what: "pickup latency p99",
            unit: "ms",
            start: p99_start,
            end: p99_end,
            verdict: verdict(p99_start, p99_end, true, 0.0),
        },
        Compared {
            what: "handled",
            unit: "msg/s",
            start: rate_start,
            end: rate_end,
            verdict: verdict(rate_start, rate_end, false, 0.0),
        },
        Compared {
            what: "InnoDB history list length",
            unit: "undo logs",
            start: hist_start,
            end: hist_end,
            verdict: verdict(hist_start, hist_end, true, HISTORY_FLOOR),
        },
        Compared {
            what: "queue depth (ready + scheduled + in flight)",
            unit: "messages",
            start: depth_start,
            end: depth_end,
            verdict: "n/a",
        },
    ];

    let fine =
        counts.sent_fine.load(Ordering::Relaxed) + counts.sent_fail_once.load(Ordering::Relaxed);
    let handled = counts.handled.load(Ordering::Relaxed);
    let poison = counts.sent_poison.load(Ordering::Relaxed);
    let dead = counts.dead.load(Ordering::Relaxed);
    Ok(SoakReport {
        seconds: secs,
        rate,
        start_window,
        end_window,
        figures,
        sent: fine + poison,
        handled,
        retried: counts.retried.load(Ordering::Relaxed),
        dead,
        lost: fine.saturating_sub(handled) + poison.saturating_sub(dead),
        duplicates: handled.saturating_sub(fine) + dead.saturating_sub(poison),
    })
}

/// Count and purge the queue's dead letters, as an operator would.
async fn purge<B: Db>(queue: &sqlmq::Queue<B>, counts: &Counts) -> Result<()> {
    let purged = queue.purge_dead_letters().await?;
    counts.dead.fetch_add(purged, Ordering::Relaxed);
    Ok(())
}

impl SoakReport {
    /// The report as a table on stdout.
    pub fn print(&self) {
        let w = |(a, b): (f64, f64)| format!("{:.1}–{:.1} min", a / 60.0, b / 60.0);
        println!(
            "soak: {:.1} min at {} msg/s offered; start window {}, end window {}",
            self.seconds / 60.0,
            self.rate,
            w(self.start_window),
            w(self.end_window)
        );
        println!(
            "{:<46} {:>12} {:>12} {:>9}  verdict",
            "figure", "start", "end", "end/start"
        );
        let show = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}"));
        for f in &self.figures {
            let ratio = match (f.start, f.end) {
                (Some(s), Some(e)) if s > 0.0 => format!("{:.2}", e / s),
                _ => "-".to_owned(),
            };
            println!(
                "{:<46} {:>12} {:>12} {:>9}  {}",
                format!("{} ({})", f.what, f.unit),
                show(f.start),
                show(f.end),
                ratio,
                f.verdict
            );
        }
        println!(
            "messages: sent {}, handled {} ({} after a retry), dead letters {}, lost {}, duplicates {}",
            self.sent, self.handled, self.retried, self.dead, self.lost, self.duplicates
        );
    }
}
