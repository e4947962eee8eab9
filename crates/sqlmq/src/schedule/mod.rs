//! Recurring schedules: a message sent to a queue or published to a topic every interval or by
//! a cron expression ([`ScheduleConfig`], [`Timing`], [`ScheduleTarget`]), fired once per fire
//! time by whichever process runs a worker, `sqlmq consume` or `sqlmq serve`, with a
//! [`CatchUp`] rule for the fire times missed while none ran.
//!
//! ```no_run
//! use std::time::Duration;
//! use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
//!
//! # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
//! let every_hour = Timing::Every(Duration::from_secs(3600));
//! let config = ScheduleConfig::new(every_hour, ScheduleTarget::Queue("reports".into()))
//!     .body("hourly report");
//! client.create_schedule("hourly-report", config).await?;
//! # Ok(()) }
//! ```
//!
//! ## Inside
//!
//! Creating, looking at, pausing and deleting them ([`Client`] methods, here so that the
//! client module knows nothing of them), and firing them (`fire.rs`).
//!
//! A schedule is a row: its configuration, its next fire time and what it fired. Every process
//! that runs a worker, `sqlmq consume`, `sqlmq subscribe` or `sqlmq serve` fires the due
//! schedules of its database; the database decides which process fires each fire time, by a
//! compare-and-set on the next fire time in the transaction that sends the message, so that
//! no leader is elected and no process's clock is trusted (see `fire.rs`).

mod fire;

pub use crate::domain::{
    CATCH_UP_GRACE, CatchUp, FIRE_TIME_HEADER, SCHEDULE_HEADER, Schedule, ScheduleConfig,
    ScheduleTarget, Timing,
};

use crate::client::{Client, Subject};
use crate::domain::{Error, NEVER, Result, time_from_micros, validate_name};
use crate::store::Backend;
use crate::store::rows::{ScheduleRow, ScheduleWrite};
use crate::tx;

impl<B: Backend> Client<B> {
    /// Create a recurring schedule, or replace the configuration of an existing one. Replacing
    /// keeps what it fired, whether it is paused, and its next fire time when the timing is
    /// unchanged (declaring schedules at every start-up is the intended use, and loses no fire
    /// time); a new timing fires next at its first fire time from now. The target queue or
    /// topic must exist.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// use sqlmq::schedule::{ScheduleConfig, ScheduleTarget, Timing};
    /// let config = ScheduleConfig::new(
    ///     Timing::cron("0 3 * * *", "Europe/Paris"),
    ///     ScheduleTarget::Queue("reports".into()),
    /// )
    /// .body(r#"{"report":"nightly"}"#);
    /// let s = client.create_schedule("nightly-report", config).await?;
    /// println!("next at {:?}", s.next_fire);
    /// # Ok(()) }
    /// ```
    pub async fn create_schedule(&self, name: &str, config: ScheduleConfig) -> Result<Schedule> {
        validate_name("schedule", name)?;
        config.validate()?;
        let limit = self.max_payload_bytes();
        if config.body.len() > limit {
            return Err(Error::PayloadTooLarge {
                size: config.body.len(),
                limit,
            });
        }
        self.require_schema()?;
        match &config.target {
            ScheduleTarget::Queue(q) => drop(self.queue(q).await?),
            ScheduleTarget::Topic(t) => drop(self.topic(t).await?),
        }
        let spec = config.to_json()?;
        let store = self.store();
        let (config, spec) = (&config, &spec);
        tx::run(self.conns(), "schedule_put", |conn, _| {
            Box::pin(async move {
                let now = B::now_us(store, conn).await?;
                let next = config.timing.next_after(now)?.unwrap_or(NEVER);
                let mut write = ScheduleWrite {
                    name,
                    spec,
                    body: &config.body,
                    next_fire: next,
                    now,
                };
                // Inserted, or left alone when the name exists; either way the row is then
                // locked and written, its next fire time kept when the timing is the same.
                store.insert_schedule(conn, &write).await?;
                if let Some(old) = store.schedule_row(conn, name, true).await?
                    && let Ok(was) = ScheduleConfig::from_stored(&old.spec, Vec::new())
                    && was.timing == config.timing
                {
                    write.next_fire = old.next_fire;
                }
                store.update_schedule(conn, &write).await?;
                Ok(())
            })
        })
        .await?;
        self.notify_local(Subject::Schedules);
        self.schedule(name).await
    }

