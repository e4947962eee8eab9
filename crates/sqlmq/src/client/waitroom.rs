//! Long polls that cost the database one statement per tick, whatever the number of waiters.
//!
//! A caller of `receive_wait` that finds its queue (or cluster group) empty takes a seat in
//! that source's line and waits to be called. Nobody in the line polls: one prober per client
//! probes every source that has a line, all queues in one non-locking statement (and all
//! groups in one more), and calls the first in a line whose source has work. A send or publish
//! through this client calls the line of its queue or topic at once, after its commit.
//!
//! Only the first of a line claims on arrival: with others waiting ahead, any work goes to
//! them first, so a newcomer just sits down. The one called claims. If it got all it asked
//! for, more may be waiting, so it calls the next in line before returning; if it got nothing
//! (another process was faster) it goes back to the front. Lines are first come, first
//! called: none starves. A seat is taken *before* the claim that found nothing, so a call made
//! during that claim is not lost; a seat is left
//! the moment its wait ends (answered, timed out, or dropped because the HTTP client went
//! away), and a call that reached a seat left unused is passed on to the next in line. Waiting
//! itself claims nothing: only the called claim. (A caller that goes away *during* its claim,
//! a few milliseconds, may leave what the claim took leased until the lease ends, as with any
//! receive whose answer is lost.)
//!
//! The prober's delay starts at the floor after a claim that found work and doubles to the
//! ceiling while nothing does; it runs only while some line has a seat.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Client;
use crate::client::delay::PollDelay;
use crate::domain::{Delivery, Result};
use crate::store::Backend;
use crate::store::follow::Change;

/// The prober's default first and longest pause: one statement per 60 ms while anything waits
/// and nothing comes, and a send through another process found within 30 ms on average.
pub(crate) const PROBE_FLOOR: Duration = Duration::from_millis(10);
/// See [`PROBE_FLOOR`].
pub(crate) const PROBE_CEILING: Duration = Duration::from_millis(60);

/// A source with a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Watched {
    /// A queue, by id.
    Queue(i32),
    /// A cluster group, by id, with its topic's id (publishes call every group of a topic).
    Group { group: i32, topic: i32 },
}

/// The source's maintenance (promote due messages, release ended leases, sequence records),
/// run by the prober when its probe asks for it; answers whether it made work claimable.
pub(crate) type Maintain = Arc<dyn Fn() -> BoxFuture<'static, Result<bool>> + Send + Sync>;

/// One waiting caller. Its flags change only under the lines' lock.
#[derive(Default)]
struct Seat {
    bell: Notify,
    /// Called (and so out of the line) but not yet answered.
    called: AtomicBool,
    /// Still in its line's queue (not yet called, not left).
    queued: AtomicBool,
}

struct Line {
    /// Seats in order; those that left stay until they reach the front (leaving is O(1) even
    /// when thousands of waits end at once) and are skipped there.
    seats: VecDeque<Arc<Seat>>,
    /// Seats still queued.
    live: usize,
    maintain: Maintain,
}

/// Every line of one client, and its prober's settings.
pub(crate) struct Waitroom {
    lines: Mutex<HashMap<Watched, Line>>,
    /// Whether a prober task runs (set and cleared under `lines`' lock by the prober).
    probing: AtomicBool,
    /// A called claim found work: the prober goes back to its floor.
    found: AtomicBool,
    interval: Mutex<(Duration, Duration)>,
}

impl Default for Waitroom {
    fn default() -> Waitroom {
        Waitroom {
            lines: Mutex::default(),
            probing: AtomicBool::new(false),
            found: AtomicBool::new(false),
            interval: Mutex::new((PROBE_FLOOR, PROBE_CEILING)),
        }
    }
}

impl Waitroom {
    /// Take a seat at the back of `key`'s line (the front for one that was called and found
    /// nothing); also says whether others wait ahead.
    fn sit(&self, key: Watched, maintain: &Maintain, front: bool) -> (Arc<Seat>, bool) {
        let seat = Arc::new(Seat::default());
        let mut lines = self.lines.lock().expect("poisoned");
        let line = lines.entry(key).or_insert_with(|| Line {
            seats: VecDeque::new(),
            live: 0,
            maintain: Arc::clone(maintain),
        });
        let ahead = !front && line.live > 0;
        seat.queued.store(true, Ordering::Relaxed);
        line.live += 1;
        if front {
            line.seats.push_front(Arc::clone(&seat));
        } else {
            line.seats.push_back(Arc::clone(&seat));
        }
        (seat, ahead)
    }

