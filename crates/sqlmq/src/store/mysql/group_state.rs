//! Where a group stands: per-partition counts for lag, and one record's state for trace.

use std::collections::HashMap;

use sqlx::{MySqlConnection, Row};

use super::{MySqlStore, micros, opt_text_at};
use crate::domain::MessageId;
use crate::domain::Result;

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

/// Count and smallest offset per partition of one of a group's tables.
pub(crate) type PartitionCounts = HashMap<i32, (i64, i64)>;

/// A record's rows in one cluster group.
#[derive(Debug, Default)]
pub(crate) struct RecordRows {
    /// token, attempts, owner, claimed_us, lease_until_us
    pub lease: Option<(i64, i32, Option<String>, i64, i64)>,
    /// attempts, run_at_us
    pub retry: Option<(i32, i64)>,
    /// attempts, died_us
    pub dead: Option<(i32, i64)>,
    /// state, attempts, events, settled_us
    pub history: Option<(i8, i32, Vec<u8>, i64)>,
}

impl MySqlStore {
    /// Count and smallest offset per partition of the group's leases, retries or dead letters
    /// (`which`: one of the `*_BY_PARTITION` statements).
    pub(crate) async fn by_partition(
        &self,
        conn: &mut MySqlConnection,
        which: &'static str,
        group_id: i32,
    ) -> Result<PartitionCounts> {
        let rows = sqlx::query(self.st.get(which))
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?))))
            .collect()
    }

    /// Microseconds since a record was published, if it is still retained.
    pub(crate) async fn age_of(
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
    pub(crate) async fn record_rows(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        id: MessageId,
        partition: i32,
        offset: i64,
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
            out.history = Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?));
        }
        Ok(out)
    }
}
