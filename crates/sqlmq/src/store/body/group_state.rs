//! Where a cluster group stands: per-partition counts for lag, one record's rows for trace, the
//! leases held too long (consume timeouts), and the groups a process holds leases in. Plain
//! reads.

use std::time::Duration;

use super::{Columns, SqlStore, Statement};
use crate::domain::{MessageId, Receipt, Result, micros_of, parse_events};
use crate::store::Backend;
use crate::store::rows::{GroupTable, HeldTooLong, HistoryState, PartitionCounts, RecordRows};

/// What lag, trace, consume-timeout alerts and liveness read. Times come back as microseconds
/// since the epoch; durations are bound as microseconds.
pub struct GroupStateSql {
    /// The group's leases per partition: group id → partition, count, smallest offset.
    pub leases_by_partition: &'static str,
    /// The group's waiting retries per partition: as `leases_by_partition`.
    pub retries_by_partition: &'static str,
    /// The group's dead letters per partition: as `leases_by_partition`.
    pub dead_by_partition: &'static str,
    /// A record's publishing time and the database clock: topic id, partition, offset →
    /// published (µs), now (µs).
    pub published_at: &'static str,
    /// A record's lease in the group: group id, id → token, attempts, owner, claimed (µs),
    /// lease end (µs).
    pub lease_of: &'static str,
    /// A record's waiting retry: group id, id → attempts, due (µs).
    pub retry_of: &'static str,
    /// A record's dead letter: group id, id → attempts, died (µs).
    pub dead_of: &'static str,
    /// A record's history row: group id, partition, offset → state, attempts, events,
    /// settled (µs).
    pub history_of: &'static str,
    /// The group's leases held longer than a duration: group id, duration (µs) → id,
    /// partition, offset, token, owner, held for (µs).
    pub held_too_long: &'static str,
}

/// `group_history.state`: waiting for a retry.
pub(crate) const STATE_RETRYING: i8 = 0;
/// `group_history.state`: acked.
pub(crate) const STATE_ACKED: i8 = 1;
/// `group_history.state`: dead-lettered.
pub(crate) const STATE_DEAD: i8 = 2;

/// Groups in which an owner holds leases (the in-flight rows of every group: small): owner →
/// group id.
const OWNER_GROUPS: &str = "SELECT DISTINCT group_id FROM {p}group_leases WHERE owner = ?";

/// What lag, trace, consume-timeout alerts and liveness read.
impl<B: Backend> SqlStore<B> {
    /// Count and smallest offset per partition of one of the group's tables.
    pub(crate) async fn by_partition(
        &self,
        conn: &mut B::Connection,
        table: GroupTable,
        group_id: i32,
    ) -> Result<PartitionCounts> {
        let sql = &B::GROUP_STATE;
        let statement = match table {
            GroupTable::Leases => sql.leases_by_partition,
            GroupTable::Retries => sql.retries_by_partition,
            GroupTable::Dead => sql.dead_by_partition,
        };
        let rows = self.query(statement).arg(group_id).rows(conn).await?;
        rows.iter()
            .map(|r| Ok((r.col(0)?, (r.col(1)?, r.col(2)?))))
            .collect()
    }

    /// Microseconds since a record was published, if it is still retained.
    pub(crate) async fn age_of(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>> {
        let row = self
            .query(B::GROUP_STATE.published_at)
            .arg(topic_id)
            .arg(partition)
            .arg(offset)
            .first(conn)
            .await?;
        row.map(|r| Ok(r.col::<i64>(1)? - r.col::<i64>(0)?))
            .transpose()
    }

    /// One record's rows in a cluster group.
    pub(crate) async fn record_rows(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        id: MessageId,
        (partition, offset): (i32, i64),
    ) -> Result<RecordRows> {
        let sql = &B::GROUP_STATE;
        let mut out = RecordRows::default();
        if let Some(r) = self
            .query(sql.lease_of)
            .arg(group_id)
            .arg(id.bytes())
            .first(conn)
            .await?
        {
            out.lease = Some((
                r.col(0)?,
                r.col(1)?,
                r.opt_text_at(2)?,
                r.col(3)?,
                r.col(4)?,
            ));
        }
        for (statement, slot) in [(sql.retry_of, &mut out.retry), (sql.dead_of, &mut out.dead)] {
            if let Some(r) = self
                .query(statement)
                .arg(group_id)
                .arg(id.bytes())
                .first(conn)
                .await?
            {
                *slot = Some((r.col(0)?, r.col(1)?));
            }
        }
        if let Some(r) = self
            .query(sql.history_of)
            .arg(group_id)
            .arg(partition)
            .arg(offset)
            .first(conn)
            .await?
        {
            let state = match i8::try_from(r.col::<i64>(0)?) {
                Ok(STATE_RETRYING) => HistoryState::Retrying,
                Ok(STATE_ACKED) => HistoryState::Acked,
                Ok(STATE_DEAD) => HistoryState::Dead,
                _ => HistoryState::Other,
            };
            let events: Vec<u8> = r.col(2)?;
            out.history = Some((state, r.col(1)?, parse_events(&events), r.col(3)?));
        }
        Ok(out)
    }

    /// The group's leases held longer than `limit`.
    pub(crate) async fn held_too_long(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        limit: Duration,
    ) -> Result<Vec<HeldTooLong>> {
        let rows = self
            .query(B::GROUP_STATE.held_too_long)
            .arg(group_id)
            .arg(micros_of(limit))
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(HeldTooLong {
                    receipt: Receipt {
                        id: r.id_at(0)?,
                        token: r.col::<i64>(3)? as u64,
                    },
                    partition: r.col(1)?,
                    offset: r.col(2)?,
                    owner: r.opt_text_at(4)?,
                    held: crate::domain::duration_from_micros(r.col(5)?),
                })
            })
            .collect()
    }

    /// The groups in which `owner` holds leases.
    pub(crate) async fn groups_of_owner(
        &self,
        conn: &mut B::Connection,
        owner: &str,
    ) -> Result<Vec<i32>> {
        let rows = self
            .query(OWNER_GROUPS)
            .arg(owner.as_bytes())
            .rows(conn)
            .await?;
        rows.iter().map(|r| r.col(0)).collect()
    }
}
