//! Line charts as server-rendered SVG, from the in-memory history.

use std::time::{Duration, SystemTime};

use maud::{Markup, html};

use crate::config::HISTORY_WINDOW;

/// Colours of successive series.
const COLORS: [&str; 6] = [
    "#2f6fde", "#e07b00", "#2e9d4a", "#b3261e", "#7b4fd6", "#6b7386",
];
const W: f64 = 560.0;
const H: f64 = 160.0;
const PAD_L: f64 = 44.0;
const PAD_B: f64 = 18.0;

/// One named series of `(time, value)` points.
pub struct Series {
    pub name: String,
    pub points: Vec<(SystemTime, f64)>,
}

/// A chart of `series` over the history kept (up to the last hour), with a legend; `unit`
/// labels the y axis.
pub fn line_chart(title: &str, unit: &str, series: &[Series]) -> Markup {
    // The x axis spans the history there is (at least a minute, at most the window), so a
    // server started a few minutes ago still draws readable lines.
    let now = SystemTime::now();
    let earliest = series
        .iter()
        .filter_map(|s| s.points.first().map(|p| p.0))
        .min()
        .unwrap_or(now);
    let span = now
        .duration_since(earliest)
        .unwrap_or(Duration::ZERO)
        .clamp(Duration::from_secs(60), HISTORY_WINDOW);
    let start = now - span;
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max);
    let top = nice_ceiling(max);
    let x = |t: SystemTime| {
        let secs = t
            .duration_since(start)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        PAD_L + (secs / span.as_secs_f64()).min(1.0) * (W - PAD_L - 4.0)
    };
    let y = |v: f64| 4.0 + (H - PAD_B - 4.0) * (1.0 - v / top);
    let points: usize = series.iter().map(|s| s.points.len()).sum();
    html! {
        figure style="margin:0 0 10px" {
            figcaption { b { (title) } }
            svg width=(W) height=(H) viewBox=(format!("0 0 {W} {H}")) role="img" aria-label=(title) {
                line x1=(PAD_L) y1=(y(0.0)) x2=(W - 4.0) y2=(y(0.0)) stroke="#c8cdd8" {}
                line x1=(PAD_L) y1=(y(top)) x2=(W - 4.0) y2=(y(top)) stroke="#eef0f4" {}
                text x="2" y=(y(top) + 10.0) font-size="10" fill="#6b7386" { (fmt(top)) " " (unit) }
                text x="2" y=(y(0.0)) font-size="10" fill="#6b7386" { "0" }
                text x=(PAD_L) y=(H - 4.0) font-size="10" fill="#6b7386" { "−" (humantime::format_duration(Duration::from_secs(span.as_secs())).to_string().split(' ').take(2).collect::<Vec<_>>().join(" ")) }
                text x=(W - 30.0) y=(H - 4.0) font-size="10" fill="#6b7386" { "now" }
                @for (i, s) in series.iter().enumerate() {
                    @let path = s.points.iter().map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v))).collect::<Vec<_>>().join(" ");
                    polyline points=(path) fill="none" stroke=(COLORS[i % COLORS.len()]) stroke-width="1.6" {}
                }
                @if points == 0 {
                    text x=(W / 2.0 - 70.0) y=(H / 2.0) font-size="12" fill="#6b7386" { "collecting samples…" }
                }
            }
            div {
                @for (i, s) in series.iter().enumerate() {
                    span style=(format!("color:{};margin-right:12px", COLORS[i % COLORS.len()])) { "■ " (s.name) }
                }
            }
        }
    }
}

/// A round number at or above `v` for the axis (at least 1).
fn nice_ceiling(v: f64) -> f64 {
    if v <= 1.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * magnitude >= v {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

fn fmt(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ceilings_are_round() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(230.0), 250.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
    }

    #[test]
    fn renders_one_polyline_per_series() {
        let now = SystemTime::now();
        let s = |n: &str| Series {
            name: n.into(),
            points: vec![(now - Duration::from_secs(60), 1.0), (now, 3.0)],
        };
        let svg = line_chart("depth", "msgs", &[s("ready"), s("dead")]).into_string();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("ready") && svg.contains("dead"));
    }
}
