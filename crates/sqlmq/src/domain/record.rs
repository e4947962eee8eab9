//! What a producer publishes ([`Record`]), what it gets back ([`Published`]) and what a reader
//! reads ([`StreamRecord`]).

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

use super::error::{Error, Result};
use super::id::MessageId;

/// A record to publish on a topic.
///
/// ```
/// let r = sqlmq::Record::new("order 42 paid")
///     .key("customer-7")        // same key, same partition: per-key order
///     .header("trace-id", "abc");
/// # let _ = r;
/// ```
#[derive(Clone, Debug)]
pub struct Record {
    pub(crate) id: MessageId,
    pub(crate) key: Option<String>,
    pub(crate) partition: Option<u32>,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

impl Record {
    /// Longest record key: 255 bytes, without control characters (see [`Record::key`]); a
    /// longer key fails the publish with [`Error::InvalidArgument`].
    ///
    /// ```
    /// use sqlmq::Record;
    /// assert_eq!(Record::MAX_KEY_LEN, 255);
    /// let long = "customer-".repeat(40);
    /// let key = &long[..long.len().min(Record::MAX_KEY_LEN)];
    /// let r = Record::new("order paid").key(key);
    /// # let _ = r;
    /// ```
    pub const MAX_KEY_LEN: usize = 255;

    /// A record with this body, no key (a random partition).
    ///
    /// ```
    /// let r = sqlmq::Record::new(vec![1u8, 2, 3]);
    /// # let _ = r;
    /// ```
    pub fn new(body: impl Into<Vec<u8>>) -> Record {
        Record {
            id: MessageId::new(),
            key: None,
            partition: None,
            headers: BTreeMap::new(),
            body: body.into(),
        }
    }

    /// A record whose body is `value` as JSON.
    ///
    /// ```
    /// let r = sqlmq::Record::json(&serde_json::json!({"order": 42})).unwrap();
    /// # let _ = r;
    /// ```
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Record> {
        Ok(Record::new(serde_json::to_vec(value)?))
    }

    /// The key: records with the same key go to the same partition (FNV-1a hash of the key
    /// modulo the partition count), so they keep their order. Up to 255 bytes
    /// ([`Record::MAX_KEY_LEN`]).
    ///
    /// ```
    /// let r = sqlmq::Record::new("x").key("account-9");
    /// # let _ = r;
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Record {
        self.key = Some(key.into());
        self
    }

    /// Publish to this partition instead of the key's.
    ///
    /// ```
    /// let r = sqlmq::Record::new("x").partition(3);
    /// # let _ = r;
    /// ```
    pub fn partition(mut self, partition: u32) -> Record {
        self.partition = Some(partition);
        self
    }

    /// Add a header.
    ///
    /// ```
    /// let r = sqlmq::Record::new("x").header("source", "billing");
    /// # let _ = r;
    /// ```
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Record {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Use this id (unique across topics): publishing a record whose id is already published
    /// is a no-op that reports a duplicate (a retry after an unknown COMMIT outcome).
    ///
    /// ```
    /// let id = sqlmq::MessageId::new();
    /// assert_eq!(sqlmq::Record::new("x").with_id(id).id(), id);
    /// ```
    pub fn with_id(mut self, id: MessageId) -> Record {
        self.id = id;
        self
    }

    /// The record's id.
    ///
    /// ```
    /// println!("{}", sqlmq::Record::new("x").id());
    /// ```
    pub fn id(&self) -> MessageId {
        self.id
    }

    pub(crate) fn validate(&self, partitions: u32, max_payload: usize) -> Result<()> {
        if self.body.len() > max_payload {
            return Err(Error::PayloadTooLarge {
                size: self.body.len(),
                limit: max_payload,
            });
        }
        if let Some(key) = &self.key
            && (key.len() > Self::MAX_KEY_LEN || key.chars().any(char::is_control))
        {
            return Err(Error::InvalidArgument(format!(
                "a record key is at most {} bytes without control characters",
                Self::MAX_KEY_LEN
            )));
        }
        if let Some(p) = self.partition
            && p >= partitions
        {
            return Err(Error::InvalidArgument(format!(
                "partition {p} does not exist (the topic has {partitions})"
            )));
        }
        super::message::check_headers(&self.headers)
    }

    /// The partition this record goes to.
    pub(crate) fn partition_of(&self, partitions: u32) -> u32 {
        match (self.partition, &self.key) {
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key.as_bytes(), partitions),
            (None, None) => rand::random_range(0..partitions),
        }
    }
}

/// The partition of a key: 32-bit FNV-1a of its bytes, modulo the partition count. Stable
/// across versions and languages (producers in other languages can compute it).
///
/// ```
/// assert_eq!(sqlmq::topic::partition_for_key(b"customer-7", 1), 0);
/// assert_eq!(sqlmq::topic::partition_for_key(b"a", 8), sqlmq::topic::partition_for_key(b"a", 8));
/// ```
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for b in key {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % partitions.max(1)
}

/// What a publish did.
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
/// let p = t.publish(sqlmq::Record::new("x").key("k")).await?;
/// println!("{} to partition {}", p.id, p.partition);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Published {
    /// The record's id.
    pub id: MessageId,
    /// Its partition.
    pub partition: u32,
    /// True when the id was already published and nothing was written.
    pub duplicate: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_reference_one() {
        // FNV-1a 32 test vectors: "" -> 0x811c9dc5, "a" -> 0xe40c292c, "foobar" -> 0xbf9cf968
        // (Below u32::MAX each hash is its own partition number.)
        assert_eq!(partition_for_key(b"", u32::MAX), 0x811c_9dc5);
        assert_eq!(partition_for_key(b"a", u32::MAX), 0xe40c_292c);
        assert_eq!(partition_for_key(b"foobar", u32::MAX), 0xbf9c_f968);
        assert_eq!(partition_for_key(b"foobar", 8), 0xbf9c_f968 % 8);
    }

    #[test]
    fn explicit_partitions_win_and_unkeyed_records_spread() {
        assert_eq!(Record::new("x").key("k").partition(2).partition_of(4), 2);
        let seen: std::collections::HashSet<u32> =
            (0..200).map(|_| Record::new("x").partition_of(4)).collect();
        assert_eq!(seen.len(), 4);
    }
}

/// A record as stored in a topic's log.
///
/// ```no_run
/// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
/// for r in t.query_offsets(0, 0, 10).await? {
///     println!("{}:{} key={:?} {}", r.partition, r.offset, r.key, String::from_utf8_lossy(&r.body));
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamRecord {
    /// The record's id.
    pub id: MessageId,
    /// Its partition.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key, if it has one.
    pub key: Option<String>,
    /// Headers given at publish time.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
    /// When its producer published it (database clock).
    pub published_at: SystemTime,
    /// When it got its offset (database clock).
    pub sequenced_at: SystemTime,
}
