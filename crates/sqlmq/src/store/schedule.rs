//! Recurring schedules: their rows, and the compare-and-set that makes one process win each
//! fire time.

use std::future::Future;

use super::Backend;
use super::rows::{ScheduleAdvance, ScheduleRow, ScheduleWrite};
use crate::domain::Result;

/// Schedule rows. Times are µs since the epoch of the database clock, read by the engine
/// (`Server::now_us`) and bound, so that no statement depends on a process's clock.
pub trait Schedules<B: Backend> {
    /// Insert a schedule unless one of that name exists (then nothing changes; whether a row
    /// was inserted is not told: MySQL counts a found row as affected).
    fn insert_schedule(
        &self,
        conn: &mut B::Connection,
        write: &ScheduleWrite<'_>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Replace a schedule's configuration and next fire time; false when it does not exist.
    fn update_schedule(
        &self,
        conn: &mut B::Connection,
        write: &ScheduleWrite<'_>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// A schedule by name; with `lock`, its row is locked until the transaction ends (on a
    /// backend with row locks).
    fn schedule_row(
        &self,
        conn: &mut B::Connection,
        name: &str,
        lock: bool,
    ) -> impl Future<Output = Result<Option<ScheduleRow>>> + Send;

    /// Every schedule, by name.
    fn schedule_rows(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<Vec<ScheduleRow>>> + Send;

    /// Delete a schedule; false when it did not exist.
    fn delete_schedule(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Pause a schedule (`next_fire` `None`), or resume it from `next_fire`; false when it
    /// does not exist.
    fn set_schedule_paused(
        &self,
        conn: &mut B::Connection,
        name: &str,
        resume_at: Option<i64>,
        now: i64,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// The earliest next fire time of the schedules that are not paused, and the database's
    /// clock (µs), in one statement: an idle process's whole look at its schedules.
    fn next_schedule_due(
        &self,
        conn: &mut B::Connection,
    ) -> impl Future<Output = Result<(Option<i64>, i64)>> + Send;

    /// Up to 100 schedules, not paused, whose next fire time is at or before `now`, the
    /// earliest first.
    fn due_schedules(
        &self,
        conn: &mut B::Connection,
        now: i64,
    ) -> impl Future<Output = Result<Vec<ScheduleRow>>> + Send;

    /// Record a firing: true for the one caller whose expected next fire time was still the
    /// stored one (and the schedule not paused); that caller sends the fired messages in the
    /// same transaction.
    fn advance_schedule(
        &self,
        conn: &mut B::Connection,
        advance: &ScheduleAdvance<'_>,
    ) -> impl Future<Output = Result<bool>> + Send;
}
