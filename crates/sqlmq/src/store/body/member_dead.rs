//! Broadcast members' dead letters: each member of a broadcast group keeps its own, since
//! every member handles every record. A row per group, member and record; a repeat (after a
//! crash before the member's checkpoint) replaces the earlier one.

use super::{Columns, SqlStore, Statement};
use crate::domain::{DeadLetter, MessageId, Result, parse_errors, time_from_micros};
use crate::store::Backend;
use crate::store::rows::{MemberDeadRow, MemberDeath};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// The member dead letter statements whose texts differ by backend. `(? IS NULL OR member =
/// ?)` selects one member's rows, or (NULL) every member's.
pub struct MemberDeadSql {
    /// Record a member's dead letter, or replace it: `group id, member, id, partition,
    /// offset, attempts, errors`.
    pub insert: &'static str,
    /// The oldest member dead letters with their records (an admin statement, for which the
    /// group's prefix of the index is enough): `topic id, group id, member, member, limit`.
    /// Returns `id, partition, offset, attempts, died (µs), key, headers, body, published
    /// (µs), errors, member` (the record's columns NULL when retention removed it).
    pub list: &'static str,
    /// The members for which a record is a dead letter: `group id, id`. Returns `member,
    /// attempts, died (µs)`, by member.
    pub deaths: &'static str,
}

/// Delete member dead letters: `group id, member, member`.
const DELETE_ALL: &str =
    "DELETE FROM {p}member_dead WHERE group_id = ? AND (? IS NULL OR member = ?)";
/// Delete some member dead letters: `group id, member, member`, then the `{list}` of ids.
const DELETE_IDS: &str = "DELETE FROM {p}member_dead WHERE group_id = ? \
    AND (? IS NULL OR member = ?) AND id IN ({list})";

/// A broadcast group's member dead letters.
impl<B: Backend> SqlStore<B> {
    /// Record a member's dead letter (a repeat, after a crash before the member's checkpoint,
    /// replaces the earlier one).
    pub(crate) async fn insert_member_dead(
        &self,
        conn: &mut B::Connection,
        row: &MemberDeadRow<'_>,
    ) -> Result<()> {
        self.query(B::MEMBER_DEAD.insert)
            .arg(row.group_id)
            .arg(row.member.as_bytes())
            .arg(row.id.bytes())
            .arg(row.partition)
            .arg(row.offset)
            .arg(row.attempts)
            .arg(row.errors)
            .run(conn)
            .await?;
        Ok(())
    }

    /// The oldest `limit` member dead letters of the group (of one member, or of all), with
    /// their records and error histories.
    pub(crate) async fn member_dead_letters(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        group_id: i32,
        member: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let member = member.map(str::as_bytes);
        let rows = self
            .query(B::MEMBER_DEAD.list)
            .arg(topic_id)
            .arg(group_id)
            .arg(member)
            .arg(member)
            .arg(limit as i64)
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                let died_us: i64 = r.col(4)?;
                let errors: Vec<u8> = r.col(9)?;
                Ok(DeadLetter {
                    id: r.id_at(0)?,
                    attempts: r.col::<i32>(3)?.max(0) as u32,
                    died_at: time_from_micros(died_us),
                    enqueued_at: time_from_micros(r.col::<Option<i64>>(8)?.unwrap_or(died_us)),
                    errors: parse_errors(Some(&String::from_utf8_lossy(&errors))),
                    ordering_key: r.opt_text_at(5)?,
                    concurrency_key: None,
                    headers: r.headers_at(6)?,
                    body: r.col::<Option<Vec<u8>>>(7)?.unwrap_or_default(),
                    partition: Some(r.col::<i32>(1)? as u32),
                    offset: Some(r.col(2)?),
                    member: r.opt_text_at(10)?,
                })
            })
            .collect()
    }

    /// Delete member dead letters (of one member, or of all; of `ids`, or all of them).
    /// Returns how many.
    pub(crate) async fn delete_member_dead(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: Option<&str>,
        ids: Option<&[MessageId]>,
    ) -> Result<u64> {
        let member = member.map(str::as_bytes);
        let Some(ids) = ids else {
            return self
                .query(DELETE_ALL)
                .arg(group_id)
                .arg(member)
                .arg(member)
                .run(conn)
                .await;
        };
        let mut deleted = 0;
        for chunk in ids.chunks(MAX_LIST) {
            let mut q = sqlx::query::<B>(self.st.list(DELETE_IDS, "?", bucket(chunk.len())))
                .arg(group_id)
                .arg(member)
                .arg(member);
            for id in padded(chunk) {
                q = q.arg(id.bytes());
            }
            deleted += q.run(conn).await?;
        }
        Ok(deleted)
    }

    /// The members for which record `id` is a dead letter.
    pub(crate) async fn member_deaths(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        id: MessageId,
    ) -> Result<Vec<MemberDeath>> {
        let rows = self
            .query(B::MEMBER_DEAD.deaths)
            .arg(group_id)
            .arg(id.bytes())
            .rows(conn)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(MemberDeath {
                    member: r.opt_text_at(0)?.unwrap_or_default(),
                    attempts: r.col(1)?,
                    died_us: r.col(2)?,
                })
            })
            .collect()
    }
}
