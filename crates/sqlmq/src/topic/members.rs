//! Broadcast members' dead letters: a record a member's handler kept failing on is recorded
//! as that member's dead letter (every member handles every record, so each keeps its own),
//! and the member moves on.

use super::group::Group;
use crate::domain::{AttemptError, DeadLetter, Error, GroupMode, MessageId, Result};
use crate::domain::{StreamRecord, encode_errors, validate_name};
use crate::store::Backend;
use crate::store::rows::MemberDeadRow;
use crate::tx;

impl<B: Backend> Group<B> {
    /// The oldest `limit` dead letters of a broadcast group's members (`member`: of that
    /// member only), each with the member it belongs to and its error history.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// for d in g.member_dead_letters(None, 100).await? {
    ///     println!("{:?} gave up on {}:{:?}", d.member, d.partition.unwrap(), d.offset);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn member_dead_letters(
        &self,
        member: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        self.require_broadcast(member)?;
        let client = self.topic.client();
        client.require_schema()?;
        let mut conn = client.conns().read().await?;
        client
            .store()
            .member_dead_letters(&mut conn, self.topic.id(), self.id(), member, limit)
            .await
    }

    /// Delete member dead letters: those of `ids` (all when `None`), of `member` (every
    /// member's when `None`). Returns how many.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let n = g.purge_member_dead_letters(Some("web-1"), None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn purge_member_dead_letters(
        &self,
        member: Option<&str>,
        ids: Option<&[MessageId]>,
    ) -> Result<u64> {
        self.require_broadcast(member)?;
        let client = self.topic.client();
        client.require_schema()?;
        let group_id = self.id();
        tx::run(client.conns(), "member_purge_dead", |conn, _| {
            Box::pin(async move {
                client
                    .store()
                    .delete_member_dead(conn, group_id, member, ids)
                    .await
            })
        })
        .await
    }

    /// Record `record` as `member`'s dead letter after `attempts` attempts (`errors`: their
    /// history) and move the member past it, in one transaction.
    pub(crate) async fn member_gives_up(
        &self,
        member: &str,
        record: &StreamRecord,
        attempts: u32,
        errors: &[AttemptError],
    ) -> Result<()> {
        let client = self.topic.client();
        let errors = encode_errors(errors);
        let row = &MemberDeadRow {
            group_id: self.id(),
            member,
            id: record.id,
            partition: record.partition as i32,
            offset: record.offset,
            attempts: i32::try_from(attempts).unwrap_or(i32::MAX),
            errors: &errors,
        };
        let position = [(row.partition, row.offset + 1)];
        tx::run(client.conns(), "member_dead_letter", |conn, _| {
            Box::pin(async move {
                let store = client.store();
                store.insert_member_dead(conn, row).await?;
                store
                    .save_positions(conn, row.group_id, member, &position)
                    .await
            })
        })
        .await
    }

    /// Checkpoint one partition of a broadcast member (the worker's members save partitions
    /// one at a time, as each moves on).
    pub(crate) async fn save_member_position(
        &self,
        member: &str,
        partition: u32,
        next: i64,
    ) -> Result<()> {
        let client = self.topic.client();
        let mut conn = client.conns().acquire().await?;
        client
            .store()
            .save_positions(&mut conn, self.id(), member, &[(partition as i32, next)])
            .await
    }

    /// Member operations need a broadcast group (and a valid member name when one is given).
    fn require_broadcast(&self, member: Option<&str>) -> Result<()> {
        if let Some(m) = member {
            validate_name("member", m)?;
        }
        match self.config().mode {
            GroupMode::Broadcast => Ok(()),
            GroupMode::Cluster => Err(Error::InvalidArgument(format!(
                "group {} is a cluster group: its dead letters are the group's (dead_letters)",
                self.label()
            ))),
        }
    }
}
