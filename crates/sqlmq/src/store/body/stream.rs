//! Reading the log without claiming it (broadcast members, queries, offsets by time), and
//! broadcast members' checkpointed positions.
//!
//! Plain reads by primary key range. A read from offset N returns a prefix of what has
//! offsets, never a set with holes: a partition's offsets become visible only through
//! commits that each cover a dense range after the previous one (MySQL's sequencing steps,
//! SQLite's publishing transactions, which it runs one at a time).

use std::collections::HashMap;

use super::{Columns, SqlStore, Statement};
use crate::domain::{MessageId, Result, StreamRecord, time_from_micros};
use crate::store::Backend;
use crate::store::rows::PositionRow;

/// The log reads and position statements whose texts differ by backend. Each record read
/// returns the record columns: `partition, offset, id, key, headers, body, published (µs),
/// sequenced (µs)`.
pub struct StreamSql {
    /// Up to a limit of a partition's records from an offset on, in offset order: `topic id,
    /// partition, offset, limit`. Returns the record columns.
    pub read_from: &'static str,
    /// A record of a topic by id: `id, topic id`. Returns the record columns.
    pub record_by_id: &'static str,
    /// Up to a limit of a topic's records with a key, by partition and offset: `topic id,
    /// key, limit`. Returns the record columns.
    pub records_by_key: &'static str,
    /// When the record at an offset was sequenced: `topic id, partition, offset`. Returns
    /// `sequenced (µs)`.
    pub sequenced_at: &'static str,
    /// Every checkpointed position of a group, by member and partition: group id. Returns
    /// `member, partition, next offset, updated (µs)`.
    pub all_positions: &'static str,
    /// Create or move a member's positions: `{list}` of `position_row`.
    pub save_positions: &'static str,
    /// One row of `save_positions`: `group id, member, partition, next offset`.
    pub position_row: &'static str,
}

/// A member's checkpointed positions: `group id, member`. Returns `partition, next offset`.
const POSITIONS: &str = "SELECT partition_no, next_offset FROM {p}group_positions \
    WHERE group_id = ? AND member = ?";
/// Forget every member's positions: group id.
const DELETE_POSITIONS: &str = "DELETE FROM {p}group_positions WHERE group_id = ?";
/// Forget one member's positions: `group id, member`.
const DELETE_MEMBER: &str = "DELETE FROM {p}group_positions WHERE group_id = ? AND member = ?";

fn decode_record<B: Backend>(row: &B::Row) -> Result<StreamRecord> {
    Ok(StreamRecord {
        partition: row.col::<i32>(0)? as u32,
        offset: row.col(1)?,
        id: row.id_at(2)?,
        key: row.opt_text_at(3)?,
        headers: row.headers_at(4)?,
        body: row.col(5)?,
        published_at: time_from_micros(row.col(6)?),
        sequenced_at: time_from_micros(row.col(7)?),
    })
}

/// Reading the log without claiming it, and broadcast members' positions.
impl<B: Backend> SqlStore<B> {
    /// Up to `limit` records of one partition from `offset` on, in offset order.
    pub(crate) async fn read_from(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        offset: i64,
        limit: usize,
    ) -> Result<Vec<StreamRecord>> {
        let rows = self
            .query(B::STREAM.read_from)
            .arg(topic_id)
            .arg(partition)
            .arg(offset)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter().map(decode_record::<B>).collect()
    }

    /// A sequenced record of the topic by id.
    pub(crate) async fn record_by_id(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        id: MessageId,
    ) -> Result<Option<StreamRecord>> {
        let row = self
            .query(B::STREAM.record_by_id)
            .arg(id.bytes())
            .arg(topic_id)
            .first(conn)
            .await?;
        row.as_ref().map(decode_record::<B>).transpose()
    }

    /// Records with `key`, by partition and offset.
    pub(crate) async fn records_by_key(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        key: &str,
        limit: usize,
    ) -> Result<Vec<StreamRecord>> {
        let rows = self
            .query(B::STREAM.records_by_key)
            .arg(topic_id)
            .arg(key.as_bytes())
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter().map(decode_record::<B>).collect()
    }

    /// When the record at `offset` of one partition was sequenced (µs since the epoch);
    /// `None` when it is not retained.
    pub(crate) async fn sequenced_at(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>> {
        let row = self
            .query(B::STREAM.sequenced_at)
            .arg(topic_id)
            .arg(partition)
            .arg(offset)
            .first(conn)
            .await?;
        row.map(|r| r.col(0)).transpose()
    }

    /// A broadcast member's checkpointed positions, by partition.
    pub(crate) async fn positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: &str,
    ) -> Result<HashMap<i32, i64>> {
        let rows = self
            .query(POSITIONS)
            .arg(group_id)
            .arg(member.as_bytes())
            .rows(conn)
            .await?;
        rows.iter().map(|r| Ok((r.col(0)?, r.col(1)?))).collect()
    }

    /// Every checkpointed position of a broadcast group.
    pub(crate) async fn all_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
    ) -> Result<Vec<PositionRow>> {
        let rows = self
            .query(B::STREAM.all_positions)
            .arg(group_id)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(PositionRow {
                    member: String::from_utf8_lossy(&r.col::<Vec<u8>>(0)?).into_owned(),
                    partition: r.col(1)?,
                    next_offset: r.col(2)?,
                    updated_us: r.col(3)?,
                })
            })
            .collect()
    }

    /// Checkpoint a broadcast member's positions.
    pub(crate) async fn save_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: &str,
        positions: &[(i32, i64)],
    ) -> Result<()> {
        self.insert_values(
            conn,
            B::STREAM.save_positions,
            B::STREAM.position_row,
            4,
            positions,
            |q, (p, o)| q.arg(group_id).arg(member.as_bytes()).arg(*p).arg(*o),
        )
        .await
    }

    /// Forget a broadcast member's checkpoints (`None`: every member's).
    pub(crate) async fn delete_positions(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: Option<&str>,
    ) -> Result<u64> {
        match member {
            Some(member) => {
                self.query(DELETE_MEMBER)
                    .arg(group_id)
                    .arg(member.as_bytes())
                    .run(conn)
                    .await
            }
            None => self.query(DELETE_POSITIONS).arg(group_id).run(conn).await,
        }
    }
}
