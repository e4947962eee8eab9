//! Points in time in JSON: RFC 3339 in UTC with milliseconds (`2026-11-28T18:35:29.123Z`), the
//! one form of sqlmq's JSON (the CLI's `--json`, the HTTP API).
//! `#[serde(serialize_with = "json_time::time")]` for a `SystemTime`, `json_time::option` for
//! an `Option<SystemTime>`, and `deserialize_with = "json_time::normalized"` for a time kept as
//! text (histories store microseconds).

use std::time::SystemTime;

use serde::{Deserialize, Deserializer, Serializer};

/// `t` in the one form.
pub(crate) fn format(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A stored time (µs since the epoch) in the one form.
pub(crate) fn from_micros(us: i64) -> String {
    format(super::time_from_micros(us))
}

pub(crate) fn time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*t))
}

pub(crate) fn option<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => time(t, s),
        None => s.serialize_none(),
    }
}

/// A time kept as RFC 3339 text, read back in the one form (any precision in, milliseconds
/// out); text that is no RFC 3339 time is kept as it is rather than failing the whole read.
pub(crate) fn normalized<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    Ok(match humantime::parse_rfc3339_weak(&text) {
        Ok(t) => format(t),
        Err(_) => text,
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn times_read_back_in_the_one_form() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_355_000_123_456);
        assert_eq!(format(t), "2025-11-28T18:36:40.123Z");
        let stored = serde_json::json!("2025-11-28T18:36:40.123456Z");
        assert_eq!(normalized(stored).unwrap(), "2025-11-28T18:36:40.123Z");
        assert_eq!(normalized(serde_json::json!("soon")).unwrap(), "soon");
    }
}
