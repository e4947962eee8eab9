//! Adaptive polling delay for consumers of an empty queue (docs/design/worker-runtime.md).
//!
//! MySQL has no LISTEN/NOTIFY, so an idle consumer polls. The delay starts at
//! [`MIN_POLL_DELAY`] so that a busy queue is drained without noticeable latency, doubles after
//! every empty claim up to [`MAX_POLL_DELAY`] so that an idle worker costs the database about
//! one claim per second, and goes back to the minimum as soon as a claim returns messages. Each
//! delay is spread by ±[`POLL_JITTER`] so that workers started together do not poll in lockstep.

use std::time::Duration;

/// First delay after an empty claim.
pub const MIN_POLL_DELAY: Duration = Duration::from_millis(10);
/// Longest delay between two claims of an idle consumer.
pub const MAX_POLL_DELAY: Duration = Duration::from_secs(1);
/// Relative spread of each delay.
pub const POLL_JITTER: f64 = 0.2;

/// The delay before the next claim of one consumer.
#[derive(Debug, Clone)]
pub struct PollDelay {
    next: Duration,
}

impl Default for PollDelay {
    fn default() -> Self {
        PollDelay {
            next: MIN_POLL_DELAY,
        }
    }
}

impl PollDelay {
    /// A claim returned messages: poll again quickly next time the queue looks empty.
    pub fn reset(&mut self) {
        self.next = MIN_POLL_DELAY;
    }

    /// A claim found nothing: the (jittered) time to wait now; the following wait doubles.
    pub fn next_delay(&mut self) -> Duration {
        let unit: f64 = rand::random();
        let delay = self.next.mul_f64(1.0 + POLL_JITTER * (2.0 * unit - 1.0));
        self.next = (self.next * 2).min(MAX_POLL_DELAY);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_with_bounded_jitter_and_resets() {
        let mut p = PollDelay::default();
        let first = p.next_delay();
        assert!(first >= Duration::from_millis(8) && first <= Duration::from_millis(12));
        for _ in 0..20 {
            let d = p.next_delay();
            assert!(d <= MAX_POLL_DELAY.mul_f64(1.0 + POLL_JITTER));
        }
        let capped = p.next_delay();
        assert!(capped >= MAX_POLL_DELAY.mul_f64(1.0 - POLL_JITTER));
        p.reset();
        assert!(p.next_delay() <= Duration::from_millis(12));
    }
}
