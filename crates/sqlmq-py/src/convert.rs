//! Values between Python and the library: bodies (`bytes` or `str`), durations (seconds as a
//! number), times (`datetime` in UTC), message ids (text), headers (`dict[str, str]`).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::InvalidInput;

/// A body: `bytes` as they are, `str` as its UTF-8.
pub(crate) fn body(value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.extract::<String>()?.into_bytes());
    }
    Err(InvalidInput::new_err(format!(
        "a body is bytes or str, not {}",
        value.get_type().name()?
    )))
}

/// Seconds (an `int` or `float`, 0 or more) as a duration.
pub(crate) fn seconds(what: &str, secs: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs)
        .map_err(|_| InvalidInput::new_err(format!("{what} must be 0 or more seconds, not {secs}")))
}

/// A message id from its text.
pub(crate) fn message_id(text: &str) -> PyResult<sqlmq::MessageId> {
    text.parse().map_err(crate::errors::to_py)
}

/// A time as an aware `datetime` in UTC.
pub(crate) fn datetime(py: Python<'_>, at: SystemTime) -> PyResult<Py<PyAny>> {
    let secs = match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    let module = py.import("datetime")?;
    let utc = module.getattr("timezone")?.getattr("utc")?;
    let dt = module
        .getattr("datetime")?
        .call_method1("fromtimestamp", (secs, utc))?;
    Ok(dt.unbind())
}

/// Headers as a `dict`.
pub(crate) fn headers(py: Python<'_>, headers: &BTreeMap<String, String>) -> PyResult<Py<PyAny>> {
    Ok(headers.clone().into_pyobject(py)?.into_any().unbind())
}
