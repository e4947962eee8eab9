//! Running a statement over a list of a cluster group's ids, as the group concepts
//! (`group_claim.rs`, `group_settle.rs`, `group_dead.rs`) do: the body's id lists
//! (`exec_ids_beside`, `fetch_ids_beside`), with the group id bound before them or after them.

use super::{Beside, Dialect, SqlStore};
use crate::domain::{MessageId, Result};

/// Where a statement over a list of a group's ids binds the group id.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupIds {
    /// Before the ids: `… WHERE group_id = ? AND id IN ({list})`.
    GroupFirst,
    /// After the ids: `… ({ids}) v STRAIGHT_JOIN t ON t.group_id = ? …` (and the SQLite
    /// texts that stand for those, `… WHERE id IN ({list}) AND group_id = ?`).
    GroupLast,
}

impl GroupIds {
    /// `group_id`, bound where this order says.
    fn beside(self, group_id: i32) -> Beside {
        match self {
            GroupIds::GroupFirst => Beside::Before(group_id),
            GroupIds::GroupLast => Beside::After(group_id),
        }
    }
}

impl<B: Dialect> SqlStore<B> {
    /// Run `template` over the group's `ids` in padded chunks; returns the rows changed.
    pub(crate) async fn exec_group_ids(
        &self,
        conn: &mut B::Connection,
        template: &'static str,
        order: GroupIds,
        group_id: i32,
        ids: &[MessageId],
    ) -> Result<u64> {
        self.exec_ids_beside(conn, template, order.beside(group_id), ids)
            .await
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
        self.fetch_ids_beside(conn, template, order.beside(group_id), ids)
            .await
    }
}
