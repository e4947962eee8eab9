//! Measuring tools shared by the scenarios: message bodies that carry a sequence number or a
//! send time, latency histograms, rates, and the process's peak memory.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::args::BODY_BYTES;

/// A [`BODY_BYTES`] body whose first 8 bytes are `value` (little endian), the rest filler.
pub fn body(value: u64) -> Vec<u8> {
    let mut b = vec![b'x'; BODY_BYTES.max(8)];
    b[..8].copy_from_slice(&value.to_le_bytes());
    b
}

/// The value [`body`] put at the start of `bytes`.
pub fn body_value(bytes: &[u8]) -> Option<u64> {
    let head: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(head))
}

/// A body carrying the time it was made, as nanoseconds since `origin`.
pub fn stamped(origin: Instant) -> Vec<u8> {
    body(origin.elapsed().as_nanos() as u64)
}

/// Time since the body was made by [`stamped`] with the same `origin`.
pub fn age(origin: Instant, bytes: &[u8]) -> Option<Duration> {
    let sent = Duration::from_nanos(body_value(bytes)?);
    Some(origin.elapsed().saturating_sub(sent))
}

/// Messages per second.
pub fn rate(messages: u64, elapsed: Duration) -> f64 {
    messages as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// Longest latency a histogram keeps exactly (longer ones are clamped): one hour.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, shared by the tasks of a scenario.
pub struct Latencies(Mutex<Histogram<u64>>);

/// Percentiles of a [`Latencies`].
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: u64,
    /// Median, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// Largest sample, in milliseconds.
    pub max_ms: f64,
}

impl Default for Latencies {
    fn default() -> Self {
        let h = Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid bounds");
        Latencies(Mutex::new(h))
    }
}

impl Latencies {
    /// Record one sample.
    pub fn record(&self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        self.0.lock().expect("poisoned").saturating_record(us);
    }

    /// The percentiles so far.
    pub fn summary(&self) -> Summary {
        let h = self.0.lock().expect("poisoned");
        let ms = |us: u64| us as f64 / 1000.0;
        Summary {
            samples: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

/// Peak resident memory of this process so far (`VmHWM` of `/proc/self/status`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// Resident memory of this process now (`VmRSS` of `/proc/self/status`), in bytes.
pub fn current_rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|kib| kib * 1024)
}

/// A `kB` line of `/proc/self/status`.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_round_trip_and_have_the_fixed_size() {
        let b = body(42);
        assert_eq!(b.len(), BODY_BYTES);
        assert_eq!(body_value(&b), Some(42));
        assert_eq!(body_value(b"short"), None);
        let origin = Instant::now();
        let s = stamped(origin);
        assert!(age(origin, &s).unwrap() < Duration::from_secs(5));
    }

    #[test]
    fn percentiles() {
        let l = Latencies::default();
        for ms in 1..=100 {
            l.record(Duration::from_millis(ms));
        }
        let s = l.summary();
        assert_eq!(s.samples, 100);
        assert!((s.p50_ms - 50.0).abs() < 0.5, "{s:?}");
        assert!((s.p99_ms - 99.0).abs() < 0.5, "{s:?}");
        assert!(peak_rss_bytes().unwrap_or(1) > 0);
    }
}
