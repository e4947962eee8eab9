//! Validation of user-chosen identifiers.
//!
//! Names end up in SQL as bound values, never spliced into statements, but they also appear in
//! CLI output, URLs and metrics labels, so the accepted alphabet is small (guarantee 9 of the guide: bad input gets a typed error).

use super::error::{Error, Result};

/// Longest accepted name (queue, topic, group, member) and message key (ordering,
/// idempotency); public as [`Client::MAX_NAME_LEN`](crate::Client::MAX_NAME_LEN).
pub(crate) const MAX_NAME_LEN: usize = 128;

/// Check a queue (or topic, group) name: 1 to 128 characters
/// ([`Client::MAX_NAME_LEN`](crate::Client::MAX_NAME_LEN)) of `[A-Za-z0-9._-]`.
///
/// ```
/// assert!(sqlmq::admin::validate_name("queue", "emails.high-priority_2").is_ok());
/// assert!(sqlmq::admin::validate_name("queue", "no spaces").is_err());
/// assert!(sqlmq::admin::validate_name("queue", "").is_err());
/// ```
pub fn validate_name(kind: &'static str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName {
            kind,
            name: name.to_owned(),
        })
    }
}

/// Check a table prefix: up to 32 characters of `[A-Za-z0-9_]`.
///
/// The prefix is the only user input that is spliced into SQL text (table names cannot be bound),
/// which is why its alphabet is stricter than that of names.
pub(crate) fn validate_table_prefix(prefix: &str) -> Result<()> {
    let ok = prefix.len() <= 32
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "invalid table prefix {prefix:?}: up to 32 characters of A-Z a-z 0-9 _"
        )))
    }
}

/// Check an ordering key or idempotency key: 1 to 128 bytes, no control characters.
pub(crate) fn validate_key(kind: &str, key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_NAME_LEN || key.chars().any(char::is_control) {
        return Err(Error::InvalidArgument(format!(
            "{kind} must be 1 to {MAX_NAME_LEN} bytes without control characters, got {key:?}"
        )));
    }
    Ok(())
}

/// Check a concurrency key: as [`validate_key`], one byte shorter (the stored key carries a
/// mark byte that tells it from an ordering key).
pub(crate) fn validate_concurrency_key(key: &str) -> Result<()> {
    validate_key("concurrency key", key)?;
    if key.len() == MAX_NAME_LEN {
        return Err(Error::InvalidArgument(format!(
            "concurrency key must be 1 to {} bytes, got {}",
            MAX_NAME_LEN - 1,
            key.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(validate_name("queue", &"a".repeat(128)).is_ok());
        assert!(validate_name("queue", &"a".repeat(129)).is_err());
        for bad in ["", "a b", "a/b", "é", "a;drop", "a\n"] {
            assert!(validate_name("queue", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefixes() {
        assert!(validate_table_prefix("").is_ok());
        assert!(validate_table_prefix("app_mq_").is_ok());
        assert!(validate_table_prefix("a-b").is_err());
        assert!(validate_table_prefix("x`; DROP").is_err());
    }

    #[test]
    fn keys() {
        assert!(validate_key("ordering key", "customer-42 / ü").is_ok());
        assert!(validate_key("ordering key", "").is_err());
        assert!(validate_key("ordering key", "a\tb").is_err());
        assert!(validate_key("ordering key", &"k".repeat(129)).is_err());
    }
}
