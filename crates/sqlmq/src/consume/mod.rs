//! Consumption shared by queues and cluster-mode consumer groups.

mod fate;

pub(crate) use fate::{RetryPolicy, decide};
