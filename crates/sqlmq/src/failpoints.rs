//! Pause points for tests: hold a task at a chosen statement of the engine.
//!
//! Races between a producer's commit and a sequencing step, or a connection dropped in the
//! middle of a claim, happen in windows of microseconds; a test that waits for them by luck
//! proves little. The engine marks such statements with `failpoints::hit("name")`; a test armed
//! with the cargo feature `failpoints` (enabled for sqlmq's own tests only) can pause the next
//! task that reaches a point (`pause`), do its own work meanwhile — commit a producer, drop
//! a connection — and let the task go, or make every task wait a random while at a point
//! (`jitter`) to shake out orderings. Without the feature the module is crate-private and holds
//! only the marks, as empty functions: it is no part of the public API.
//!
//! Points (name: where the task is held):
//!
//! | point | held |
//! |---|---|
//! | `<op>.before_begin` | a unit of work run by the engine's transaction runner, its pooled connection in hand, before its BEGIN is sent |
//! | `<op>.before_commit` | a unit of work run by the engine's transaction runner, its statements done, before COMMIT; `<op>` is the unit's name in the `sqlmq_db_retries_total` metric: `send`, `claim`, `ack`, `nack`, `publish`, `sequence`, … |
//! | `sequence.locked` | a sequencing step: the partition's counter row locked (MySQL: in the round trip that also claims the pending rows) |
//! | `sequence.claimed` | the committed pending rows locked (`SKIP LOCKED`); the copy, the deletes and the counter's advance follow in one round trip |
//! | `schedule.<name>.sent` | a fire of schedule `<name>`: its compare-and-set done and its messages sent, before COMMIT |
//! | `migrate.<version>.<n>` | migration `<version>`: its first `n` statements run (0: none yet), its version not yet recorded |
//! | `reverse.<version>.<n>` | the reverse of migration `<version>`: its version forgotten and its first `n` tables dropped |

#[cfg(feature = "failpoints")]
pub use armed::{Jitter, Pause, jitter, pause};

