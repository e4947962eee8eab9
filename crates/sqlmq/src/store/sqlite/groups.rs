//! Consumer group rows, their cursors, and finding offsets by time.

use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite, SqliteConnection};

use super::{SqliteStore, insert_values, now_us};
use crate::domain::{Backoff, Error, GroupConfig, GroupMode, Result};
use crate::store::Groups;
use crate::store::rows::GroupRow;

const INSERT_GROUP: &str = concat!(
    "INSERT OR IGNORE INTO {p}consumer_groups ",
    "(topic_id, name, mode, max_attempts, backoff, consume_timeout_ms, created_at) ",
    "VALUES (?, ?, ?, ?, ?, ?, ",
    now_us!(),
    ")"
);
const UPDATE_GROUP: &str = "UPDATE {p}consumer_groups SET max_attempts = ?, backoff = ?, \
    consume_timeout_ms = ? WHERE topic_id = ? AND name = ?";
const GROUP_BY_NAME: &str = "SELECT id, topic_id, name, mode, max_attempts, backoff, \
    consume_timeout_ms FROM {p}consumer_groups WHERE topic_id = ? AND name = ?";
const GROUP_BY_ID: &str = "SELECT id, topic_id, name, mode, max_attempts, backoff, \
    consume_timeout_ms FROM {p}consumer_groups WHERE id = ?";
const GROUPS_OF_TOPIC: &str = "SELECT id, topic_id, name, mode, max_attempts, backoff, \
    consume_timeout_ms FROM {p}consumer_groups WHERE topic_id = ? ORDER BY name";
/// Set cursors (creating or moving them). `high_offset` remembers the furthest a cursor ever
/// went: below it, offsets may have been handed out before (after a reset back), which the
/// claim then checks for. (The `SET` expressions read the row's old values.)
const SET_CURSORS: &str = "INSERT INTO {p}group_cursors \
    (group_id, partition_no, next_offset, high_offset) VALUES {list} \
    ON CONFLICT (group_id, partition_no) DO UPDATE SET next_offset = excluded.next_offset, \
    high_offset = max(high_offset, excluded.next_offset)";
const CURSOR_ROW: &str = "(?,?,?,?)";
/// Cursors for partitions added after the groups were created: from offset 0, so that a group
/// gets every record of a new partition.
const ADD_CURSORS: &str = "INSERT OR IGNORE INTO {p}group_cursors \
    (group_id, partition_no, next_offset, high_offset) \
    SELECT g.id, tp.partition_no, 0, 0 FROM {p}consumer_groups g \
    JOIN {p}topic_partitions tp ON tp.topic_id = g.topic_id WHERE g.topic_id = ?";
/// Deleting a group: its rows, table by table in chunks of at most 1000 (keys from a limited
/// subquery: SQLite has no `DELETE … LIMIT`), then the group row.
const DELETE_GROUP: [&str; 8] = [
    "DELETE FROM {p}member_dead WHERE group_id = ?1 AND (member, id) IN \
     (SELECT member, id FROM {p}member_dead WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}group_leases WHERE group_id = ?1 AND id IN \
     (SELECT id FROM {p}group_leases WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}group_retries WHERE group_id = ?1 AND id IN \
     (SELECT id FROM {p}group_retries WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}group_dead WHERE group_id = ?1 AND id IN \
     (SELECT id FROM {p}group_dead WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}group_history WHERE group_id = ?1 AND (partition_no, msg_offset) IN \
     (SELECT partition_no, msg_offset FROM {p}group_history WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}group_positions WHERE group_id = ?1 AND (member, partition_no) IN \
     (SELECT member, partition_no FROM {p}group_positions WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}group_cursors WHERE group_id = ?1 AND partition_no IN \
     (SELECT partition_no FROM {p}group_cursors WHERE group_id = ?1 LIMIT 1000)",
    "DELETE FROM {p}consumer_groups WHERE id = ?1",
];
const CURSORS: &str = "SELECT partition_no, next_offset FROM {p}group_cursors \
    WHERE group_id = ? ORDER BY partition_no";
/// When one record was sequenced (offsets by time).
pub(crate) const OFFSET_TIME: &str = "SELECT sequenced_at FROM {p}topic_log \
    WHERE topic_id = ? AND partition_no = ? AND msg_offset = ?";

