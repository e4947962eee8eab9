//! Topic rows and their partitions.
//!
//! As on MySQL, a topic row carries its configuration and each partition a counter row
//! (`topic_partitions`: the next offset, the first retained one, the bytes retained). Here the
//! counter is advanced by the publishing transaction itself (`publish.rs`).

use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, insert_values, now_us};
use crate::domain::{Error, Result, TopicConfig};
use crate::store::Topics;
use crate::store::rows::{PartitionRow, TopicRow};

const UPSERT: &str = concat!(
    "INSERT INTO {p}topics (name, partitions, retention_ms, retention_bytes, ",
    "retention_keeps_unconsumed, strict_order, created_at, updated_at) ",
    "VALUES (?, ?, ?, ?, ?, ?, ",
    now_us!(),
    ", ",
    now_us!(),
    ") ON CONFLICT (name) DO UPDATE SET partitions = max(partitions, excluded.partitions), ",
    "retention_ms = excluded.retention_ms, retention_bytes = excluded.retention_bytes, ",
    "retention_keeps_unconsumed = excluded.retention_keeps_unconsumed, ",
    "strict_order = excluded.strict_order, updated_at = excluded.updated_at"
);
const BY_NAME: &str = "SELECT id, name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order FROM {p}topics WHERE name = ?";
const BY_ID: &str = "SELECT id, name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order FROM {p}topics WHERE id = ?";
const ALL: &str = "SELECT id, name, partitions, retention_ms, retention_bytes, \
    retention_keeps_unconsumed, strict_order FROM {p}topics ORDER BY name";
/// Partition rows for partitions 0..n that do not exist yet (partitions only ever grow).
const ADD_PARTITIONS: &str = "INSERT OR IGNORE INTO {p}topic_partitions \
    (topic_id, partition_no, next_offset, low_offset, bytes, last_at) VALUES {list}";
const PARTITION_ROW: &str = concat!("(?, ?, 0, 0, 0, ", now_us!(), ")");
const PARTITIONS: &str = "SELECT partition_no, next_offset, low_offset, bytes \
    FROM {p}topic_partitions WHERE topic_id = ? ORDER BY partition_no";

/// Deleting a topic (its groups first): its rows, table by table in primary-key order in chunks
/// of at most 1000 (SQLite has no `DELETE … LIMIT`: the keys come from a limited subquery),
/// then the topic row.
const DELETE_TOPIC: [&str; 3] = [
    "DELETE FROM {p}topic_log WHERE topic_id = ?1 AND (partition_no, msg_offset) IN \
     (SELECT partition_no, msg_offset FROM {p}topic_log WHERE topic_id = ?1 \
     ORDER BY partition_no, msg_offset LIMIT 1000)",
    "DELETE FROM {p}topic_partitions WHERE topic_id = ?1 AND partition_no IN \
     (SELECT partition_no FROM {p}topic_partitions WHERE topic_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}topics WHERE id = ?1",
];

fn decode(row: &SqliteRow) -> Result<TopicRow> {
    let ms = |v: Option<i64>| v.map(|ms| Duration::from_millis(ms.max(0) as u64));
    Ok(TopicRow {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        config: TopicConfig {
            partitions: row.try_get::<i32, _>(2)?.max(1) as u32,
            retention: ms(row.try_get(3)?),
            retention_bytes: row.try_get::<Option<i64>, _>(4)?.map(|b| b.max(0) as u64),
            retention_keeps_unconsumed: row.try_get::<i64, _>(5)? != 0,
            strict_order: row.try_get::<i64, _>(6)? != 0,
        },
    })
}

impl Topics<Sqlite> for SqliteStore {
    /// Create the topic, or update its configuration (partitions only grow); then the
    /// partitions and its groups' cursors that do not exist yet.
    async fn upsert_topic(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
        config: &TopicConfig,
    ) -> Result<TopicRow> {
        sqlx::query(self.st.get(UPSERT))
            .bind(name)
            .bind(config.partitions as i32)
            .bind(config.retention.map(|d| d.as_millis() as i64))
            .bind(config.retention_bytes.map(|b| b as i64))
            .bind(config.retention_keeps_unconsumed as i32)
            .bind(config.strict_order as i32)
            .execute(&mut *conn)
            .await?;
        let row = self
            .topic_by_name(conn, name)
            .await?
            .ok_or_else(|| Error::UnknownTopic(name.to_owned()))?;
        let parts: Vec<i32> = (0..row.config.partitions as i32).collect();
        insert_values(
            &self.st,
            conn,
            ADD_PARTITIONS,
            PARTITION_ROW,
            2,
            &parts,
            |q, p| q.bind(row.id).bind(*p),
        )
        .await?;
        self.add_cursors(conn, row.id).await?;
        Ok(row)
    }

    async fn topic_by_name(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
    ) -> Result<Option<TopicRow>> {
        let row = sqlx::query(self.st.get(BY_NAME))
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn topic_by_id(&self, conn: &mut SqliteConnection, id: i32) -> Result<Option<TopicRow>> {
        let row = sqlx::query(self.st.get(BY_ID))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn all_topics(&self, conn: &mut SqliteConnection) -> Result<Vec<TopicRow>> {
        let rows = sqlx::query(self.st.get(ALL)).fetch_all(&mut *conn).await?;
        rows.iter().map(decode).collect()
    }

    async fn partitions(
        &self,
        conn: &mut SqliteConnection,
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

    /// Records, then partitions, then the topic row (there are no pending records: they are
    /// logged at publish).
    async fn delete_topic_chunk(&self, conn: &mut SqliteConnection, topic_id: i32) -> Result<u64> {
        self.delete_chunk(conn, &DELETE_TOPIC, topic_id).await
    }
}

impl SqliteStore {
    /// One chunk of a deletion: the first of `statements` (each with one parameter, `?1`, the
    /// id, used as often as needed) that still finds rows. Returns rows deleted; 0 when
    /// nothing is left.
    pub(crate) async fn delete_chunk(
        &self,
        conn: &mut SqliteConnection,
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
