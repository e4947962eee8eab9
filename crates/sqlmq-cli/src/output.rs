//! Printing for humans (tables, short durations, body previews) and for scripts (JSON). Tables
//! and JSON documents are printed by `sqlmq_cli_common::output`, shared with `sqlmq-bench`.

use std::time::{Duration, SystemTime};

use base64::Engine;
use serde::Serialize;
pub use sqlmq_cli_common::output::{print_json, print_table};

/// A message body in JSON: `"body": "text"` when it is valid UTF-8, else
/// `"body_base64": "..."`. Flatten it into the surrounding object.
#[derive(Debug, Serialize)]
pub enum JsonBody {
    /// Valid UTF-8.
    #[serde(rename = "body")]
    Text(String),
    /// Anything else, standard base64 with padding.
    #[serde(rename = "body_base64")]
    Base64(String),
}

impl JsonBody {
    /// Encode `bytes` in whichever form keeps them intact.
    pub fn new(bytes: &[u8]) -> JsonBody {
        match std::str::from_utf8(bytes) {
            Ok(text) => JsonBody::Text(text.to_owned()),
            Err(_) => JsonBody::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }
}

/// A duration for humans: `850ms` below a second, else whole units such as `2m 5s`.
pub fn short_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
    }
}

/// A point in time for humans: RFC 3339 UTC with seconds.
pub fn timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A point in time in JSON: RFC 3339 UTC with milliseconds, the one form of every `--json`
/// output and of the HTTP API (durations there are whole milliseconds in `_ms` fields) — the
/// API's own formatter, so that the two cannot drift apart.
pub use sqlmq_serve::body::rfc3339 as json_time;

/// The first `max` characters of a body on one line (lossy UTF-8, control characters shown as
/// spaces), with `…` when cut.
pub fn preview(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_keep_their_bytes() {
        let text = serde_json::to_value(JsonBody::new(b"hi")).unwrap();
        assert_eq!(text, serde_json::json!({"body": "hi"}));
        let bin = serde_json::to_value(JsonBody::new(&[0xff, 0x00, 0x41])).unwrap();
        assert_eq!(bin, serde_json::json!({"body_base64": "/wBB"}));
    }

    #[test]
    fn durations_and_previews() {
        assert_eq!(short_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(short_duration(Duration::from_millis(125_400)), "2m 5s");
        assert_eq!(preview(b"a\nb", 10), "a b");
        assert_eq!(preview("héllo wörld".as_bytes(), 5), "héllo…");
    }
}