    /// Leave `key`'s line. A call that reached the seat unanswered goes to the next in line.
    fn leave(&self, key: Watched, seat: &Arc<Seat>) {
        let mut lines = self.lines.lock().expect("poisoned");
        if let Some(line) = lines.get_mut(&key) {
            if seat.queued.swap(false, Ordering::Relaxed) {
                line.live -= 1;
            }
            if seat.called.swap(false, Ordering::Relaxed) {
                call_first(line);
            }
            if line.live == 0 {
                lines.remove(&key);
            }
        }
    }

    /// Call the first waiting in `key`'s line, if anyone waits.
    pub(crate) fn call(&self, key: Watched) {
        if let Some(line) = self.lines.lock().expect("poisoned").get_mut(&key) {
            call_first(line);
        }
    }

    /// Call the first waiting in the line of each group of `topic`.
    pub(crate) fn call_topic(&self, topic_id: i32) {
        for (key, line) in self.lines.lock().expect("poisoned").iter_mut() {
            if matches!(key, Watched::Group { topic, .. } if *topic == topic_id) {
                call_first(line);
            }
        }
    }

    /// Whether anyone waits for what `change` concerns (a line of its queue, or of a group of
    /// its topic; anything for a change of unknown place).
    fn concerns(&self, change: Change) -> bool {
        let lines = self.lines.lock().expect("poisoned");
        change.concerns(
            |id| lines.contains_key(&Watched::Queue(id)),
            |id| {
                lines
                    .keys()
                    .any(|k| matches!(k, Watched::Group { topic, .. } if *topic == id))
            },
        )
    }

    /// The sources with a line and their maintenance; `None` (and the prober marked stopped)
    /// when no line is left.
    fn watched(&self) -> Option<Vec<(Watched, Maintain)>> {
        let lines = self.lines.lock().expect("poisoned");
        if lines.is_empty() {
            self.probing.store(false, Ordering::Release);
            return None;
        }
        Some(
            lines
                .iter()
                .map(|(k, l)| (*k, Arc::clone(&l.maintain)))
                .collect(),
        )
    }

    /// How many wait in all lines together.
    pub(crate) fn waiting(&self) -> usize {
        let lines = self.lines.lock().expect("poisoned");
        lines.values().map(|l| l.live).sum()
    }
}

/// Call the first seat still queued in `line` (dropping those that left on the way).
fn call_first(line: &mut Line) {
    while let Some(seat) = line.seats.pop_front() {
        if seat.queued.swap(false, Ordering::Relaxed) {
            line.live -= 1;
            seat.called.store(true, Ordering::Relaxed);
            seat.bell.notify_one();
            return;
        }
    }
}

/// Leaves the line when dropped: a wait that ends in any way frees its seat at once.
struct Sitting<'a> {
    room: &'a Waitroom,
    key: Watched,
    seat: Arc<Seat>,
}

impl Drop for Sitting<'_> {
    fn drop(&mut self) {
        self.room.leave(self.key, &self.seat);
    }
}

impl<B: Backend> Client<B> {
    /// Set the shared prober's first and longest pause between probes (defaults 10 ms and
    /// 60 ms). The longest pause bounds how late a long poll hears of a message sent by
    /// another process; each pause costs one statement while anything waits.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) {
    /// use std::time::Duration;
    /// client.set_probe_interval(Duration::from_millis(10), Duration::from_millis(250));
    /// # }
    /// ```
    pub fn set_probe_interval(&self, floor: Duration, ceiling: Duration) {
        // A zero floor would never back off: at least a millisecond.
        let floor = floor.max(Duration::from_millis(1));
        *self.inner.wake.waitroom.interval.lock().expect("poisoned") = (floor, ceiling.max(floor));
    }

    /// How many `receive_wait` calls of this client are waiting now.
    ///
    /// ```no_run
    /// # fn f(client: sqlmq::Client) { println!("{} long polls wait", client.long_polls()); }
    /// ```
    pub fn long_polls(&self) -> usize {
        self.inner.wake.waitroom.waiting()
    }

