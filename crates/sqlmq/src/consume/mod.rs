//! Consumption, one path for queues and cluster-mode consumer groups.
//!
//! | file | what |
//! |---|---|
//! | `fate.rs` | the decision for a claim that ends without an ack: retry after which delay, or dead letter |
//! | `settle.rs` | ack, fail, extend and lease releases, in our transaction or the caller's |
//! | `methods.rs` | the public settling methods of [`Queue`](crate::Queue), [`Group`](crate::Group) and [`Source`](crate::source::Source) |
//!
//! It sits below `queue` and `topic`, which build their consumers on it, and knows neither:
//! what a consumer acts on is a [`SourceId`], a queue's or a group's id.

mod fate;
pub(crate) mod methods;
mod settle;

pub(crate) use settle::{
    Consumer, MAX_LEASE, MAX_RECEIVE, SourceId, check_claim, check_take, lost_to_error,
};
