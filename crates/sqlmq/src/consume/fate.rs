//! The one decision about a claim that ends without an ack, for queues and consumer groups
//! alike: retry after which delay, or dead-letter.

use std::time::Duration;

use crate::domain::{Backoff, Failure, Settlement};

/// Text recorded when a lease ran out.
pub(crate) const LEASE_EXPIRED: &str = "lease expired";

/// The retry settings of a queue or a group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetryPolicy<'a> {
    /// Attempts before a message becomes a dead letter.
    pub max_attempts: u32,
    /// Wait before the next attempt.
    pub backoff: &'a Backoff,
}

impl<'a> RetryPolicy<'a> {
    pub(crate) fn of(max_attempts: u32, backoff: &'a Backoff) -> RetryPolicy<'a> {
        RetryPolicy {
            max_attempts,
            backoff,
        }
    }
}

/// Decide what becomes of a claim that made `attempts` attempts and ended with `failure`.
///
/// Every claim counts as an attempt: a message whose consumers keep failing, crashing or
/// letting their leases run out reaches the dead letters after `max_attempts` deliveries
/// instead of looping forever. A snooze is not a failure and gives its attempt back.
pub(crate) fn decide<'a>(
    failure: Failure<'a>,
    attempts: u32,
    policy: RetryPolicy<'_>,
) -> Settlement<'a> {
    let exhausted = attempts >= policy.max_attempts;
    let retry_or_dead = |after: Duration, error: &'a str, outcome: &'static str| Settlement {
        retry_after: (!exhausted).then_some(after),
        attempts,
        error: Some(error),
        outcome: if exhausted { "dead" } else { outcome },
    };
    match failure {
        Failure::Retry { after, error, unit } => {
            let after = after.unwrap_or_else(|| policy.backoff.delay(attempts, unit));
            retry_or_dead(after, error, "failed")
        }
        Failure::Snooze { after } => Settlement {
            retry_after: Some(after),
            attempts: attempts.saturating_sub(1),
            error: None,
            outcome: "snoozed",
        },
        Failure::DeadLetter { error } => Settlement {
            retry_after: None,
            attempts,
            error: Some(error),
            outcome: "dead",
        },
        // Back in line at once (SQS-style), unless that was the last attempt.
        Failure::Expired => retry_or_dead(Duration::ZERO, LEASE_EXPIRED, "expired"),
        Failure::Released { reason } => retry_or_dead(Duration::ZERO, reason, "released"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(backoff: &Backoff) -> RetryPolicy<'_> {
        RetryPolicy {
            max_attempts: 3,
            backoff,
        }
    }

    #[test]
    fn retries_until_the_last_attempt_then_buries() {
        let ladder = Backoff::Ladder(vec![Duration::from_secs(10), Duration::from_secs(30)]);
        let failed = Failure::Retry {
            after: None,
            error: "boom",
            unit: 0.5,
        };
        let first = decide(failed, 1, policy(&ladder));
        assert_eq!(first.retry_after, Some(Duration::from_secs(10)));
        assert_eq!(
            (first.attempts, first.error, first.outcome),
            (1, Some("boom"), "failed")
        );
        assert_eq!(
            decide(failed, 2, policy(&ladder)).retry_after,
            Some(Duration::from_secs(30))
        );
        let last = decide(failed, 3, policy(&ladder));
        assert_eq!((last.retry_after, last.outcome), (None, "dead"));
        let explicit = Failure::Retry {
            after: Some(Duration::from_millis(5)),
            error: "x",
            unit: 0.5,
        };
        assert_eq!(
            decide(explicit, 1, policy(&ladder)).retry_after,
            Some(Duration::from_millis(5))
        );
    }

    #[test]
    fn snoozes_give_the_attempt_back_and_never_bury() {
        let b = Backoff::default();
        let s = decide(
            Failure::Snooze {
                after: Duration::from_secs(60),
            },
            3,
            policy(&b),
        );
        assert_eq!(
            (s.retry_after, s.attempts, s.error),
            (Some(Duration::from_secs(60)), 2, None)
        );
        assert_eq!(
            decide(
                Failure::Snooze {
                    after: Duration::ZERO
                },
                0,
                policy(&b)
            )
            .attempts,
            0
        );
    }

    #[test]
    fn expiries_and_releases_come_back_at_once_or_die_on_the_last_attempt() {
        let b = Backoff::default();
        let e = decide(Failure::Expired, 1, policy(&b));
        assert_eq!(
            (e.retry_after, e.error, e.outcome),
            (Some(Duration::ZERO), Some(LEASE_EXPIRED), "expired")
        );
        let r = decide(Failure::Released { reason: "gone" }, 3, policy(&b));
        assert_eq!(
            (r.retry_after, r.error, r.outcome),
            (None, Some("gone"), "dead")
        );
        let d = decide(Failure::DeadLetter { error: "never" }, 1, policy(&b));
        assert_eq!((d.retry_after, d.outcome), (None, "dead"));
    }
}
