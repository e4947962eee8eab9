//! Errors: one [`Error`] type for every call, its [`ErrorClass`] (whether a retry can succeed),
//! and [`Result`].
//!
//! ```
//! use sqlmq::error::ErrorClass;
//!
//! fn worth_retrying(error: &sqlmq::Error) -> bool {
//!     matches!(error.class(), Some(ErrorClass::RetryTransaction | ErrorClass::Busy))
//! }
//! assert!(!worth_retrying(&sqlmq::Error::InvalidArgument("limit 0".into())));
//! ```

pub use crate::domain::{Error, ErrorClass, Result};