    /// Claim with `attempt` until it returns messages or `wait` has passed, waiting in `key`'s
    /// line between attempts (see the module's documentation).
    pub(crate) async fn wait_in_line<F, Fut>(
        &self,
        key: Watched,
        maintain: Maintain,
        want: usize,
        wait: Duration,
        mut attempt: F,
    ) -> Result<Vec<Delivery>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Vec<Delivery>>>,
    {
        if wait.is_zero() {
            // Boxed as below, or every waiter's future would hold room for this claim.
            let claim = Box::pin(attempt());
            return claim.await;
        }
        let room = &self.inner.wake.waitroom;
        let deadline = Instant::now() + wait;
        let mut front = false;
        loop {
            let (seat, ahead) = room.sit(key, &maintain, front);
            let sitting = Sitting { room, key, seat };
            self.ensure_prober();
            // With others waiting ahead, any work there is goes to them first, and the one who
            // takes the last of it calls the next: a newcomer only sits down. So a thousand
            // long polls arriving (or re-polling after their wait ran out) cost one claim.
            let found = if ahead {
                Vec::new()
            } else {
                // Boxed: a claim's future is about 6 KiB, and thousands of waiters at rest
                // should not each carry room for one.
                Box::pin(attempt()).await?
            };
            if !found.is_empty() {
                drop(sitting);
                room.found.store(true, Ordering::Relaxed);
                if found.len() >= want {
                    // More may be waiting: the next in line looks.
                    room.call(key);
                }
                return Ok(found);
            }
            if Instant::now() >= deadline {
                return Ok(found);
            }
            tokio::select! {
                _ = sitting.seat.bell.notified() => {}
                _ = tokio::time::sleep_until(deadline) => return Ok(found),
            }
            // Called: out of the line, answering now.
            sitting.seat.called.store(false, Ordering::Release);
            front = true;
        }
    }

    /// Start this client's prober unless it runs. The guard that marks it stopped goes into
    /// the task before it is spawned, so a task dropped before it ever ran clears the mark too.
    fn ensure_prober(&self) {
        if !self
            .inner
            .wake
            .waitroom
            .probing
            .swap(true, Ordering::AcqRel)
        {
            let running = Running {
                client: self.clone(),
                stopped: false,
            };
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(run_prober(running))),
                // No runtime (nothing could wait anyway): the guard clears the mark.
                Err(_) => drop(running),
            }
        }
    }
}

/// Probe the sources with a line until no line is left; call the lines of those with work.
async fn run_prober<B: Backend>(mut running: Running<B>) {
    let client = running.client.clone();
    let room = &client.inner.wake.waitroom;
    let notes = &client.inner.wake.notifications;
    client.ensure_follower();
    let mut news = notes.subscribe();
    let (floor, ceiling) = *room.interval.lock().expect("poisoned");
    let mut delay = PollDelay::new(floor, notes.ceiling(ceiling));
    loop {
        // The lines as they are when news comes: a waiter seated since the last probe counts.
        news.sleep(delay.next_delay(), |change| room.concerns(change))
            .await;
        if room.found.swap(false, Ordering::Relaxed) {
            delay.reset();
        }
        let Some(watched) = room.watched() else {
            running.stopped = true;
            return;
        };
        let (queues, groups): (Vec<_>, Vec<_>) = watched
            .into_iter()
            .partition(|(k, _)| matches!(k, Watched::Queue(_)));
        probe_queues(&client, &queues).await;
        probe_groups(&client, &groups).await;
        let (floor, ceiling) = *room.interval.lock().expect("poisoned");
        delay.set_bounds(floor, notes.ceiling(ceiling));
    }
}

/// Marks the prober stopped if its task is dropped (with its runtime, say) rather than ending
/// when no line is left: a client used from another runtime later must not leave its waiters
/// without a prober.
struct Running<B: Backend> {
    client: Client<B>,
    /// Ended normally: `watched` marked it stopped, under the lines' lock.
    stopped: bool,
}

impl<B: Backend> Drop for Running<B> {
    fn drop(&mut self) {
        if !self.stopped {
            let room = &self.client.inner.wake.waitroom;
            let _lines = room.lines.lock().expect("poisoned");
            room.probing.store(false, Ordering::Release);
        }
    }
}

/// Run `maintain`; whether it made work claimable (a failure is logged and counts as no).
async fn maintained(key: Watched, maintain: &Maintain) -> bool {
    maintain().await.unwrap_or_else(|e| {
        tracing::warn!(?key, "maintenance failed: {e}");
        false
    })
}

/// A probe's signals, or `None` with its failure logged (once per outage of the database).
fn logged<B: Backend, T>(
    client: &Client<B>,
    started: std::time::Instant,
    probe: Result<Vec<T>>,
) -> Option<Vec<T>> {
    probe
        .inspect_err(|e| {
            if !client.outage().failed_since(e, started) {
                tracing::warn!("long-poll probe failed: {e}");
            }
        })
        .ok()
}

