//! Reading the log without claiming it: broadcast members, queries, and broadcast positions.
//!
//! Plain (non-locking) reads by primary key range. A read from offset N returns a prefix of
//! what is sequenced, never a set with holes: offsets become visible only through sequencing
//! commits, each covering a dense range after the previous one.

use std::collections::HashMap;

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::groups::OFFSET_TIME;
use super::{MySqlStore, headers_at, id_at, insert_values, micros, opt_text_at};
use crate::domain::Result;
use crate::domain::StreamRecord;
use crate::domain::{MessageId, time_from_micros};
use crate::store::Stream;
use crate::store::rows::PartitionRow;
use crate::store::rows::PositionRow;
use crate::store::statements::MAX_LIST;
use sqlx::MySql;

macro_rules! record_columns {
    () => {
        concat!(
            "SELECT partition_no, msg_offset, id, msg_key, headers, body, ",
            micros!("published_at"),
            ", ",
            micros!("sequenced_at"),
            " FROM {p}topic_log "
        )
    };
}
pub(crate) const READ_FROM: &str = concat!(
    record_columns!(),
    "FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? ",
    "ORDER BY msg_offset LIMIT ?"
);
pub(crate) const RECORD_BY_ID: &str = concat!(
    record_columns!(),
    "FORCE INDEX (id) WHERE id = ? AND topic_id = ?"
);
pub(crate) const RECORDS_BY_KEY: &str = concat!(
    record_columns!(),
    "FORCE INDEX (by_key) WHERE topic_id = ? AND msg_key = ? ",
    "ORDER BY partition_no, msg_offset LIMIT ?"
);
/// A record published but not sequenced yet (its producer committed; no offset so far).
pub(crate) const PENDING_BY_ID: &str = "SELECT topic_id, partition_no FROM {p}topic_pending \
    FORCE INDEX (id) WHERE id = ?";
pub(crate) const PENDING_PARTITIONS: &str = "SELECT partition_no, COUNT(*) FROM {p}topic_pending \
    FORCE INDEX (PRIMARY) WHERE topic_id = ? GROUP BY partition_no";
pub(crate) const POSITIONS: &str = "SELECT partition_no, next_offset FROM {p}group_positions \
    WHERE group_id = ? AND member = ?";
pub(crate) const ALL_POSITIONS: &str = concat!(
    "SELECT member, partition_no, next_offset, ",
    micros!("updated_at"),
    " FROM {p}group_positions WHERE group_id = ? ORDER BY member, partition_no"
);
pub(crate) const SAVE_POSITIONS: &str = "INSERT INTO {p}group_positions \
    (group_id, member, partition_no, next_offset, updated_at) VALUES {list} \
    ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset), updated_at = VALUES(updated_at)";
const POSITION_ROW: &str = "(?,?,?,?,UTC_TIMESTAMP(6))";
pub(crate) const DELETE_POSITIONS: &str = "DELETE FROM {p}group_positions WHERE group_id = ?";
pub(crate) const DELETE_MEMBER: &str =
    "DELETE FROM {p}group_positions WHERE group_id = ? AND member = ?";

fn decode_record(row: &MySqlRow) -> Result<StreamRecord> {
    Ok(StreamRecord {
        partition: row.try_get::<i32, _>(0)? as u32,
        offset: row.try_get(1)?,
        id: id_at(row, 2)?,
        key: opt_text_at(row, 3)?,
        headers: headers_at(row, 4)?,
        body: row.try_get(5)?,
        published_at: time_from_micros(row.try_get(6)?),
        sequenced_at: time_from_micros(row.try_get(7)?),
    })
}

impl Stream<MySql> for MySqlStore {
    /// Up to `limit` records of one partition from `offset` on, in offset order.
    async fn read_from(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        partition: i32,
        offset: i64,
        limit: usize,
    ) -> Result<Vec<StreamRecord>> {
        let rows = sqlx::query(self.st.get(READ_FROM))
            .bind(topic_id)
            .bind(partition)
            .bind(offset)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(decode_record).collect()
    }

    /// A sequenced record of `topic_id` by id.
    async fn record_by_id(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        id: MessageId,
    ) -> Result<Option<StreamRecord>> {
        let row = sqlx::query(self.st.get(RECORD_BY_ID))
            .bind(id.bytes())
            .bind(topic_id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode_record).transpose()
    }

    /// Records with `key`, by partition and offset.
    async fn records_by_key(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        key: &str,
        limit: usize,
    ) -> Result<Vec<StreamRecord>> {
        let rows = sqlx::query(self.st.get(RECORDS_BY_KEY))
            .bind(topic_id)
            .bind(key.as_bytes())
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(decode_record).collect()
    }

    /// A broadcast member's checkpointed positions.
    async fn positions(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        member: &str,
    ) -> Result<HashMap<i32, i64>> {
        let rows = sqlx::query(self.st.get(POSITIONS))
            .bind(group_id)
            .bind(member.as_bytes())
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    /// Every checkpointed position of a broadcast group.
    async fn all_positions(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
    ) -> Result<Vec<PositionRow>> {
        let rows = sqlx::query(self.st.get(ALL_POSITIONS))
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(PositionRow {
                    member: String::from_utf8_lossy(&r.try_get::<Vec<u8>, _>(0)?).into_owned(),
                    partition: r.try_get(1)?,
                    next_offset: r.try_get(2)?,
                    updated_us: r.try_get(3)?,
                })
            })
            .collect()
    }

    /// Checkpoint a broadcast member's positions.
    async fn save_positions(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        member: &str,
        positions: &[(i32, i64)],
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            SAVE_POSITIONS,
            POSITION_ROW,
            positions,
            MAX_LIST,
            |q, (p, o)| q.bind(group_id).bind(member.as_bytes()).bind(*p).bind(*o),
        )
        .await
    }

    /// The first offset of `partition` sequenced at or after `at_us` (microseconds since the
    /// epoch): its end when none is. Sequencing times never decrease within a partition, so
    /// this is a binary search by primary key over the retained offsets.
    async fn offset_for_time(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        partition: &PartitionRow,
        at_us: i64,
    ) -> Result<i64> {
        let (mut lo, mut hi) = (partition.low_offset, partition.next_offset);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let row = sqlx::query(self.st.get(OFFSET_TIME))
                .bind(topic_id)
                .bind(partition.partition)
                .bind(mid)
                .fetch_optional(&mut *conn)
                .await?;
            match row {
                Some(r) if r.try_get::<i64, _>(0)? >= at_us => hi = mid,
                Some(_) => lo = mid + 1,
                // Removed by retention meanwhile: everything below is gone too.
                None => lo = mid + 1,
            }
        }
        Ok(lo)
    }

    async fn delete_positions(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        member: Option<&str>,
    ) -> Result<u64> {
        let query = match member {
            Some(member) => sqlx::query(self.st.get(DELETE_MEMBER))
                .bind(group_id)
                .bind(member.as_bytes()),
            None => sqlx::query(self.st.get(DELETE_POSITIONS)).bind(group_id),
        };
        Ok(query.execute(&mut *conn).await?.rows_affected())
    }
}
