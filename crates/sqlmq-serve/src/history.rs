//! A rolling, in-memory history of snapshots (the last hour) for the dashboard's charts.
//! Nothing is stored: a restarted server starts its charts afresh.

use std::collections::{HashMap, VecDeque};
use std::time::SystemTime;

use crate::config::HISTORY_WINDOW;
use crate::snapshot::Snapshot;
use crate::state::Traffic;

/// One point in time.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// When it was taken.
    pub at: Option<SystemTime>,
    /// Per queue: counts by state, and the traffic through this server so far.
    pub queues: HashMap<String, QueuePoint>,
    /// Per `topic/group`: unconsumed records and dead letters.
    pub groups: HashMap<String, GroupPoint>,
    /// Per topic: records ever sequenced.
    pub topics: HashMap<String, u64>,
    /// InnoDB's history list length, when the server told it.
    pub history_list_length: Option<u64>,
}

/// A queue at one point in time.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueuePoint {
    /// Ready messages.
    pub ready: u64,
    /// Delayed or backing off.
    pub scheduled: u64,
    /// In flight.
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// Traffic through this server so far (a running total).
    pub traffic: Traffic,
}

/// A group at one point in time.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupPoint {
    /// Records not consumed yet.
    pub unconsumed: u64,
    /// Dead letters.
    pub dead: u64,
}

impl Sample {
    pub(crate) fn of(snapshot: &Snapshot, traffic: &HashMap<String, Traffic>) -> Sample {
        let queues = snapshot
            .queues
            .iter()
            .map(|q| {
                let point = QueuePoint {
                    ready: q.ready,
                    scheduled: q.scheduled,
                    in_flight: q.in_flight,
                    dead: q.dead,
                    traffic: traffic.get(&q.name).copied().unwrap_or_default(),
                };
                (q.name.clone(), point)
            })
            .collect();
        let groups = snapshot
            .groups
            .iter()
            .map(|g| {
                let point = GroupPoint {
                    unconsumed: g.unconsumed,
                    dead: g.dead,
                };
                (format!("{}/{}", g.topic, g.group), point)
            })
            .collect();
        let topics = snapshot
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.total))
            .collect();
        Sample {
            at: snapshot.taken_at,
            queues,
            groups,
            topics,
            history_list_length: snapshot
                .history_list_length
                .as_ref()
                .and_then(|h| h.length()),
        }
    }
}

/// The samples of the last hour, oldest first.
#[derive(Debug, Default)]
pub struct History {
    samples: VecDeque<Sample>,
}

impl History {
    /// Add a sample and forget those older than the window.
    pub(crate) fn push(&mut self, sample: Sample) {
        let Some(now) = sample.at else { return };
        self.samples.push_back(sample);
        while let Some(first) = self.samples.front().and_then(|s| s.at) {
            match now.duration_since(first) {
                Ok(age) if age > HISTORY_WINDOW => self.samples.pop_front(),
                _ => break,
            };
        }
    }

    /// `(time, value)` for every sample where `value` has one.
    pub(crate) fn series(&self, value: impl Fn(&Sample) -> Option<f64>) -> Vec<(SystemTime, f64)> {
        self.samples
            .iter()
            .filter_map(|s| Some((s.at?, value(s)?)))
            .collect()
    }

    /// Per-minute rate of a running total: the difference between consecutive samples over
    /// the time between them (a total that went down, e.g. a restart, counts as a restart).
    pub(crate) fn rate(&self, total: impl Fn(&Sample) -> Option<u64>) -> Vec<(SystemTime, f64)> {
        let points = self.series(|s| total(s).map(|v| v as f64));
        points
            .windows(2)
            .filter_map(|w| {
                let secs = w[1].0.duration_since(w[0].0).ok()?.as_secs_f64();
                (secs > 0.0).then(|| (w[1].0, (w[1].1 - w[0].1).max(0.0) * 60.0 / secs))
            })
            .collect()
    }

    /// The value `ago` before the latest sample, and the latest value: for "growing" alerts.
    pub(crate) fn change_over(
        &self,
        ago: std::time::Duration,
        value: impl Fn(&Sample) -> Option<u64>,
    ) -> Option<(u64, u64)> {
        let last = self.samples.back()?;
        let latest = value(last)?;
        let cutoff = last.at? - ago;
        // The sample at the cutoff; with a shorter history (or a subject that appeared
        // since), the oldest sample that has a value.
        let before = self
            .samples
            .iter()
            .rev()
            .find(|s| s.at.is_some_and(|t| t <= cutoff))
            .and_then(&value)
            .or_else(|| self.samples.iter().find_map(&value))?;
        Some((before, latest))
    }

    /// Whether `value` stayed above `threshold` for `window`: in the latest sample and in every
    /// one back to the last taken `window` or more before it. A history shorter than the
    /// window, or a sample without a value on the way, says no (Prometheus' `for:`: a condition
    /// alerts once it has lasted, and an interruption starts it afresh).
    pub(crate) fn above_for(
        &self,
        window: std::time::Duration,
        threshold: u64,
        value: impl Fn(&Sample) -> Option<u64>,
    ) -> bool {
        let Some(cutoff) = self
            .samples
            .back()
            .and_then(|s| s.at)
            .and_then(|t| t.checked_sub(window))
        else {
            return false;
        };
        for sample in self.samples.iter().rev() {
            if value(sample).is_none_or(|v| v <= threshold) {
                return false;
            }
            if sample.at.is_some_and(|t| t <= cutoff) {
                return true;
            }
        }
        false
    }

    /// How many samples are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, v: u64) -> Sample {
        let mut s = Sample {
            at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
            ..Sample::default()
        };
        s.topics.insert("t".into(), v);
        s
    }

    #[test]
    fn keeps_one_hour_and_computes_rates() {
        let mut h = History::default();
        for i in 0..400 {
            h.push(at(i * 10, i * 5));
        }
        assert!(h.len() <= 362, "{}", h.len());
        let rates = h.rate(|s| s.topics.get("t").copied());
        assert!(rates.iter().all(|(_, r)| (*r - 30.0).abs() < 1e-9));
        let (before, now) = h
            .change_over(Duration::from_secs(300), |s| s.topics.get("t").copied())
            .unwrap();
        assert_eq!(now - before, 150);
    }

    #[test]
    fn above_for_needs_the_whole_window_above() {
        let window = Duration::from_secs(300);
        let of = |s: &Sample| s.topics.get("t").copied();
        let history = |values: &[u64]| {
            let mut h = History::default();
            for (i, v) in values.iter().enumerate() {
                h.push(at(i as u64 * 60, *v));
            }
            h
        };
        // Six minutes of samples a minute apart, all above: the last five minutes are covered.
        assert!(history(&[11, 11, 11, 11, 11, 11]).above_for(window, 10, of));
        // Above for only the last four minutes, or not yet five minutes of history.
        assert!(!history(&[5, 11, 11, 11, 11, 11]).above_for(window, 10, of));
        assert!(!history(&[11, 11, 11, 11, 11]).above_for(window, 10, of));
        // A dip inside the window starts it afresh; equal to the threshold is not above.
        assert!(!history(&[11, 11, 11, 9, 11, 11]).above_for(window, 10, of));
        assert!(!history(&[10, 10, 10, 10, 10, 10]).above_for(window, 10, of));
        // Older dips do not matter.
        assert!(history(&[1, 2, 11, 11, 11, 11, 11, 11]).above_for(window, 10, of));
        assert!(!History::default().above_for(window, 10, of));
    }
}
