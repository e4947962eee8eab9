//! What a handler returns: `None` (handled: ack), or one of [`Retry`], [`Snooze`],
//! [`DeadLetter`], [`Settled`].

use pyo3::prelude::*;

use crate::convert;

/// A failed attempt, retried after `after` seconds (counts toward the queue's max attempts);
/// `reason` goes into the error history.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct Retry {
    after: f64,
    reason: String,
}

#[pymethods]
impl Retry {
    #[new]
    #[pyo3(signature = (after, reason=String::new()))]
    fn new(after: f64, reason: String) -> PyResult<Retry> {
        convert::seconds("after", after)?;
        Ok(Retry { after, reason })
    }
}

/// Not now: deliver the message again after `after` seconds, the attempt not counted.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct Snooze {
    after: f64,
}

#[pymethods]
impl Snooze {
    #[new]
    fn new(after: f64) -> PyResult<Snooze> {
        convert::seconds("after", after)?;
        Ok(Snooze { after })
    }
}

/// Give up: make the message a dead letter now with `reason`, whatever its attempts left.
#[pyclass(module = "sqlmq._sqlmq", frozen, get_all)]
pub(crate) struct DeadLetter {
    reason: String,
}

#[pymethods]
impl DeadLetter {
    #[new]
    fn new(reason: String) -> DeadLetter {
        DeadLetter { reason }
    }
}

/// The handler acked the message itself, with `CALL sqlmq_ack(queue, receipt)` in its own
/// transaction (MySQL/MariaDB): the worker leaves it as it is. Should that transaction have
/// rolled back, the message comes back when its lease ends.
#[pyclass(module = "sqlmq._sqlmq", frozen)]
pub(crate) struct Settled;

#[pymethods]
impl Settled {
    #[new]
    fn new() -> Settled {
        Settled
    }
}

/// The library's outcome of what a handler returned.
pub(crate) fn outcome_of(answer: &Bound<'_, PyAny>) -> Result<sqlmq::Outcome, String> {
    if answer.is_none() {
        return Ok(sqlmq::Outcome::Done);
    }
    let secs = |s: f64| std::time::Duration::from_secs_f64(s);
    if let Ok(r) = answer.cast::<Retry>() {
        let r = r.get();
        return Ok(sqlmq::Outcome::Retry {
            after: secs(r.after),
            reason: r.reason.clone(),
        });
    }
    if let Ok(s) = answer.cast::<Snooze>() {
        return Ok(sqlmq::Outcome::Snooze(secs(s.get().after)));
    }
    if let Ok(d) = answer.cast::<DeadLetter>() {
        return Ok(sqlmq::Outcome::DeadLetter(d.get().reason.clone()));
    }
    if answer.cast::<Settled>().is_ok() {
        return Ok(sqlmq::Outcome::Settled);
    }
    Err(format!(
        "the handler returned {}: return None (done), sqlmq.Retry, sqlmq.Snooze, sqlmq.DeadLetter or sqlmq.Settled",
        answer
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "a value".into())
    ))
}
