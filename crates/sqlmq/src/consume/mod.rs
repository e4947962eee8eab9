//! Consumption, one path for queues and cluster-mode consumer groups.
//!
//! | file | what |
//! |---|---|
//! | `fate.rs` | the decision for a claim that ends without an ack: retry after which delay, or dead letter |
//! | `settle.rs` | ack, fail, extend and lease releases, in our transaction or the caller's |
//! | `methods.rs` | the public settling methods of [`Queue`](crate::Queue), [`Group`](crate::Group) and [`Source`] |
//! | `source.rs` | [`SourceName`] and [`Source`]: "a queue, or a topic's group" |

mod fate;
pub(crate) mod methods;
mod settle;
mod source;

pub(crate) use settle::{Consumer, MAX_LEASE, MAX_RECEIVE, check_claim, check_take, lost_to_error};
pub use source::{Source, SourceName};
