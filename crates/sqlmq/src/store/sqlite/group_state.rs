//! Where a group stands: per-partition counts for lag, one record's state for trace, and the
//! leases held too long (consume timeouts). Plain reads, on the reader connections.

use std::time::Duration;

use sqlx::{Row, Sqlite, SqliteConnection};

use super::group_settle::{HELD_TOO_LONG, OWNER_GROUPS, STATE_ACKED, STATE_DEAD, STATE_RETRYING};
use super::{SqliteStore, id_at, now_us, opt_text_at};
use crate::domain::{MessageId, Receipt, Result, micros_of, parse_events};
use crate::store::GroupState;
use crate::store::rows::{GroupTable, HeldTooLong, HistoryState, PartitionCounts, RecordRows};

const LEASES_BY_PARTITION: &str = "SELECT partition_no, COUNT(*), MIN(msg_offset) \
    FROM {p}group_leases WHERE group_id = ? GROUP BY partition_no";
const RETRIES_BY_PARTITION: &str = "SELECT partition_no, COUNT(*), MIN(msg_offset) \
    FROM {p}group_retries WHERE group_id = ? GROUP BY partition_no";
const DEAD_BY_PARTITION: &str = "SELECT partition_no, COUNT(*), MIN(msg_offset) \
    FROM {p}group_dead WHERE group_id = ? GROUP BY partition_no";
const PUBLISHED_AT: &str = concat!(
    "SELECT published_at, ",
    now_us!(),
    " FROM {p}topic_log WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?"
);
const LEASE_OF: &str = "SELECT token, attempts, owner, claimed_at, lease_until \
    FROM {p}group_leases WHERE group_id = ? AND id = ?";
const RETRY_OF: &str =
    "SELECT attempts, run_at FROM {p}group_retries WHERE group_id = ? AND id = ?";
const DEAD_OF: &str = "SELECT attempts, died_at FROM {p}group_dead WHERE group_id = ? AND id = ?";
const HISTORY_OF: &str = "SELECT state, attempts, events, settled_at FROM {p}group_history \
    WHERE group_id = ? AND partition_no = ? AND msg_offset = ?";

impl GroupState<Sqlite> for SqliteStore {
    async fn by_partition(
        &self,
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
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
        conn: &mut SqliteConnection,
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
            let state = match r.try_get::<i64, _>(0)? {
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

    /// The group's leases held longer than `limit`.
    async fn held_too_long(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        limit: Duration,
    ) -> Result<Vec<HeldTooLong>> {
        let rows = sqlx::query(self.st.get(HELD_TOO_LONG))
            .bind(group_id)
            .bind(micros_of(limit))
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
    async fn groups_of_owner(&self, conn: &mut SqliteConnection, owner: &str) -> Result<Vec<i32>> {
        let rows = sqlx::query(self.st.get(OWNER_GROUPS))
            .bind(owner.as_bytes())
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
    }
}