async fn probe_queues<B: Backend>(client: &Client<B>, queues: &[(Watched, Maintain)]) {
    let ids: Vec<i32> = queues
        .iter()
        .filter_map(|(k, _)| match k {
            Watched::Queue(id) => Some(*id),
            Watched::Group { .. } => None,
        })
        .collect();
    let started = std::time::Instant::now();
    let Some(signals) = logged(client, started, client.probe(&ids).await) else {
        return;
    };
    for signal in signals {
        let key = Watched::Queue(signal.queue_id);
        let Some((_, maintain)) = queues.iter().find(|(k, _)| *k == key) else {
            continue;
        };
        let ready = signal.ready || (signal.needs_maintenance() && maintained(key, maintain).await);
        if ready {
            client.inner.wake.waitroom.call(key);
        }
    }
}

async fn probe_groups<B: Backend>(client: &Client<B>, groups: &[(Watched, Maintain)]) {
    let ids: Vec<i32> = groups
        .iter()
        .filter_map(|(k, _)| match k {
            Watched::Group { group, .. } => Some(*group),
            Watched::Queue(_) => None,
        })
        .collect();
    if ids.is_empty() {
        return;
    }
    let started = std::time::Instant::now();
    let Some(signals) = logged(client, started, client.probe_groups(&ids).await) else {
        return;
    };
    for signal in signals {
        let Some((key, maintain)) = groups
            .iter()
            .find(|(k, _)| matches!(k, Watched::Group { group, .. } if *group == signal.group_id))
        else {
            continue;
        };
        let ready = signal.ready
            || ((signal.expired || signal.pending) && maintained(*key, maintain).await);
        if ready {
            client.inner.wake.waitroom.call(*key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing() -> Maintain {
        Arc::new(|| Box::pin(async { Ok(false) }))
    }

    #[test]
    fn lines_are_first_come_first_called_and_a_left_call_passes_on() {
        let room = Waitroom::default();
        let key = Watched::Queue(1);
        let ((a, first_ahead), (b, second_ahead), (c, _)) = (
            room.sit(key, &nothing(), false),
            room.sit(key, &nothing(), false),
            room.sit(key, &nothing(), false),
        );
        assert!(!first_ahead && second_ahead);
        room.call(key);
        assert!(a.called.load(Ordering::Acquire));
        assert!(!b.called.load(Ordering::Acquire));
        // `a` leaves without answering: `b` is called in its place.
        room.leave(key, &a);
        assert!(b.called.load(Ordering::Acquire));
        assert!(!c.called.load(Ordering::Acquire));
        // `c` leaves uncalled: nobody else is called.
        room.leave(key, &c);
        assert_eq!(room.waiting(), 0);
        room.leave(key, &b);
        assert!(room.lines.lock().unwrap().is_empty());
    }

    #[test]
    fn seats_that_left_are_skipped_and_a_line_empties_with_its_last_live_seat() {
        let room = Waitroom::default();
        let key = Watched::Queue(1);
        let seats: Vec<_> = (0..5).map(|_| room.sit(key, &nothing(), false).0).collect();
        for gone in &seats[..3] {
            room.leave(key, gone);
        }
        assert_eq!(room.waiting(), 2);
        room.call(key);
        assert!(
            seats[3].called.load(Ordering::Acquire),
            "the first still waiting"
        );
        assert_eq!(room.waiting(), 1);
        room.leave(key, &seats[4]);
        assert!(room.lines.lock().unwrap().is_empty());
        // Answered: `seats[3]` leaves without passing anything on.
        seats[3].called.store(false, Ordering::Release);
        room.leave(key, &seats[3]);
        assert!(room.lines.lock().unwrap().is_empty());
    }

    #[test]
    fn a_topic_call_reaches_each_group_of_that_topic_only() {
        let room = Waitroom::default();
        let (g1, _) = room.sit(Watched::Group { group: 1, topic: 7 }, &nothing(), false);
        let (g2, _) = room.sit(Watched::Group { group: 2, topic: 7 }, &nothing(), false);
        let (other, _) = room.sit(Watched::Group { group: 3, topic: 8 }, &nothing(), false);
        room.call_topic(7);
        assert!(g1.called.load(Ordering::Acquire) && g2.called.load(Ordering::Acquire));
        assert!(!other.called.load(Ordering::Acquire));
    }

    #[test]
    fn the_prober_stops_when_the_last_line_empties() {
        let room = Waitroom::default();
        room.probing.store(true, Ordering::Release);
        let key = Watched::Queue(1);
        let (seat, _) = room.sit(key, &nothing(), true);
        assert_eq!(room.watched().map(|w| w.len()), Some(1));
        room.leave(key, &seat);
        assert!(room.watched().is_none());
        assert!(!room.probing.load(Ordering::Acquire));
    }
}
