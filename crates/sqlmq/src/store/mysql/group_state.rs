//! Where a group stands: per-partition counts for lag, and one record's state for trace.

use sqlx::{MySqlConnection, Row};

use super::group_settle::HELD_TOO_LONG;
use super::group_settle::OWNER_GROUPS;
use super::group_settle::{STATE_ACKED, STATE_DEAD, STATE_RETRYING};
use super::id_at;
use super::{MySqlStore, micros, opt_text_at};
use crate::domain::MessageId;
use crate::domain::Receipt;
use crate::domain::Result;
use crate::domain::parse_events;
use crate::store::GroupState;
use crate::store::rows::HeldTooLong;
use crate::store::rows::PartitionCounts;
use crate::store::rows::RecordRows;
use crate::store::rows::{GroupTable, HistoryState};
use sqlx::MySql;
use std::time::Duration;

pub(crate) const LEASES_BY_PARTITION: &str = "SELECT partition_no, COUNT(*), MIN(msg_offset) \
    FROM {p}group_leases FORCE INDEX (part) WHERE group_id = ? GROUP BY partition_no";
pub(crate) const RETRIES_BY_PARTITION: &str = "SELECT partition_no, COUNT(*), MIN(msg_offset) \
    FROM {p}group_retries FORCE INDEX (part) WHERE group_id = ? GROUP BY partition_no";
pub(crate) const DEAD_BY_PARTITION: &str = "SELECT partition_no, COUNT(*), MIN(msg_offset) \
    FROM {p}group_dead FORCE INDEX (PRIMARY) WHERE group_id = ? GROUP BY partition_no";
pub(crate) const PUBLISHED_AT: &str = concat!(
    "SELECT ",
    micros!("published_at"),
    ", ",
    micros!("UTC_TIMESTAMP(6)"),
    " FROM {p}topic_log FORCE INDEX (PRIMARY) WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?"
);
pub(crate) const LEASE_OF: &str = concat!(
    "SELECT token, attempts, owner, ",
    micros!("claimed_at"),
    ", ",
    micros!("lease_until"),
    " FROM {p}group_leases FORCE INDEX (PRIMARY) WHERE group_id = ? AND id = ?"
);
pub(crate) const RETRY_OF: &str = concat!(
    "SELECT attempts, ",
    micros!("run_at"),
    " FROM {p}group_retries FORCE INDEX (PRIMARY) WHERE group_id = ? AND id = ?"
);
pub(crate) const DEAD_OF: &str = concat!(
    "SELECT attempts, ",
    micros!("died_at"),
    " FROM {p}group_dead FORCE INDEX (PRIMARY) WHERE group_id = ? AND id = ?"
);
pub(crate) const HISTORY_OF: &str = concat!(
    "SELECT state, attempts, events, ",
    micros!("settled_at"),
    " FROM {p}group_history FORCE INDEX (PRIMARY) ",
    "WHERE group_id = ? AND partition_no = ? AND msg_offset = ?"
);

impl GroupState<MySql> for MySqlStore {
    async fn by_partition(
        &self,
        conn: &mut MySqlConnection,
        table: GroupTable,
        group_id: i32,
    ) -> Result<PartitionCounts> {
        let statement = match table {
            GroupTable::Leases => LEASES_BY_PARTITION,
            GroupTable::Retries => RETRIES_BY_PARTITION,
            GroupTable::Dead => DEAD_BY_PARTITION,
        };
        let rows = sqlx::query(self.st.get(statement))
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?))))
            .collect()
    }

    /// Microseconds since a record was published, if it is still retained.
    async fn age_of(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>> {
        let row = sqlx::query(self.st.get(PUBLISHED_AT))
            .bind(topic_id)
            .bind(partition)
            .bind(offset)
            .fetch_optional(&mut *conn)
            .await?;
        row.map(|r| Ok(r.try_get::<i64, _>(1)? - r.try_get::<i64, _>(0)?))
            .transpose()
    }

    /// One record's rows in a cluster group.
    async fn record_rows(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        id: MessageId,
        (partition, offset): (i32, i64),
    ) -> Result<RecordRows> {
        let mut out = RecordRows::default();
        if let Some(r) = sqlx::query(self.st.get(LEASE_OF))
            .bind(group_id)
            .bind(id.bytes())
            .fetch_optional(&mut *conn)
            .await?
        {
            out.lease = Some((
                r.try_get(0)?,
                r.try_get(1)?,
                opt_text_at(&r, 2)?,
                r.try_get(3)?,
                r.try_get(4)?,
            ));
        }
        for (sql, slot) in [(RETRY_OF, &mut out.retry), (DEAD_OF, &mut out.dead)] {
            if let Some(r) = sqlx::query(self.st.get(sql))
                .bind(group_id)
                .bind(id.bytes())
                .fetch_optional(&mut *conn)
                .await?
            {
                *slot = Some((r.try_get(0)?, r.try_get(1)?));
            }
        }
        if let Some(r) = sqlx::query(self.st.get(HISTORY_OF))
            .bind(group_id)
            .bind(partition)
            .bind(offset)
            .fetch_optional(&mut *conn)
            .await?
        {
            let state = match r.try_get::<i8, _>(0)? {
                STATE_RETRYING => HistoryState::Retrying,
                STATE_ACKED => HistoryState::Acked,
                STATE_DEAD => HistoryState::Dead,
                _ => HistoryState::Other,
            };
            let events: Vec<u8> = r.try_get(2)?;
            out.history = Some((state, r.try_get(1)?, parse_events(&events), r.try_get(3)?));
        }
        Ok(out)
    }

    /// The group's leases held longer than `limit`: (receipt, partition, offset, owner, held).
    async fn held_too_long(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        limit: Duration,
    ) -> Result<Vec<HeldTooLong>> {
        let rows = sqlx::query(self.st.get(HELD_TOO_LONG))
            .bind(group_id)
            .bind(limit.as_micros().min(i64::MAX as u128) as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(HeldTooLong {
                    receipt: Receipt {
                        id: id_at(r, 0)?,
                        token: r.try_get::<i64, _>(3)? as u64,
                    },
                    partition: r.try_get(1)?,
                    offset: r.try_get(2)?,
                    owner: opt_text_at(r, 4)?,
                    held: Duration::from_micros(r.try_get::<i64, _>(5)?.max(0) as u64),
                })
            })
            .collect()
    }

    /// The groups in which `owner` holds leases.
    async fn groups_of_owner(&self, conn: &mut MySqlConnection, owner: &str) -> Result<Vec<i32>> {
        let rows = sqlx::query(self.st.get(OWNER_GROUPS))
            .bind(owner.as_bytes())
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }
}
