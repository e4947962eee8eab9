//! Message bodies in JSON: `body` when the bytes are UTF-8 text, `body_base64` otherwise (or
//! when the sender chose it). Exactly one of the two is given on the way in.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::error::ApiError;

/// Decode a body given as `body` (text) or `body_base64` (bytes); exactly one must be present.
///
/// ```
/// use sqlmq_serve::body::decode;
/// assert_eq!(decode(Some("hi".into()), None).unwrap(), b"hi");
/// assert_eq!(decode(None, Some("aGk=".into())).unwrap(), b"hi");
/// assert!(decode(Some("a".into()), Some("YQ==".into())).is_err());
/// assert!(decode(None, None).is_err());
/// ```
pub fn decode(body: Option<String>, body_base64: Option<String>) -> Result<Vec<u8>, ApiError> {
    match (body, body_base64) {
        (Some(text), None) => Ok(text.into_bytes()),
        (None, Some(encoded)) => STANDARD
            .decode(encoded.as_bytes())
            .map_err(|e| ApiError::invalid(format!("body_base64 is not valid base64: {e}"))),
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "give either body or body_base64, not both",
        )),
        (None, None) => Err(ApiError::invalid("missing body (or body_base64)")),
    }
}

/// Encode bytes for a response: `(Some(text), None)` when they are UTF-8, else
/// `(None, Some(base64))`.
///
/// ```
/// use sqlmq_serve::body::encode;
/// assert_eq!(encode(b"hi".to_vec()), (Some("hi".to_owned()), None));
/// assert_eq!(encode(vec![0xff]), (None, Some("/w==".to_owned())));
/// ```
pub fn encode(bytes: Vec<u8>) -> (Option<String>, Option<String>) {
    match String::from_utf8(bytes) {
        Ok(text) => (Some(text), None),
        Err(e) => (None, Some(STANDARD.encode(e.into_bytes()))),
    }
}

/// A `SystemTime` as RFC 3339 with milliseconds (UTC), the API's time format.
///
/// ```
/// let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1500);
/// assert_eq!(sqlmq_serve::body::rfc3339(t), "1970-01-01T00:00:01.500Z");
/// ```
pub fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// An RFC 3339 time with any UTC offset (`2026-11-22T10:00:00Z`, `2026-11-22T11:00:00+01:00`),
/// or without one, read as UTC (`2026-11-22T10:00:00`, `2026-11-22 10:00:00`); `None` for
/// anything else.
///
/// ```
/// use sqlmq_serve::body::parse_rfc3339;
/// assert_eq!(parse_rfc3339("2026-11-22T11:00:00+01:00"), parse_rfc3339("2026-11-22T10:00:00Z"));
/// assert_eq!(parse_rfc3339("2026-11-22 10:00:00"), parse_rfc3339("2026-11-22T10:00:00Z"));
/// assert_eq!(parse_rfc3339("10m"), None);
/// ```
pub fn parse_rfc3339(text: &str) -> Option<std::time::SystemTime> {
    match text.parse::<jiff::Timestamp>() {
        Ok(t) => Some(t.into()),
        Err(_) => humantime::parse_rfc3339_weak(text).ok(),
    }
}
