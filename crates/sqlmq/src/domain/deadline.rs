//! Deadlines: when a delivery's time is up, and why.
//!
//! A message may carry a deadline (a time on the database's clock) and a run timeout (how long
//! each attempt may run, from its claim). Both are read by the claim with the message; the
//! claim's own clock says whether the deadline passed before it, and the claim's time plus the
//! run timeout says when a running attempt must stop. Past either, the message becomes a dead
//! letter with the reason, and is never delivered again.

use std::time::Duration;

#[cfg(test)]
use std::time::SystemTime;

use super::message::Delivery;

/// The reason recorded when a message's deadline passed.
pub(crate) const DEADLINE_PASSED: &str = "deadline passed";

/// Whether `d`'s deadline passed before its claim (by the claim's clock): it is dead-lettered
/// instead of handed out.
pub(crate) fn overdue(d: &Delivery) -> bool {
    d.deadline.is_some_and(|at| at <= d.claimed_at)
}

/// When a delivery's attempt must stop: how long after its claim, and the reason recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TimeUp {
    /// From the claim (database clock) to the stop.
    pub after: Duration,
    pub reason: String,
}

/// The earlier of `d`'s deadline and its run timeout, if it has either.
pub(crate) fn time_up(d: &Delivery) -> Option<TimeUp> {
    let by_deadline = d.deadline.map(|at| TimeUp {
        after: at.duration_since(d.claimed_at).unwrap_or(Duration::ZERO),
        reason: DEADLINE_PASSED.to_owned(),
    });
    let by_timeout = d.run_timeout.map(|after| TimeUp {
        after,
        reason: format!("run timeout of {} exceeded", humantime_like(after)),
    });
    match (by_deadline, by_timeout) {
        (Some(a), Some(b)) => Some(if b.after < a.after { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// `d` as whole milliseconds or seconds, the way the CLI takes it ("250ms", "30s").
fn humantime_like(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivery claimed at `claimed_at` with this deadline and run timeout.
    fn delivery(
        claimed_at: SystemTime,
        deadline: Option<SystemTime>,
        run_timeout: Option<Duration>,
    ) -> Delivery {
        Delivery {
            id: crate::domain::MessageId::new(),
            token: 1,
            attempt: 1,
            priority: 0,
            ordering_key: None,
            concurrency_key: None,
            idempotency_key: None,
            headers: Default::default(),
            body: Vec::new(),
            enqueued_at: claimed_at,
            lease_expires_at: claimed_at,
            deadline,
            run_timeout,
            partition: None,
            offset: None,
            tracked: false,
            claimed_at,
        }
    }

    #[test]
    fn the_earlier_of_deadline_and_run_timeout_stops_the_attempt() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let secs = Duration::from_secs;
        assert_eq!(time_up(&delivery(now, None, None)), None);
        let d = delivery(now, Some(now + secs(10)), Some(secs(30)));
        assert_eq!(time_up(&d).unwrap().after, secs(10));
        assert_eq!(time_up(&d).unwrap().reason, DEADLINE_PASSED);
        let d = delivery(now, Some(now + secs(10)), Some(Duration::from_millis(250)));
        let up = time_up(&d).unwrap();
        assert_eq!(up.after, Duration::from_millis(250));
        assert_eq!(up.reason, "run timeout of 250ms exceeded");
        assert_eq!(
            time_up(&delivery(now, None, Some(secs(5)))).unwrap().reason,
            "run timeout of 5s exceeded"
        );
    }

    #[test]
    fn a_deadline_at_or_before_the_claim_is_overdue() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert!(overdue(&delivery(now, Some(now), None)));
        assert!(overdue(&delivery(
            now,
            Some(now - Duration::from_micros(1)),
            None
        )));
        assert!(!overdue(&delivery(
            now,
            Some(now + Duration::from_micros(1)),
            None
        )));
        assert!(!overdue(&delivery(now, None, Some(Duration::from_secs(1)))));
        let late = delivery(now, Some(now - Duration::from_secs(1)), None);
        assert_eq!(time_up(&late).unwrap().after, Duration::ZERO);
    }
}
