//! The adaptive, jittered delay between probes of an idle process: at the floor while work
//! comes, doubling to the ceiling while none does.

use std::time::Duration;

use rand::RngExt;

/// Relative jitter of poll delays, so that processes started together do not poll together.
const JITTER: f64 = 0.2;

/// A delay that doubles from `floor` to `ceiling`, reset to `floor` on activity.
#[derive(Clone, Debug)]
pub(crate) struct PollDelay {
    floor: Duration,
    ceiling: Duration,
    next: Duration,
}

impl PollDelay {
    pub(crate) fn new(floor: Duration, ceiling: Duration) -> PollDelay {
        PollDelay {
            floor,
            ceiling: ceiling.max(floor),
            next: floor,
        }
    }

    /// New bounds (a setting changed); the next wait stays within them.
    pub(crate) fn set_bounds(&mut self, floor: Duration, ceiling: Duration) {
        self.floor = floor;
        self.ceiling = ceiling.max(floor);
        self.next = self.next.clamp(self.floor, self.ceiling);
    }

    /// Back to the floor: work was found.
    pub(crate) fn reset(&mut self) {
        self.next = self.floor;
    }

    /// The next wait (jittered by ±20 %, never above the ceiling); the one after doubles.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.ceiling);
        base.mul_f64(rand::rng().random_range(1.0 - JITTER..1.0 + JITTER))
            .min(self.ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_ceiling_with_bounded_jitter_and_resets() {
        let floor = Duration::from_millis(10);
        let ceiling = Duration::from_millis(100);
        let mut d = PollDelay::new(floor, ceiling);
        let waits: Vec<Duration> = (0..8).map(|_| d.next_delay()).collect();
        for (w, base) in waits.iter().zip([10u64, 20, 40, 80, 100, 100, 100, 100]) {
            let base = Duration::from_millis(base);
            assert!(
                *w >= base.mul_f64(0.8) && *w <= base.mul_f64(1.2).min(ceiling),
                "{w:?} vs {base:?}"
            );
        }
        d.reset();
        assert!(d.next_delay() <= floor.mul_f64(1.2));
    }
}
