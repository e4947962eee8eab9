//! Looking at messages: what a queue holds and what became of one message.
//!
//! A queue: [`Queue::browse`](crate::Queue::browse) pages through its messages in one
//! [`MessageState`] (ready, delayed, in flight, waiting on dependencies) as [`QueuedMessage`]s
//! in a [`MessagePage`], each with its [`AttemptError`]s; [`Queue::message`](crate::Queue::message)
//! finds one by id and [`Queue::messages_by_key`](crate::Queue::messages_by_key) those of an
//! ordering key (dead letters have their own list, `Queue::dead_letters`). A topic:
//! [`Topic::trace`](crate::Topic::trace) follows one record through every consumer group as a
//! [`Trace`], a [`GroupTrace`] per group with its [`TraceState`] and each attempt's
//! [`DeliveryEvent`]. The CLI's `sqlmq messages` and `sqlmq show`, the HTTP API and the
//! dashboard print these.
//!
//! ```no_run
//! use sqlmq::inspect::MessageState;
//!
//! # async fn f(queue: sqlmq::Queue) -> sqlmq::Result<()> {
//! let page = queue.browse(MessageState::InFlight, None, 20).await?;
//! for message in &page.messages {
//!     println!("{} held by {:?} after {} attempts", message.id, message.owner, message.attempts);
//! }
//! # Ok(()) }
//! ```

pub use crate::domain::{
    AttemptError, DeliveryEvent, GroupTrace, MessagePage, MessageState, QueuedMessage, Trace,
    TraceState,
};
