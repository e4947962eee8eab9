//! Publishing: records get their offsets inside the publishing transaction. No sequencer.
//!
//! On MySQL, concurrent producers commit in any order, so a record cannot take an offset when
//! it is inserted (a later offset could commit first, and a reader would pass the earlier one
//! before it appears): records wait in `topic_pending` and a sequencer numbers them after they
//! commit. SQLite admits one writer at a time: a transaction that writes holds the database's
//! write lock from its first write to its commit (sqlmq's own transactions take it at `BEGIN
//! IMMEDIATE`; a deferred transaction that read an older snapshot cannot write at all). So
//! transactions that publish commit in the order in which they take their offsets, and the
//! publishing transaction can take them itself:
//!
//! - `insert_pending` advances each partition's counter (`topic_partitions.next_offset`, bytes,
//!   `last_at`) and writes the records straight into `topic_log` with the offsets it took;
//! - a rolled-back publish takes its offsets back with it (the counter's update rolls back
//!   too), so offsets stay dense;
//! - a reader sees a partition's records up to its counter, all committed, in commit order:
//!   the no skipped offsets guarantee of the guide (docs/guide/src/guarantees.md), without a second transaction per publish.
//!
//! Hence `sequence_step` has nothing to do, nothing is ever pending, and the engine does not
//! run sequencers for this store ([`Publish::OFFSETS_AT_PUBLISH`]): a publish's records can be
//! claimed as soon as it commits.
//!
//! Sequencing times stay non-decreasing within a partition, as offsets by time need: a record
//! is stamped with the later of the database clock and the partition's last stamp (the clock
//! of the machine may step back).

use std::collections::{BTreeMap, HashSet};

use sqlx::{Row, SqliteConnection};

use super::{SqliteStore, now_us};
use crate::domain::{Error, MessageId, Result};
use crate::store::body::{Columns, Statement};
use crate::store::rows::{PendingBatch, PendingRow};
use crate::store::{Publish, ScriptedPublish};

/// Ids of `ids` already published (by the unique index on `topic_log.id`).
pub(crate) const KNOWN_IDS: &str = "SELECT id FROM {p}topic_log WHERE id IN ({list})";

/// Take `?` offsets of a partition (and count `?` bytes): returns the first offset taken and
/// the sequencing time, never before the partition's previous one.
pub(crate) const TAKE_OFFSETS: &str = concat!(
    "UPDATE {p}topic_partitions SET next_offset = next_offset + ?1, bytes = bytes + ?2, ",
    "last_at = max(last_at, ",
    now_us!(),
    ") WHERE topic_id = ?3 AND partition_no = ?4 RETURNING next_offset - ?1, last_at, ",
    now_us!()
);

const INSERT_LOG: &str = "INSERT INTO {p}topic_log (topic_id, partition_no, msg_offset, id, \
    msg_key, headers, body, published_at, sequenced_at) VALUES {list}";
const LOG_ROW: &str = "(?,?,?,?,?,?,?,?,?)";
/// Placeholders per log row.
const LOG_PARAMS: usize = 9;

/// A record with the offset and times its publish gave it.
struct Logged<'a> {
    row: &'a PendingRow<'a>,
    offset: i64,
    published_us: i64,
    sequenced_us: i64,
}

impl Publish for sqlx::Sqlite {
    /// The publishing transaction gives the offsets (see the module documentation).
    const OFFSETS_AT_PUBLISH: bool = true;

    /// Which of `ids` are already published: in the log, as nothing is ever pending.
    async fn known_topic_ids(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        ids: &[MessageId],
    ) -> Result<HashSet<MessageId>> {
        store
            .fetch_id_list(conn, KNOWN_IDS, ids)
            .await?
            .iter()
            .map(|row| row.id_at(0))
            .collect()
    }

    /// Log the records with their partitions' next offsets, in the caller's transaction:
    /// each partition's counter is advanced once for all its records (which take offsets in
    /// batch order), then the rows are inserted.
    async fn insert_pending(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        batch: &PendingBatch<'_>,
    ) -> Result<()> {
        let PendingBatch { topic_id, rows } = *batch;
        let mut by_partition: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
        for r in rows {
            let (n, bytes) = by_partition.entry(r.partition).or_default();
            *n += 1;
            *bytes += r.body.len() as i64;
        }
        // partition -> (next offset to give, sequencing time, publishing time)
        let mut next: BTreeMap<i32, (i64, i64, i64)> = BTreeMap::new();
        for (&partition, &(n, bytes)) in &by_partition {
            let taken = sqlx::query(store.st.get(TAKE_OFFSETS))
                .bind(n)
                .bind(bytes)
                .bind(topic_id)
                .bind(partition)
                .fetch_optional(&mut *conn)
                .await?
                .ok_or_else(|| {
                    // The topic was deleted under a handle still publishing to it.
                    Error::UnknownTopic(format!("#{topic_id} (no partition {partition})"))
                })?;
            next.insert(
                partition,
                (taken.try_get(0)?, taken.try_get(1)?, taken.try_get(2)?),
            );
        }
        let logged: Vec<Logged<'_>> = rows
            .iter()
            .map(|row| {
                let (offset, sequenced_us, published_us) = next
                    .get_mut(&row.partition)
                    .expect("every partition was counted above");
                let logged = Logged {
                    row,
                    offset: *offset,
                    published_us: *published_us,
                    sequenced_us: *sequenced_us,
                };
                *offset += 1;
                logged
            })
            .collect();
        store
            .insert_values(conn, INSERT_LOG, LOG_ROW, LOG_PARAMS, &logged, |q, l| {
                q.arg(topic_id)
                    .arg(l.row.partition)
                    .arg(l.offset)
                    .arg(l.row.id.bytes())
                    .arg(l.row.key)
                    .arg(l.row.headers.as_deref().map(str::as_bytes))
                    .arg(l.row.body)
                    .arg(l.published_us)
                    .arg(l.sequenced_us)
            })
            .await
    }

    /// Nothing waits for an offset: records have theirs from their publish.
    async fn sequence_step(
        _store: &SqliteStore,
        _conn: &mut SqliteConnection,
        _topic_id: i32,
        _partitions: &[i32],
        _limit: usize,
    ) -> Result<usize> {
        Ok(0)
    }

    /// Nothing waits for an offset.
    async fn pending_partitions(
        _store: &SqliteStore,
        _conn: &mut SqliteConnection,
        _topic_id: i32,
    ) -> Result<BTreeMap<i32, i64>> {
        Ok(BTreeMap::new())
    }

    /// Nothing waits for an offset.
    async fn pending_by_id(
        _store: &SqliteStore,
        _conn: &mut SqliteConnection,
        _id: MessageId,
    ) -> Result<Option<(i32, i32)>> {
        Ok(None)
    }
}

/// None: SQLite runs in this process, so a publish pays no round trips to save.
impl ScriptedPublish for sqlx::Sqlite {
    const PUBLISH_SCRIPTS: bool = false;

    type PublishScript = std::convert::Infallible;

    fn prepare_publish_script(
        _store: &SqliteStore,
        _batch: &PendingBatch<'_>,
        _budget: usize,
    ) -> Result<Option<Self::PublishScript>> {
        Ok(None)
    }

    async fn publish_script(
        _store: &SqliteStore,
        _conn: &mut sqlx::SqliteConnection,
        script: &Self::PublishScript,
    ) -> Result<bool> {
        match *script {}
    }
}
