//! A topic's log as the scenarios see it: waiting until every published record has its offset
//! (the background sequencers give offsets after commit), and reading every partition back to
//! count what went wrong.
//!
//! Waiting: each [`Published`] names the record's partition, so the bench knows where each
//! partition of its fresh topic must end (offsets start at 0); a partition is complete once the
//! offset just below its end can be read. A probe reads one row of each incomplete partition,
//! every [`PROBE`], so waiting adds at most a few milliseconds to a measurement.
//!
//! Checking, once the clock has stopped: every partition is read from offset 0 in pages of
//! [`Topic::MAX_QUERY`] records.
//! - a duplicate is an id found in the log a second time, or an id the bench never published;
//! - a loss is a published id not in the log, an id logged in another partition than its
//!   publish reported, or an offset left empty below a partition's end (a reader would find a
//!   hole where a record should be).
//!
//! The same reading counts the sequencing steps that gave the offsets: a step stamps every
//! record it logs with one `sequenced_at`, so a step is a run of consecutive offsets with the
//! same time.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Result;
use sqlmq::topic::Published;
use sqlmq::{MessageId, Topic};

use crate::args::STALL;
use crate::backend::Db;
use crate::track::Check;

/// Time between two probes of the incomplete partitions.
const PROBE: Duration = Duration::from_millis(5);

/// Offsets each partition must reach: the number of records published to it.
fn ends(published: &[Published]) -> HashMap<u32, i64> {
    let mut ends = HashMap::new();
    for p in published.iter().filter(|p| !p.duplicate) {
        *ends.entry(p.partition).or_insert(0) += 1;
    }
    ends
}

/// Wait until every record of `published` has its offset. Gives up once no partition has
/// completed for [`STALL`] or for `patience`, whichever is longer; returns whether all did.
pub async fn wait_sequenced<B: Db>(
    topic: &Topic<B>,
    published: &[Published],
    patience: Duration,
) -> Result<bool> {
    let mut left = ends(published);
    let patience = patience.max(STALL);
    let mut progress = Instant::now();
    loop {
        let before = left.len();
        let mut complete = Vec::new();
        for (&partition, &end) in &left {
            if !topic.query_offsets(partition, end - 1, 1).await?.is_empty() {
                complete.push(partition);
            }
        }
        for p in complete {
            left.remove(&p);
        }
        if left.is_empty() {
            return Ok(true);
        }
        if left.len() < before {
            progress = Instant::now();
        } else if progress.elapsed() > patience {
            return Ok(false);
        }
        tokio::time::sleep(PROBE).await;
    }
}

/// What reading the log back found.
pub struct Logged {
    /// Duplicates and losses.
    pub check: Check,
    /// Sequencing steps that gave the offsets, over all partitions.
    pub steps: u64,
    /// Offsets left empty below a partition's end (counted in `check.losses`).
    pub gaps: u64,
    /// Published records not in the log (counted in `check.losses`).
    pub missing: u64,
}

impl Logged {
    /// What went wrong, for a figure's note; empty when nothing did.
    pub fn problems(&self) -> String {
        let misplaced = self.check.losses - self.gaps - self.missing;
        if self.check.losses + self.check.duplicates + self.check.unexpected == 0 {
            return String::new();
        }
        format!(
            "; BROKEN: {} offsets left empty, {} published records not in the log, {} in \
             another partition, {} logged twice, {} unknown ids",
            self.gaps, self.missing, misplaced, self.check.duplicates, self.check.unexpected
        )
    }
}

/// Read the whole log of `topic` and compare it with what was `published`.
pub async fn check<B: Db>(topic: &Topic<B>, published: &[Published]) -> Result<Logged> {
    let placed: HashMap<MessageId, u32> = published.iter().map(|p| (p.id, p.partition)).collect();
    let mut seen = HashSet::with_capacity(published.len());
    let mut check = Check::default();
    let (mut steps, mut gaps) = (0, 0);
    for partition in 0..topic.config().partitions {
        let mut next = 0i64;
        let mut step = None;
        loop {
            let page = topic
                .query_offsets(partition, next, Topic::MAX_QUERY)
                .await?;
            if page.is_empty() {
                break;
            }
            for r in &page {
                if step != Some(r.sequenced_at) {
                    steps += 1;
                    step = Some(r.sequenced_at);
                }
                gaps += (r.offset - next).max(0) as u64;
                next = r.offset + 1;
                match placed.get(&r.id) {
                    None => check.unexpected += 1,
                    Some(_) if !seen.insert(r.id) => check.duplicates += 1,
                    Some(&p) if p != partition => check.losses += 1,
                    Some(_) => {}
                }
            }
        }
    }
    let missing = placed.keys().filter(|id| !seen.contains(*id)).count() as u64;
    check.losses += gaps + missing;
    Ok(Logged {
        check,
        steps,
        gaps,
        missing,
    })
}
