//! Reading the log without claiming it: broadcast members, queries, and broadcast positions.
//!
//! Plain reads by primary key range, on the reader connections. A read from offset N returns a
//! prefix of what is logged, never a set with holes: a partition's records become visible only
//! through commits of publishing transactions, which SQLite runs one at a time, each covering
//! a dense range after the previous one (`publish.rs`).

use std::collections::HashMap;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::groups::OFFSET_TIME;
use super::{SqliteStore, headers_at, id_at, insert_values, now_us, opt_text_at};
use crate::domain::{MessageId, Result, StreamRecord, time_from_micros};
use crate::store::Stream;
use crate::store::rows::{PartitionRow, PositionRow};

macro_rules! record_columns {
    () => {
        "SELECT partition_no, msg_offset, id, msg_key, headers, body, published_at, \
         sequenced_at FROM {p}topic_log "
    };
}
pub(crate) const READ_FROM: &str = concat!(
    record_columns!(),
    "WHERE topic_id = ? AND partition_no = ? AND msg_offset >= ? ORDER BY msg_offset LIMIT ?"
);
const RECORD_BY_ID: &str = concat!(record_columns!(), "WHERE id = ? AND topic_id = ?");
const RECORDS_BY_KEY: &str = concat!(
    record_columns!(),
    "WHERE topic_id = ? AND msg_key = ? ORDER BY partition_no, msg_offset LIMIT ?"
);
const POSITIONS: &str = "SELECT partition_no, next_offset FROM {p}group_positions \
    WHERE group_id = ? AND member = ?";
const ALL_POSITIONS: &str = "SELECT member, partition_no, next_offset, updated_at \
    FROM {p}group_positions WHERE group_id = ? ORDER BY member, partition_no";
const SAVE_POSITIONS: &str = "INSERT INTO {p}group_positions \
    (group_id, member, partition_no, next_offset, updated_at) VALUES {list} \
    ON CONFLICT (group_id, member, partition_no) DO UPDATE SET \
    next_offset = excluded.next_offset, updated_at = excluded.updated_at";
const POSITION_ROW: &str = concat!("(?,?,?,?,", now_us!(), ")");
const DELETE_POSITIONS: &str = "DELETE FROM {p}group_positions WHERE group_id = ?";
const DELETE_MEMBER: &str = "DELETE FROM {p}group_positions WHERE group_id = ? AND member = ?";

fn decode_record(row: &SqliteRow) -> Result<StreamRecord> {
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

impl Stream<Sqlite> for SqliteStore {
    /// Up to `limit` records of one partition from `offset` on, in offset order.
    async fn read_from(
        &self,
        conn: &mut SqliteConnection,
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

    /// A logged record of `topic_id` by id.
    async fn record_by_id(
        &self,
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
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

    /// The first offset of `partition` sequenced at or after `at_us` (microseconds since the
    /// epoch): its end when none is. Sequencing times never decrease within a partition
    /// (`publish.rs`), so this is a binary search by primary key over the retained offsets.
    async fn offset_for_time(
        &self,
        conn: &mut SqliteConnection,
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

    /// A broadcast member's checkpointed positions.
    async fn positions(
        &self,
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
        group_id: i32,
        member: &str,
        positions: &[(i32, i64)],
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            SAVE_POSITIONS,
            POSITION_ROW,
            4,
            positions,
            |q, (p, o)| q.bind(group_id).bind(member.as_bytes()).bind(*p).bind(*o),
        )
        .await
    }

    async fn delete_positions(
        &self,
        conn: &mut SqliteConnection,
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
