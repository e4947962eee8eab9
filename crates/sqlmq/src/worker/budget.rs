//! The worker's message budget ([`WorkerBuilder::max_messages`]): how many messages all its
//! claim loops and partition tasks together may still hand out.
//!
//! A loop reserves what it asks a claim for and gives back, when the claim answers, what the
//! claim did not hand out. The budget is spent only when nothing is left *and nothing is
//! reserved*: a loop that finds nothing left while another loop's claim is under way waits for
//! that claim's answer instead of stopping the worker. (Stopping there, as the worker once did,
//! ended `consume --max-messages 1` at once whenever its two claim loops started together: the
//! first reserved the only message for a claim that found the queue empty, and the second saw
//! nothing left.)
//!
//! [`WorkerBuilder::max_messages`]: super::WorkerBuilder::max_messages

use std::sync::Mutex;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Messages a worker may still hand out, shared by its loops.
pub(crate) struct Budget {
    state: Mutex<State>,
    /// Told whenever a reservation ends (given back or spent).
    changed: Notify,
}

#[derive(Debug)]
struct State {
    left: u64,
    reserved: u64,
}

/// Part of the budget held for one claim: what is not spent when it drops goes back.
pub(crate) struct Reservation<'a> {
    budget: &'a Budget,
    n: u64,
}

impl Budget {
    /// A budget of `max` messages (`None`: no limit).
    pub(crate) fn new(max: Option<u64>) -> Budget {
        Budget {
            state: Mutex::new(State {
                left: max.unwrap_or(u64::MAX),
                reserved: 0,
            }),
            changed: Notify::new(),
        }
    }

    /// Reserve up to `want` (at least one) messages. Waits while nothing is left but other
    /// reservations are out (one may give some back); `None` once the budget is spent —
    /// nothing left, nothing reserved — or when `stop` is cancelled.
    pub(crate) async fn reserve(
        &self,
        want: usize,
        stop: &CancellationToken,
    ) -> Option<Reservation<'_>> {
        loop {
            // Registered before the look, so that a reservation ending in between is not
            // missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.state.lock().expect("poisoned");
                if state.left > 0 {
                    let n = state.left.min(want.max(1) as u64);
                    state.left -= n;
                    state.reserved += n;
                    return Some(Reservation { budget: self, n });
                }
                if state.reserved == 0 {
                    return None;
                }
            }
            tokio::select! {
                () = &mut changed => {}
                () = stop.cancelled() => return None,
            }
        }
    }

    /// Whether nothing is left and nothing is reserved: no message can be handed out any more.
    pub(crate) fn spent(&self) -> bool {
        let state = self.state.lock().expect("poisoned");
        state.left == 0 && state.reserved == 0
    }

    fn end(&self, reserved: u64, unused: u64) {
        {
            let mut state = self.state.lock().expect("poisoned");
            state.reserved -= reserved;
            state.left += unused;
        }
        self.changed.notify_waiters();
    }
}

impl Reservation<'_> {
    /// How many messages were reserved.
    pub(crate) fn len(&self) -> usize {
        self.n as usize
    }

    /// `used` of the reserved messages were handed out; the rest go back. Returns whether the
    /// budget is now spent.
    pub(crate) fn spend(mut self, used: usize) -> bool {
        let used = (used as u64).min(self.n);
        let budget = self.budget;
        budget.end(self.n, self.n - used);
        self.n = 0;
        budget.spent()
    }
}

impl Drop for Reservation<'_> {
    /// A reservation dropped without [`spend`](Reservation::spend) (the claim failed, or the
    /// loop stopped) gives everything back.
    fn drop(&mut self) {
        if self.n > 0 {
            self.budget.end(self.n, self.n);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn reservations_never_overdraw_and_give_back_what_they_did_not_use() {
        let budget = Budget::new(Some(5));
        let stop = CancellationToken::new();
        let a = budget.reserve(3, &stop).await.unwrap();
        let b = budget.reserve(3, &stop).await.unwrap();
        assert_eq!((a.len(), b.len()), (3, 2));
        assert!(!a.spend(1), "two went back, and b is out");
        let c = budget.reserve(3, &stop).await.unwrap();
        assert_eq!(c.len(), 2);
        drop(b);
        assert!(!budget.spent());
        assert!(!c.spend(2), "b's two came back");
        let d = budget.reserve(1, &stop).await.unwrap();
        assert_eq!(d.len(), 1);
        assert!(!d.spend(1));
        let e = budget.reserve(9, &stop).await.unwrap();
        assert_eq!(e.len(), 1);
        assert!(e.spend(1));
        assert!(budget.reserve(1, &stop).await.is_none(), "spent");
    }

    /// The defect this type fixed: with one message left and reserved by a claim that finds
    /// nothing, another loop waits for that claim's answer instead of finding the budget spent.
    #[tokio::test]
    async fn a_loop_waits_for_the_reservation_out_instead_of_stopping() {
        let budget = Arc::new(Budget::new(Some(1)));
        let stop = CancellationToken::new();
        let first = budget.reserve(4, &stop).await.unwrap();
        assert_eq!(first.len(), 1);
        let waiter = {
            let (budget, stop) = (Arc::clone(&budget), stop.clone());
            tokio::spawn(async move { budget.reserve(4, &stop).await.map(|r| r.len()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !waiter.is_finished(),
            "nothing left, but one reserved: wait"
        );
        assert!(!first.spend(0), "the empty claim gives it back");
        assert_eq!(waiter.await.unwrap(), Some(1));
    }

    #[tokio::test]
    async fn a_waiter_ends_when_the_last_reservation_is_spent_or_at_stop() {
        let budget = Arc::new(Budget::new(Some(1)));
        let stop = CancellationToken::new();
        let first = budget.reserve(1, &stop).await.unwrap();
        let waiter = {
            let (budget, stop) = (Arc::clone(&budget), stop.clone());
            tokio::spawn(async move { budget.reserve(1, &stop).await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(first.spend(1));
        assert!(!waiter.await.unwrap(), "spent");

        let budget = Arc::new(Budget::new(Some(1)));
        let _held = budget.reserve(1, &stop).await.unwrap();
        let waiter = {
            let (budget, stop) = (Arc::clone(&budget), stop.clone());
            tokio::spawn(async move { budget.reserve(1, &stop).await.is_some() })
        };
        stop.cancel();
        assert!(!waiter.await.unwrap());
    }

    #[tokio::test]
    async fn no_limit_is_never_spent() {
        let budget = Budget::new(None);
        let stop = CancellationToken::new();
        let r = budget.reserve(1000, &stop).await.unwrap();
        assert_eq!(r.len(), 1000);
        assert!(!r.spend(1000));
    }
}
