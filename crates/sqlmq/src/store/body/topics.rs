//! Topic rows and their partitions' counters.
//!
//! A topic row carries its configuration and each partition a counter row
//! (`topic_partitions`: the next offset, the first retained one, the bytes retained), advanced
//! where the backend gives offsets (MySQL's sequencer, SQLite's publishing transaction).
//! Deleting a topic is a series of steps, one table each, every step deleting at most a
//! thousand rows; the engine (`topic/manage.rs`) runs the steps in order and stops at the
//! first that still finds rows, each chunk in a transaction of its own.

use std::time::Duration;

use super::{Columns, SqlStore, Statement};
use crate::domain::{Error, Result, TopicConfig, millis_of};
use crate::store::Backend;
use crate::store::rows::{PartitionRow, TopicRow};

/// The topic statements whose texts differ by backend.
pub struct TopicSql {
    /// Create a topic or update its configuration, partitions only growing: `name,
    /// partitions, retention (ms, NULL for none), retention bytes (NULL for none), keeps
    /// unconsumed (0/1), strict order (0/1)`.
    pub upsert: &'static str,
    /// Insert the partition rows that do not exist yet: `{list}` of `partition_row`.
    pub add_partitions: &'static str,
    /// One row of `add_partitions`: `topic id, partition`.
    pub partition_row: &'static str,
    /// The steps of deleting a topic (its groups are deleted before), in order: each deletes
    /// at most a thousand of the topic's rows of one table, the last the topic row. Each
    /// binds the topic id (once).
    pub delete: &'static [&'static str],
}

/// Columns of a topic row: `id, name, partitions, retention (ms), retention bytes, keeps
/// unconsumed, strict order`.
macro_rules! topic_columns {
    () => {
        "SELECT id, name, partitions, retention_ms, retention_bytes, \
         retention_keeps_unconsumed, strict_order FROM {p}topics "
    };
}

/// A topic by name: name. Returns the topic columns.
const BY_NAME: &str = concat!(topic_columns!(), "WHERE name = ?");
/// A topic by id: id. Returns the topic columns.
const BY_ID: &str = concat!(topic_columns!(), "WHERE id = ?");
/// Every topic, by name. Returns the topic columns.
const ALL: &str = concat!(topic_columns!(), "ORDER BY name");
/// A topic's partitions: topic id. Returns `partition, next offset, low offset, bytes`.
const PARTITIONS: &str = "SELECT partition_no, next_offset, low_offset, bytes \
    FROM {p}topic_partitions WHERE topic_id = ? ORDER BY partition_no";

fn decode<B: Backend>(row: &B::Row) -> Result<TopicRow> {
    let ms = |v: Option<i64>| v.map(|ms| Duration::from_millis(ms.max(0) as u64));
    Ok(TopicRow {
        id: row.col(0)?,
        name: row.col(1)?,
        config: TopicConfig {
            partitions: row.col::<i32>(2)?.max(1) as u32,
            retention: ms(row.col(3)?),
            retention_bytes: row.col::<Option<i64>>(4)?.map(|b| b.max(0) as u64),
            retention_keeps_unconsumed: row.col::<i64>(5)? != 0,
            strict_order: row.col::<i64>(6)? != 0,
        },
    })
}

/// Topic rows and their partitions' counters. Names are compared by the backend's rules, as
/// queue names are (`SqlStore`).
impl<B: Backend> SqlStore<B> {
    /// Create the topic, or update its configuration (partitions only grow); then the
    /// partitions and its groups' cursors that do not exist yet.
    pub(crate) async fn upsert_topic(
        &self,
        conn: &mut B::Connection,
        name: &str,
        config: &TopicConfig,
    ) -> Result<TopicRow> {
        self.query(B::TOPICS.upsert)
            .arg(name)
            .arg(config.partitions as i32)
            .arg(config.retention.map(millis_of))
            .arg(config.retention_bytes.map(|b| b as i64))
            .arg(config.retention_keeps_unconsumed as i32)
            .arg(config.strict_order as i32)
            .run(conn)
            .await?;
        let row = self
            .topic_by_name(conn, name)
            .await?
            .ok_or_else(|| Error::UnknownTopic(name.to_owned()))?;
        let parts: Vec<i32> = (0..row.config.partitions as i32).collect();
        self.insert_values(
            conn,
            B::TOPICS.add_partitions,
            B::TOPICS.partition_row,
            2,
            &parts,
            |q, p| q.arg(row.id).arg(*p),
        )
        .await?;
        self.add_cursors(conn, row.id).await?;
        Ok(row)
    }

    pub(crate) async fn topic_by_name(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> Result<Option<TopicRow>> {
        let row = self.query(BY_NAME).arg(name).first(conn).await?;
        row.as_ref().map(decode::<B>).transpose()
    }

    pub(crate) async fn topic_by_id(
        &self,
        conn: &mut B::Connection,
        id: i32,
    ) -> Result<Option<TopicRow>> {
        let row = self.query(BY_ID).arg(id).first(conn).await?;
        row.as_ref().map(decode::<B>).transpose()
    }

    /// Every topic, by name.
    pub(crate) async fn all_topics(&self, conn: &mut B::Connection) -> Result<Vec<TopicRow>> {
        let rows = self.query(ALL).rows(conn).await?;
        rows.iter().map(decode::<B>).collect()
    }

    /// The counters of every partition of the topic.
    pub(crate) async fn partitions(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
    ) -> Result<Vec<PartitionRow>> {
        let rows = self.query(PARTITIONS).arg(topic_id).rows(conn).await?;
        rows.iter()
            .map(|r| {
                Ok(PartitionRow {
                    partition: r.col(0)?,
                    next_offset: r.col(1)?,
                    low_offset: r.col(2)?,
                    bytes: r.col(3)?,
                })
            })
            .collect()
    }

    /// Step `step` (from 0) of deleting the topic (its groups are deleted first): delete up to
    /// about a thousand of its rows of one table (records, pending records, partitions), or,
    /// at the last step, the topic row. Returns rows deleted; `None` past the last step.
    pub(crate) async fn delete_topic_rows(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        step: usize,
    ) -> Result<Option<u64>> {
        self.delete_step(conn, B::TOPICS.delete, step, topic_id)
            .await
    }
}

impl<B: Backend> SqlStore<B> {
    /// Step `step` of a deletion (`steps`, each binding the id once): the rows it deleted;
    /// `None` past the last step.
    pub(crate) async fn delete_step(
        &self,
        conn: &mut B::Connection,
        steps: &'static [&'static str],
        step: usize,
        id: i32,
    ) -> Result<Option<u64>> {
        let Some(statement) = steps.get(step) else {
            return Ok(None);
        };
        Ok(Some(self.query(statement).arg(id).run(conn).await?))
    }
}