/// Mark the point `name`: returns at once unless a test armed it.
#[cfg(all(not(feature = "failpoints"), feature = "mysql"))]
#[inline(always)]
pub(crate) async fn hit(_name: &'static str) {}

/// Mark the point `<op>.before_commit`.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) async fn before_commit(_op: &'static str) {}

/// Mark the point `<what>.<version>.<n>` (`migrate` or `reverse`).
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) async fn migration_step(_what: &'static str, _version: i64, _n: usize) {}

/// Mark the point `schedule.<name>.sent`.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) async fn schedule_sent(_name: &str) {}

/// Mark the point `<op>.before_begin`.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) async fn before_begin(_op: &'static str) {}

/// Mark the point `name`: returns at once unless a test armed it. (Only MySQL's sequencer
/// marks points by name.)
#[cfg(feature = "failpoints")]
#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
pub(crate) async fn hit(name: &'static str) {
    armed::hit(name).await;
}

/// Mark the point `<op>.before_commit`.
#[cfg(feature = "failpoints")]
pub(crate) async fn before_commit(op: &'static str) {
    armed::hit(&format!("{op}.before_commit")).await;
}

/// Mark the point `<what>.<version>.<n>` (`migrate` or `reverse`).
#[cfg(feature = "failpoints")]
pub(crate) async fn migration_step(what: &'static str, version: i64, n: usize) {
    armed::hit(&format!("{what}.{version}.{n}")).await;
}

/// Mark the point `schedule.<name>.sent`.
#[cfg(feature = "failpoints")]
pub(crate) async fn schedule_sent(name: &str) {
    armed::hit(&format!("schedule.{name}.sent")).await;
}

/// Mark the point `<op>.before_begin`.
#[cfg(feature = "failpoints")]
pub(crate) async fn before_begin(op: &'static str) {
    armed::hit(&format!("{op}.before_begin")).await;
}

#[cfg(feature = "failpoints")]
mod armed {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::Duration;

    use tokio::sync::Notify;

    /// What an armed point does to the tasks reaching it.
    enum Action {
        /// Hold the first task to arrive until the [`Pause`] is released; later ones pass.
        Pause(Arc<Hold>),
        /// Every task waits a random time up to this long.
        Jitter(Duration),
    }

    /// One held task's rendezvous.
    struct Hold {
        arrived: Notify,
        released: Notify,
        taken: Mutex<bool>,
    }

    fn points() -> &'static Mutex<HashMap<String, Action>> {
        static POINTS: OnceLock<Mutex<HashMap<String, Action>>> = OnceLock::new();
        POINTS.get_or_init(Default::default)
    }

    pub(super) async fn hit(name: &str) {
        let action = match points().lock().unwrap().get(name) {
            None => return,
            Some(Action::Jitter(max)) => Err(*max),
            Some(Action::Pause(hold)) => Ok(hold.clone()),
        };
        match action {
            Err(max) => {
                let wait = max.mul_f64(rand::random::<f64>());
                tokio::time::sleep(wait).await;
            }
            Ok(hold) => {
                let first = !std::mem::replace(&mut *hold.taken.lock().unwrap(), true);
                if first {
                    // Register before announcing, so that a release right after the
                    // announcement is not missed.
                    let released = hold.released.notified();
                    hold.arrived.notify_one();
                    released.await;
                }
            }
        }
    }

    /// An armed pause point: the first task to reach it waits until [`Pause::release`] (or
    /// the drop of this value).
    ///
    /// ```
    /// # async fn f() {
    /// let held = sqlmq::failpoints::pause("sequence.claimed");
    /// // … start a sequencing step in a task …
    /// held.reached().await; // the step holds its rows now
    /// // … commit a producer …
    /// held.release();
    /// # }
    /// ```
    pub struct Pause {
        name: &'static str,
        hold: Arc<Hold>,
    }

    /// Arm `name`: the next task reaching it is held.
    ///
    /// ```
    /// let held = sqlmq::failpoints::pause("claim.before_commit");
    /// held.release();
    /// ```
    pub fn pause(name: &'static str) -> Pause {
        let hold = Arc::new(Hold {
            arrived: Notify::new(),
            released: Notify::new(),
            taken: Mutex::new(false),
        });
        points()
            .lock()
            .unwrap()
            .insert(name.to_owned(), Action::Pause(hold.clone()));
        Pause { name, hold }
    }

    impl Pause {
        /// Wait until a task is held at the point.
        ///
        /// ```
        /// # async fn f(held: sqlmq::failpoints::Pause) { held.reached().await; }
        /// ```
        pub async fn reached(&self) {
            self.hold.arrived.notified().await;
        }

        /// Let the held task go on and disarm the point.
        ///
        /// ```
        /// sqlmq::failpoints::pause("publish.inserted").release();
        /// ```
        pub fn release(self) {}
    }

    impl Drop for Pause {
        fn drop(&mut self) {
            points().lock().unwrap().remove(self.name);
            self.hold.released.notify_one();
        }
    }

    /// A point where every task waits a random while, until this value is dropped.
    ///
    /// ```
    /// let _shake = sqlmq::failpoints::jitter("sequence.claimed", std::time::Duration::from_millis(5));
    /// ```
    pub struct Jitter {
        name: &'static str,
    }

    /// Make every task reaching `name` wait between 0 and `max`.
    ///
    /// ```
    /// let shake = sqlmq::failpoints::jitter("publish.inserted", std::time::Duration::from_millis(2));
    /// drop(shake);
    /// ```
    pub fn jitter(name: &'static str, max: std::time::Duration) -> Jitter {
        points()
            .lock()
            .unwrap()
            .insert(name.to_owned(), Action::Jitter(max));
        Jitter { name }
    }

    impl Drop for Jitter {
        fn drop(&mut self) {
            points().lock().unwrap().remove(self.name);
        }
    }
}
