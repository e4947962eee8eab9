//! Recurring schedules' rows. Every time is bound (µs of the database clock, read
//! by the engine), so the statements are the same on every backend but two: the insert that
//! leaves an existing row alone, and the read that locks a row.

use super::{Columns, SqlStore, Statement};
use crate::domain::Result;
use crate::store::Backend;
use crate::store::rows::{ScheduleAdvance, ScheduleRow, ScheduleWrite};

/// The schedule statements whose shape differs by backend.
pub struct ScheduleSql {
    /// Insert unless the name exists: name, spec, body, next fire, created, updated.
    pub insert: &'static str,
    /// One schedule's columns (those of [`decode`]), its row locked until the transaction
    /// ends: name.
    pub lock: &'static str,
    /// The earliest next fire time of the schedules not paused (NULL: none), and the
    /// database's clock in µs.
    pub next_due: &'static str,
}

/// The columns [`decode`] reads, in order.
macro_rules! schedule_columns {
    () => {
        "SELECT name, spec, body, paused, next_fire, last_fired, fired, created_at, updated_at \
         FROM {p}schedules"
    };
}
const BY_NAME: &str = concat!(schedule_columns!(), " WHERE name = ?");
const ALL: &str = concat!(schedule_columns!(), " ORDER BY name");
const DUE: &str = concat!(
    schedule_columns!(),
    " WHERE paused = 0 AND next_fire <= ? ORDER BY next_fire LIMIT 100"
);
const UPDATE: &str =
    "UPDATE {p}schedules SET spec = ?, body = ?, next_fire = ?, updated_at = ? WHERE name = ?";
const DELETE: &str = "DELETE FROM {p}schedules WHERE name = ?";
const PAUSE: &str = "UPDATE {p}schedules SET paused = 1, updated_at = ? WHERE name = ?";
const RESUME: &str =
    "UPDATE {p}schedules SET paused = 0, next_fire = ?, updated_at = ? WHERE name = ?";
const ADVANCE: &str = "UPDATE {p}schedules SET next_fire = ?, \
    last_fired = COALESCE(?, last_fired), fired = fired + ? \
    WHERE name = ? AND next_fire = ? AND paused = 0";

fn decode<R: Columns>(row: &R) -> Result<ScheduleRow>
where
    R::Database: super::Types,
{
    Ok(ScheduleRow {
        name: row.col(0)?,
        spec: row.col(1)?,
        body: row.col(2)?,
        paused: row.col::<i64>(3)? != 0,
        next_fire: row.col(4)?,
        last_fired: row.col(5)?,
        fired: row.col(6)?,
        created_at: row.col(7)?,
        updated_at: row.col(8)?,
    })
}

/// Schedule rows. Times are µs since the epoch of the database clock, read by the engine
/// (`Server::now_us`) and bound, so that no statement depends on a process's clock.
impl<B: Backend> SqlStore<B> {
    /// Insert a schedule unless one of that name exists (then nothing changes; whether a row
    /// was inserted is not told: MySQL counts a found row as affected).
    pub(crate) async fn insert_schedule(
        &self,
        conn: &mut B::Connection,
        write: &ScheduleWrite<'_>,
    ) -> Result<()> {
        self.query(B::SCHEDULES.insert)
            .arg(write.name)
            .arg(write.spec)
            .arg(write.body)
            .arg(write.next_fire)
            .arg(write.now)
            .arg(write.now)
            .run(conn)
            .await?;
        Ok(())
    }

    /// Replace a schedule's configuration and next fire time; false when it does not exist.
    pub(crate) async fn update_schedule(
        &self,
        conn: &mut B::Connection,
        write: &ScheduleWrite<'_>,
    ) -> Result<bool> {
        let done = self
            .query(UPDATE)
            .arg(write.spec)
            .arg(write.body)
            .arg(write.next_fire)
            .arg(write.now)
            .arg(write.name)
            .run(conn)
            .await?;
        Ok(done == 1)
    }

    /// A schedule by name; with `lock`, its row is locked until the transaction ends (on a
    /// backend with row locks).
    pub(crate) async fn schedule_row(
        &self,
        conn: &mut B::Connection,
        name: &str,
        lock: bool,
    ) -> Result<Option<ScheduleRow>> {
        let sql = if lock { B::SCHEDULES.lock } else { BY_NAME };
        let row = self.query(sql).arg(name).first(conn).await?;
        row.as_ref().map(decode).transpose()
    }

    /// Every schedule, by name.
    pub(crate) async fn schedule_rows(&self, conn: &mut B::Connection) -> Result<Vec<ScheduleRow>> {
        let rows = self.query(ALL).rows(conn).await?;
        rows.iter().map(decode).collect()
    }

    /// Delete a schedule; false when it did not exist.
    pub(crate) async fn delete_schedule(
        &self,
        conn: &mut B::Connection,
        name: &str,
    ) -> Result<bool> {
        Ok(self.query(DELETE).arg(name).run(conn).await? == 1)
    }

    /// Pause a schedule (`next_fire` `None`), or resume it from `next_fire`; false when it
    /// does not exist.
    pub(crate) async fn set_schedule_paused(
        &self,
        conn: &mut B::Connection,
        name: &str,
        resume_at: Option<i64>,
        now: i64,
    ) -> Result<bool> {
        let done = match resume_at {
            None => self.query(PAUSE).arg(now).arg(name).run(conn).await?,
            Some(next) => {
                self.query(RESUME)
                    .arg(next)
                    .arg(now)
                    .arg(name)
                    .run(conn)
                    .await?
            }
        };
        Ok(done == 1)
    }

    /// The earliest next fire time of the schedules that are not paused, and the database's
    /// clock (µs), in one statement: an idle process's whole look at its schedules.
    pub(crate) async fn next_schedule_due(
        &self,
        conn: &mut B::Connection,
    ) -> Result<(Option<i64>, i64)> {
        let row = self.query(B::SCHEDULES.next_due).first(conn).await?;
        let row = row.ok_or_else(|| crate::domain::Error::Corrupt("no clock row".into()))?;
        Ok((row.col(0)?, row.col(1)?))
    }

    /// Up to 100 schedules, not paused, whose next fire time is at or before `now`, the
    /// earliest first.
    pub(crate) async fn due_schedules(
        &self,
        conn: &mut B::Connection,
        now: i64,
    ) -> Result<Vec<ScheduleRow>> {
        let rows = self.query(DUE).arg(now).rows(conn).await?;
        rows.iter().map(decode).collect()
    }

    /// Record a firing: true for the one caller whose expected next fire time was still the
    /// stored one (and the schedule not paused); that caller sends the fired messages in the
    /// same transaction.
    pub(crate) async fn advance_schedule(
        &self,
        conn: &mut B::Connection,
        advance: &ScheduleAdvance<'_>,
    ) -> Result<bool> {
        let done = self
            .query(ADVANCE)
            .arg(advance.next)
            .arg(advance.last_fired)
            .arg(advance.fired)
            .arg(advance.name)
            .arg(advance.expected)
            .run(conn)
            .await?;
        Ok(done == 1)
    }
}