fn decode(row: &SqliteRow) -> Result<GroupRow> {
    let backoff: String = row.try_get(5)?;
    Ok(GroupRow {
        id: row.try_get(0)?,
        topic_id: row.try_get(1)?,
        name: row.try_get(2)?,
        config: GroupConfig {
            mode: if row.try_get::<i64, _>(3)? == 1 {
                GroupMode::Broadcast
            } else {
                GroupMode::Cluster
            },
            max_attempts: row.try_get::<i32, _>(4)?.max(1) as u32,
            backoff: serde_json::from_str::<Backoff>(&backoff)
                .map_err(|e| Error::Corrupt(format!("group backoff {backoff:?}: {e}")))?,
            consume_timeout: row
                .try_get::<Option<i64>, _>(6)?
                .map(|ms| Duration::from_millis(ms.max(0) as u64)),
        },
    })
}

impl Groups<Sqlite> for SqliteStore {
    async fn create_group(
        &self,
        conn: &mut SqliteConnection,
        topic_id: i32,
        name: &str,
        config: &GroupConfig,
    ) -> Result<(GroupRow, bool)> {
        let backoff = serde_json::to_string(&config.backoff)?;
        let timeout = config.consume_timeout.map(|d| d.as_millis() as i64);
        let created = sqlx::query(self.st.get(INSERT_GROUP))
            .bind(topic_id)
            .bind(name)
            .bind(matches!(config.mode, GroupMode::Broadcast) as i32)
            .bind(config.max_attempts as i32)
            .bind(&backoff)
            .bind(timeout)
            .execute(&mut *conn)
            .await?
            .rows_affected()
            == 1;
        if !created {
            sqlx::query(self.st.get(UPDATE_GROUP))
                .bind(config.max_attempts as i32)
                .bind(&backoff)
                .bind(timeout)
                .bind(topic_id)
                .bind(name)
                .execute(&mut *conn)
                .await?;
        }
        let group = self
            .group_by_name(conn, topic_id, name)
            .await?
            .ok_or_else(|| Error::Corrupt(format!("group {name} vanished")))?;
        Ok((group, created))
    }

    async fn group_by_name(
        &self,
        conn: &mut SqliteConnection,
        topic_id: i32,
        name: &str,
    ) -> Result<Option<GroupRow>> {
        let row = sqlx::query(self.st.get(GROUP_BY_NAME))
            .bind(topic_id)
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn group_by_id(&self, conn: &mut SqliteConnection, id: i32) -> Result<Option<GroupRow>> {
        let row = sqlx::query(self.st.get(GROUP_BY_ID))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn groups_of_topic(
        &self,
        conn: &mut SqliteConnection,
        topic_id: i32,
    ) -> Result<Vec<GroupRow>> {
        let rows = sqlx::query(self.st.get(GROUPS_OF_TOPIC))
            .bind(topic_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter().map(decode).collect()
    }

    /// The group's cursor of every partition that has one.
    async fn cursors(&self, conn: &mut SqliteConnection, group_id: i32) -> Result<Vec<(i32, i64)>> {
        let rows = sqlx::query(self.st.get(CURSORS))
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }

    /// Move (or create) cursors: `(partition, next offset)`; `high_offset` keeps the furthest.
    async fn set_cursors(
        &self,
        conn: &mut SqliteConnection,
        group_id: i32,
        targets: &[(i32, i64)],
    ) -> Result<()> {
        insert_values(
            &self.st,
            conn,
            SET_CURSORS,
            CURSOR_ROW,
            4,
            targets,
            |q, (p, o)| q.bind(group_id).bind(*p).bind(*o).bind(*o),
        )
        .await
    }

    async fn delete_group_chunk(&self, conn: &mut SqliteConnection, group_id: i32) -> Result<u64> {
        self.delete_chunk(conn, &DELETE_GROUP, group_id).await
    }
}

impl SqliteStore {
    /// Cursors at 0 for the partitions of `topic_id` that its groups have none for.
    pub(crate) async fn add_cursors(
        &self,
        conn: &mut SqliteConnection,
        topic_id: i32,
    ) -> Result<()> {
        sqlx::query(self.st.get(ADD_CURSORS))
            .bind(topic_id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
