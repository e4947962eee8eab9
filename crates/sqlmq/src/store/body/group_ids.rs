//! Running a statement over a list of a cluster group's ids, as the group concepts
//! (`group_claim.rs`, `group_settle.rs`, `group_dead.rs`) do: the ids in bucketed, padded
//! chunks, with the group id bound before them or after them.

use super::{Dialect, Query, SqlStore, Statement};
use crate::domain::{MessageId, Result};
use crate::store::statements::{MAX_LIST, bucket, padded};

/// Where a statement over a list of a group's ids binds the group id.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupIds {
    /// Before the ids: `… WHERE group_id = ? AND id IN ({list})`.
    GroupFirst,
    /// After the ids: `… ({ids}) v STRAIGHT_JOIN t ON t.group_id = ? …` (and the SQLite
    /// texts that stand for those, `… WHERE id IN ({list}) AND group_id = ?`).
    GroupLast,
}

impl<B: Dialect> SqlStore<B> {
    /// `template` (`{list}` of `?` or `{ids}`) for `chunk` (at most [`MAX_LIST`] ids of the
    /// group), padded to its bucket by repeating the last id.
    fn group_ids_query(
        &self,
        template: &'static str,
        order: GroupIds,
        group_id: i32,
        chunk: &[MessageId],
    ) -> Query<'static, B> {
        let mut q = sqlx::query(self.st.list(template, "?", bucket(chunk.len())));
        if order == GroupIds::GroupFirst {
            q = q.arg(group_id);
        }
        for id in padded(chunk) {
            q = q.arg(id.bytes());
        }
        if order == GroupIds::GroupLast {
            q = q.arg(group_id);
        }
        q
    }

    /// Run `template` over the group's `ids` in padded chunks; returns the rows changed.
    pub(crate) async fn exec_group_ids(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        order: GroupIds,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        let mut affected = 0;
        for chunk in ids.chunks(MAX_LIST) {
            affected += self
                .group_ids_query(template, order, group_id, chunk)
                .run(conn)
                .await?;
        }
        Ok(affected)
    }

    /// The rows of `template` for the group's `ids`, in padded chunks (`IN` matches a row
    /// once).
    pub(crate) async fn fetch_group_ids(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        order: GroupIds,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<Vec<B::Row>> {
        let mut rows = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_LIST) {
            rows.extend(
                self.group_ids_query(template, order, group_id, chunk)
                    .rows(conn)
                    .await?,
            );
        }
        Ok(rows)
    }
}
