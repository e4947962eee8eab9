//! Control of running messages: what a cancel did, and a handler's progress.

use std::time::SystemTime;

use serde::Serialize;

use super::json_time;
use crate::domain::{Error, MessageId, Result, time_from_micros};

/// Most bytes of a progress value (its JSON text).
pub const MAX_PROGRESS: usize = 4096;

/// The reason a cancel through [`Queue::cancel`](crate::Queue::cancel) records.
pub(crate) const CANCELLED_BY_REQUEST: &str = "cancelled by request";

/// What [`Queue::cancel`](crate::Queue::cancel) did.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// match q.cancel(id).await? {
///     sqlmq::queue::Cancelled::Removed => println!("it was waiting: gone"),
///     sqlmq::queue::Cancelled::Running => println!("its handler is being stopped"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cancelled {
    /// The message was waiting (ready, delayed, blocked behind its key, or dead): it is gone.
    Removed,
    /// A consumer holds it: its handler's cancellation fires, no settlement of its receipt
    /// takes effect, and it is removed when the handler ends or its lease would have ended —
    /// never delivered again.
    Running,
}

/// The progress a running handler reported ([`JobContext::progress`](crate::JobContext::progress)),
/// kept while its delivery holds the lease.
///
/// ```no_run
/// # async fn f(q: sqlmq::Queue, id: sqlmq::MessageId) -> sqlmq::Result<()> {
/// if let Some(p) = q.progress(id).await? {
///     println!("{id}: {} at {:?}", p.value, p.updated_at);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Progress {
    /// The message.
    pub id: MessageId,
    /// The value the handler reported last (JSON).
    pub value: serde_json::Value,
    /// When it was written (database clock).
    #[serde(serialize_with = "json_time::time")]
    pub updated_at: SystemTime,
}

impl Progress {
    /// A stored progress row: its JSON text and its time (µs).
    pub(crate) fn decode(id: MessageId, value: &[u8], updated_us: i64) -> Result<Progress> {
        Ok(Progress {
            id,
            value: serde_json::from_slice(value)?,
            updated_at: time_from_micros(updated_us),
        })
    }
}

/// Check a progress value: JSON of at most [`MAX_PROGRESS`] bytes. Returns its text.
pub(crate) fn progress_text(value: &serde_json::Value) -> Result<String> {
    let text = serde_json::to_string(value)?;
    if text.len() > MAX_PROGRESS {
        return Err(Error::PayloadTooLarge {
            size: text.len(),
            limit: MAX_PROGRESS,
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_bounded_json() {
        assert_eq!(
            progress_text(&serde_json::json!({"done": 3, "of": 10})).unwrap(),
            r#"{"done":3,"of":10}"#
        );
        let big = serde_json::Value::String("x".repeat(MAX_PROGRESS));
        assert!(matches!(
            progress_text(&big),
            Err(Error::PayloadTooLarge { .. })
        ));
    }
}
