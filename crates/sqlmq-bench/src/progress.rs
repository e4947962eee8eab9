//! One progress bar per scenario (indicatif, on stderr). Hidden with `--json` and when stderr
//! is not a terminal, so that scripts and logs get no control characters.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How often a visible bar redraws on its own (elapsed time moves during idle phases).
const TICK: Duration = Duration::from_millis(200);

/// A scenario's bar. Cheap to clone; clones drive the same bar.
#[derive(Clone)]
pub struct Bar(ProgressBar);

impl Bar {
    /// A bar titled `title`, drawn only when `visible`.
    pub fn new(visible: bool, title: &str) -> Bar {
        if !visible {
            return Bar(ProgressBar::hidden());
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{prefix:<16} {msg:<34} [{bar:24}] {human_pos}/{human_len} {rate:>10} {elapsed:>4}",
        )
        .expect("valid template")
        // indicatif's own `per_sec` prints every decimal of the rate.
        .with_key(
            "rate",
            |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}/s", state.per_sec());
            },
        )
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(title.to_owned());
        bar.enable_steady_tick(TICK);
        Bar(bar)
    }

    /// Start a phase of `len` steps (its rate and elapsed time start from zero).
    pub fn phase(&self, what: &str, len: u64) {
        self.0.set_message(what.to_owned());
        self.0.set_length(len);
        self.0.reset();
    }

    /// Advance by `n` steps.
    pub fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    /// Move to step `pos` (for phases measured in time).
    pub fn set(&self, pos: u64) {
        self.0.set_position(pos);
    }

    /// Remove the bar.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
