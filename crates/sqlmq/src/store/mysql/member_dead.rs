//! Broadcast members' dead letters.

use sqlx::{MySql, MySqlConnection, Row};

use super::{MySqlStore, headers_at, id_at, micros, opt_text_at};
use crate::domain::{DeadLetter, MessageId, Result, parse_errors, time_from_micros};
use crate::store::MemberDead;
use crate::store::rows::{MemberDeadRow, MemberDeath};
use crate::store::statements::{MAX_LIST, bucket, padded};

const INSERT: &str = "INSERT INTO {p}member_dead (group_id, member, id, partition_no, msg_offset, \
    attempts, died_at, errors) VALUES (?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?) \
    ON DUPLICATE KEY UPDATE attempts = VALUES(attempts), died_at = VALUES(died_at), \
    errors = VALUES(errors)";
/// `(? IS NULL OR member = ?)`: one member's rows, or (NULL) every member's; an admin
/// statement, for which the group's prefix of the index is enough.
const LIST: &str = concat!(
    "SELECT d.id, d.partition_no, d.msg_offset, d.attempts, ",
    micros!("d.died_at"),
    ", l.msg_key, l.headers, l.body, ",
    micros!("l.published_at"),
    ", d.errors, d.member FROM {p}member_dead d FORCE INDEX (died) ",
    "LEFT JOIN {p}topic_log l FORCE INDEX (PRIMARY) ON l.topic_id = ? ",
    "AND l.partition_no = d.partition_no AND l.msg_offset = d.msg_offset ",
    "WHERE d.group_id = ? AND (? IS NULL OR d.member = ?) ORDER BY d.died_at, d.member, d.id LIMIT ?"
);
const DELETE_ALL: &str =
    "DELETE FROM {p}member_dead WHERE group_id = ? AND (? IS NULL OR member = ?)";
const DELETE_IDS: &str = "DELETE FROM {p}member_dead WHERE group_id = ? \
    AND (? IS NULL OR member = ?) AND id IN ({list})";
const DEATHS: &str = concat!(
    "SELECT member, attempts, ",
    micros!("died_at"),
    " FROM {p}member_dead FORCE INDEX (record) WHERE group_id = ? AND id = ? ORDER BY member"
);

impl MemberDead<MySql> for MySqlStore {
    async fn insert_member_dead(
        &self,
        conn: &mut MySqlConnection,
        row: &MemberDeadRow<'_>,
    ) -> Result<()> {
        sqlx::query(self.st.get(INSERT))
            .bind(row.group_id)
            .bind(row.member.as_bytes())
            .bind(row.id.bytes())
            .bind(row.partition)
            .bind(row.offset)
            .bind(row.attempts)
            .bind(row.errors)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn member_dead_letters(
        &self,
        conn: &mut MySqlConnection,
        topic_id: i32,
        group_id: i32,
        member: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let member = member.map(str::as_bytes);
        let rows = sqlx::query(self.st.get(LIST))
            .bind(topic_id)
            .bind(group_id)
            .bind(member)
            .bind(member)
            .bind(limit as i64)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                let died_us: i64 = r.try_get(4)?;
                let errors: Vec<u8> = r.try_get(9)?;
                Ok(DeadLetter {
                    id: id_at(r, 0)?,
                    attempts: r.try_get::<i32, _>(3)?.max(0) as u32,
                    died_at: time_from_micros(died_us),
                    enqueued_at: time_from_micros(
                        r.try_get::<Option<i64>, _>(8)?.unwrap_or(died_us),
                    ),
                    errors: parse_errors(Some(&String::from_utf8_lossy(&errors))),
                    ordering_key: opt_text_at(r, 5)?,
                    headers: headers_at(r, 6)?,
                    body: r.try_get::<Option<Vec<u8>>, _>(7)?.unwrap_or_default(),
                    partition: Some(r.try_get::<i32, _>(1)? as u32),
                    offset: Some(r.try_get(2)?),
                    member: opt_text_at(r, 10)?,
                })
            })
            .collect()
    }

    async fn delete_member_dead(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        member: Option<&str>,
        ids: Option<&[MessageId]>,
    ) -> Result<u64> {
        let member = member.map(str::as_bytes);
        let Some(ids) = ids else {
            let q = sqlx::query(self.st.get(DELETE_ALL))
                .bind(group_id)
                .bind(member)
                .bind(member);
            return Ok(q.execute(&mut *conn).await?.rows_affected());
        };
        let mut deleted = 0;
        for chunk in ids.chunks(MAX_LIST) {
            let mut q = sqlx::query(self.st.list(DELETE_IDS, "?", bucket(chunk.len())))
                .bind(group_id)
                .bind(member)
                .bind(member);
            for id in padded(chunk) {
                q = q.bind(id.bytes());
            }
            deleted += q.execute(&mut *conn).await?.rows_affected();
        }
        Ok(deleted)
    }

    async fn member_deaths(
        &self,
        conn: &mut MySqlConnection,
        group_id: i32,
        id: MessageId,
    ) -> Result<Vec<MemberDeath>> {
        let rows = sqlx::query(self.st.get(DEATHS))
            .bind(group_id)
            .bind(id.bytes())
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(MemberDeath {
                    member: opt_text_at(r, 0)?.unwrap_or_default(),
                    attempts: r.try_get(1)?,
                    died_us: r.try_get(2)?,
                })
            })
            .collect()
    }
}
