//! Topic rows and their partitions.

use std::time::Duration;

use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::MySqlStore;
use crate::domain::TopicConfig;
use crate::domain::{Error, Result};
use crate::store::Topics;
use crate::store::rows::PartitionRow;
use crate::store::rows::TopicRow;
use sqlx::MySql;

const UPSERT: &str = "INSERT INTO {p}topics (name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order, created_at, updated_at) \
    VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) \
    ON DUPLICATE KEY UPDATE partitions = GREATEST(partitions, VALUES(partitions)), \
    retention_ms = VALUES(retention_ms), retention_bytes = VALUES(retention_bytes), \
    retention_keeps_unconsumed = VALUES(retention_keeps_unconsumed), \
    strict_order = VALUES(strict_order), updated_at = VALUES(updated_at)";
pub(crate) const BY_NAME: &str = "SELECT id, name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order FROM {p}topics WHERE name = ?";
pub(crate) const BY_ID: &str = "SELECT id, name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order FROM {p}topics WHERE id = ?";
const ALL: &str = "SELECT id, name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order FROM {p}topics ORDER BY name";
/// Partition rows for partitions 0..n that do not exist yet (partitions only ever grow).
const ADD_PARTITIONS: &str = "INSERT IGNORE INTO {p}topic_partitions \
    (topic_id, partition_no, next_offset, low_offset, bytes, last_at) VALUES {list}";
const PARTITION_ROW: &str = "(?, ?, 0, 0, 0, UTC_TIMESTAMP(6))";
pub(crate) const PARTITIONS: &str = "SELECT partition_no, next_offset, low_offset, bytes \
    FROM {p}topic_partitions WHERE topic_id = ? ORDER BY partition_no";

/// Deleting a topic (its groups first): its rows, table by table in primary-key order in chunks
/// of at most 1000, then the topic row.
pub(crate) const DELETE_TOPIC: [&str; 4] = [
    "DELETE FROM {p}topic_log WHERE topic_id = ? ORDER BY topic_id, partition_no, msg_offset LIMIT 1000",
    "DELETE FROM {p}topic_pending WHERE topic_id = ? ORDER BY topic_id, partition_no, id LIMIT 1000",
    "DELETE FROM {p}topic_partitions WHERE topic_id = ? LIMIT 1000",
    "DELETE FROM {p}topics WHERE id = ?",
];

fn decode(row: &MySqlRow) -> Result<TopicRow> {
    let ms = |v: Option<i64>| v.map(|ms| Duration::from_millis(ms.max(0) as u64));
    Ok(TopicRow {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        config: TopicConfig {
            partitions: row.try_get::<i32, _>(2)?.max(1) as u32,
            retention: ms(row.try_get(3)?),
            retention_bytes: row.try_get::<Option<i64>, _>(4)?.map(|b| b.max(0) as u64),
            retention_keeps_unconsumed: row.try_get::<i8, _>(5)? != 0,
            strict_order: row.try_get::<i8, _>(6)? != 0,
        },
    })
}

impl Topics<MySql> for MySqlStore {
    /// Create the topic, or update its configuration (partitions only grow).
    async fn upsert_topic(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
        config: &TopicConfig,
    ) -> Result<TopicRow> {
        sqlx::query(self.st.get(UPSERT))
            .bind(name)
            .bind(config.partitions as i32)
            .bind(config.retention.map(|d| d.as_millis() as i64))
            .bind(config.retention_bytes.map(|b| b as i64))
            .bind(config.retention_keeps_unconsumed as i8)
            .bind(config.strict_order as i8)
            .execute(&mut *conn)
            .await?;
        let row = self
            .topic_by_name(conn, name)
            .await?
            .ok_or_else(|| Error::UnknownTopic(name.to_owned()))?;
        let parts: Vec<i32> = (0..row.config.partitions as i32).collect();
        super::insert_values(
            &self.st,
            conn,
            ADD_PARTITIONS,
            PARTITION_ROW,
            &parts,
            crate::store::statements::MAX_LIST,
            |q, p| q.bind(row.id).bind(*p),
        )
        .await?;
        self.add_cursors(conn, row.id).await?;
        Ok(row)
    }

    async fn delete_topic_chunk(&self, conn: &mut MySqlConnection, topic_id: i32) -> Result<u64> {
        self.delete_chunk(conn, &DELETE_TOPIC, topic_id).await
    }

    async fn topic_by_name(
        &self,
        conn: &mut MySqlConnection,
        name: &str,
    ) -> Result<Option<TopicRow>> {
        let row = sqlx::query(self.st.get(BY_NAME))
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn topic_by_id(&self, conn: &mut MySqlConnection, id: i32) -> Result<Option<TopicRow>> {
        let row = sqlx::query(self.st.get(BY_ID))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn all_topics(&self, conn: &mut MySqlConnection) -> Result<Vec<TopicRow>> {
        let rows = sqlx::query(self.st.get(ALL)).fetch_all(&mut *conn).await?;
        rows.iter().map(decode).collect()
    }

    async fn partitions(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
    ) -> Result<Vec<PartitionRow>> {
        let rows = sqlx::query(self.st.get(PARTITIONS))
            .bind(topic_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(PartitionRow {
                    partition: r.try_get(0)?,
                    next_offset: r.try_get(1)?,
                    low_offset: r.try_get(2)?,
                    bytes: r.try_get(3)?,
                })
            })
            .collect()
    }
}

impl MySqlStore {
    /// One chunk of a deletion: the first of `statements` (each with one parameter, the id,
    /// and a `LIMIT`) that still finds rows. Returns rows deleted; 0 when nothing is left.
    pub(crate) async fn delete_chunk(
        &self,
        conn: &mut MySqlConnection,
        statements: &[&'static str],
        id: i32,
    ) -> Result<u64> {
        for statement in statements {
            let deleted = sqlx::query(self.st.get(statement))
                .bind(id)
                .execute(&mut *conn)
                .await?
                .rows_affected();
            if deleted > 0 {
                return Ok(deleted);
            }
        }
        Ok(0)
    }
}
