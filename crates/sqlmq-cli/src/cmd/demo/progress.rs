//! The demo's live progress line (indicatif, on stderr; hidden when stderr is not a terminal).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinHandle;

use super::workers::Counters;

/// How often the line is redrawn.
const REFRESH: Duration = Duration::from_millis(100);

/// A progress bar fed from the counters by a background task.
pub struct Progress {
    bar: ProgressBar,
    ticker: JoinHandle<()>,
}

impl Progress {
    /// Show a bar of `total` messages to settle.
    pub fn start(total: u64, counters: Arc<Counters>) -> Progress {
        let bar = ProgressBar::new(total);
        let style = ProgressStyle::with_template(
            "{spinner} {elapsed:>3} [{bar:30}] {pos}/{len} settled · {msg}",
        )
        .expect("valid template")
        .progress_chars("=> ");
        bar.set_style(style);
        let started = Instant::now();
        let shown = bar.clone();
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(REFRESH);
            loop {
                tick.tick().await;
                shown.set_position(counters.settled());
                shown.set_message(line(&counters, started.elapsed()));
            }
        });
        Progress { bar, ticker }
    }

    /// Draw the final state and stop refreshing.
    pub fn finish(self, counters: &Counters, elapsed: Duration) {
        self.ticker.abort();
        self.bar.set_position(counters.settled());
        self.bar.finish_with_message(line(counters, elapsed));
    }
}

/// The text beside the bar.
fn line(c: &Counters, elapsed: Duration) -> String {
    let processed = c.processed.load(Ordering::Relaxed);
    format!(
        "sent {} · processed {} · retried {} · dead-lettered {} · {:.0} msg/s",
        c.sent.load(Ordering::Relaxed),
        processed,
        c.retried.load(Ordering::Relaxed),
        c.dead.load(Ordering::Relaxed),
        rate(processed, elapsed)
    )
}

/// Messages per second.
pub fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(0.001)
}