    /// A schedule by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// match client.schedule("nightly-report").await {
    ///     Ok(s) => println!("last fired {:?}, {} in all", s.last_fired, s.fired),
    ///     Err(sqlmq::Error::UnknownSchedule(name)) => println!("no schedule {name}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn schedule(&self, name: &str) -> Result<Schedule> {
        validate_name("schedule", name)?;
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        match self.store().schedule_row(&mut conn, name, false).await? {
            Some(row) => to_schedule(row),
            None => Err(Error::UnknownSchedule(name.to_owned())),
        }
    }

    /// Every schedule, by name.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// for s in client.schedules().await? {
    ///     println!("{} next {:?}", s.name, s.next_fire);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn schedules(&self) -> Result<Vec<Schedule>> {
        self.require_schema()?;
        let mut conn = self.conns().read().await?;
        let rows = self.store().schedule_rows(&mut conn).await?;
        rows.into_iter().map(to_schedule).collect()
    }

    /// Delete a schedule (what it already sent stays).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.delete_schedule("nightly-report").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_schedule(&self, name: &str) -> Result<()> {
        validate_name("schedule", name)?;
        self.require_schema()?;
        let store = self.store();
        let deleted = tx::run(self.conns(), "schedule_delete", |conn, _| {
            Box::pin(store.delete_schedule(conn, name))
        })
        .await?;
        if !deleted {
            return Err(Error::UnknownSchedule(name.to_owned()));
        }
        Ok(())
    }

    /// Pause a schedule: it fires nothing until resumed.
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.pause_schedule("nightly-report").await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.set_schedule_paused(name, true).await
    }

    /// Resume a paused schedule: it fires next at its first fire time from now (what it would
    /// have fired while paused is not caught up).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// client.resume_schedule("nightly-report").await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.set_schedule_paused(name, false).await
    }

    async fn set_schedule_paused(&self, name: &str, pause: bool) -> Result<Schedule> {
        validate_name("schedule", name)?;
        self.require_schema()?;
        let store = self.store();
        let found = tx::run(self.conns(), "schedule_pause", |conn, _| {
            Box::pin(async move {
                let now = B::now_us(store, conn).await?;
                let Some(row) = store.schedule_row(conn, name, true).await? else {
                    return Ok(false);
                };
                if pause {
                    return store.set_schedule_paused(conn, name, None, now).await;
                }
                if !row.paused {
                    return Ok(true);
                }
                let config = ScheduleConfig::from_stored(&row.spec, Vec::new())?;
                let next = config.timing.next_after(now)?.unwrap_or(NEVER);
                store.set_schedule_paused(conn, name, Some(next), now).await
            })
        })
        .await?;
        if !found {
            return Err(Error::UnknownSchedule(name.to_owned()));
        }
        self.notify_local(Subject::Schedules);
        self.schedule(name).await
    }
}

/// A stored row as the public [`Schedule`].
fn to_schedule(row: ScheduleRow) -> Result<Schedule> {
    Ok(Schedule {
        config: ScheduleConfig::from_stored(&row.spec, row.body)?,
        name: row.name,
        paused: row.paused,
        next_fire: (row.next_fire != NEVER).then(|| time_from_micros(row.next_fire)),
        last_fired: row.last_fired.map(time_from_micros),
        fired: row.fired.max(0) as u64,
        created_at: time_from_micros(row.created_at),
        updated_at: time_from_micros(row.updated_at),
    })
}
