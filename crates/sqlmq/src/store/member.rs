//! Broadcast members' dead letters: each member of a broadcast group keeps its own, since
//! every member handles every record.

use std::future::Future;

use super::Backend;
use super::rows::{MemberDeadRow, MemberDeath};
use crate::domain::{DeadLetter, MessageId, Result};

/// A broadcast group's member dead letters.
pub trait MemberDead<B: Backend> {
    /// Record a member's dead letter (a repeat, after a crash before the member's checkpoint,
    /// replaces the earlier one).
    fn insert_member_dead(
        &self,
        conn: &mut B::Connection,
        row: &MemberDeadRow<'_>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The oldest `limit` member dead letters of the group (of one member, or of all), with
    /// their records and error histories.
    fn member_dead_letters(
        &self,
        conn: &mut B::Connection,
        topic_id: i32,
        group_id: i32,
        member: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<DeadLetter>>> + Send;

    /// Delete member dead letters (of one member, or of all; of `ids`, or all of them).
    /// Returns how many.
    fn delete_member_dead(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        member: Option<&str>,
        ids: Option<&[MessageId]>,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// The members for which record `id` is a dead letter.
    fn member_deaths(
        &self,
        conn: &mut B::Connection,
        group_id: i32,
        id: MessageId,
    ) -> impl Future<Output = Result<Vec<MemberDeath>>> + Send;
}
