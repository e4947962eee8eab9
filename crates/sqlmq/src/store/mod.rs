//! The storage seam: the interface every backend implements, and the backends.
//!
//! The engine (`client`, `queue`, `topic`, `consume`, `worker`, `tx`) validates input, opens
//! transactions, retries, decides (what a failure leads to, which records a claim takes,
//! how far retention may go) and records metrics; for every read and write it calls a
//! backend through the traits below, with domain types and the plain rows and parameter
//! structs of `rows.rs`. A backend reads and writes rows and nothing else: all SQL text,
//! migrations and error numbers live in its folder.
//!
//! | file | traits |
//! |---|---|
//! | `server.rs` | [`Server`] (connect, begin, server checks, clock), [`Schema`] (migrations) |
//! | `queue.rs` | [`Queues`], [`Enqueue`], [`ScriptedSend`], [`Claim`], [`Maintain`], [`Admin`], [`DeadLetters`], [`Browse`], [`Limits`] |
//! | `consume.rs` | [`QueueSettle`] (ack, fail, extend, release), [`Probe`] |
//! | `follow.rs` | [`Follow`]: the commits that wake waiting consumers (binary log, WAL file) |
//! | `topic.rs` | [`Topics`], [`Publish`], [`Stream`], [`Retention`] |
//! | `group.rs` | [`Groups`], [`GroupClaim`], [`GroupSettle`], [`GroupDead`], [`GroupState`] |
//! | `member.rs` | [`MemberDead`] (broadcast members' dead letters) |
//! | `process.rs` | [`Processes`] |
//! | `schedule.rs` | [`Schedules`] (recurring schedules) |
//! | `flow.rs` | [`Flows`] (batches, dependencies, results) |
//! | `rows.rs` | rows and parameters that cross the seam |
//! | `statements.rs` | statement texts: table-prefix expansion, bucketed list sizes |
//! | `mysql/` | the MySQL/MariaDB backend |
//! | `sqlite/` | the SQLite backend |
//!
//! A backend is a type implementing [`Backend`] (`sqlx::MySql`, `sqlx::Sqlite`), whose `Store`
//! implements every trait (together: [`Store`]). Engine code is generic over `B: Backend` and
//! imports [`prelude`] to call the traits' methods. One conformance suite
//! (`crates/sqlmq/tests`) runs every guarantee against every backend.

pub(crate) mod body;
mod consume;
mod errors;
mod flow;
pub(crate) mod follow;
mod group;
mod member;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
mod process;
mod queue;
pub(crate) mod rows;
mod schedule;
mod server;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
pub(crate) mod statements;
#[cfg(test)]
mod suite;

mod topic;

pub(crate) use body::limits::WHOLE_QUEUE;
pub(crate) use body::slots::{line_key_of_message, slot_key};
pub use consume::{Probe, QueueSettle};
pub(crate) use consume::{ack_in_own_transaction, receipts_except};
pub(crate) use errors::register;
pub use flow::Flows;
pub use follow::Follow;
pub use group::{GroupClaim, GroupDead, GroupSettle, GroupState, Groups};
pub use member::MemberDead;
pub use process::Processes;
pub use queue::{
    Admin, Browse, Claim, DeadLetters, Enqueue, Limits, Maintain, Queues, ScriptedSend,
};
pub use schedule::Schedules;
pub use server::{Schema, Server};
pub(crate) use server::{begin_pooled, begin_snapshot};
pub use topic::{Publish, Retention, ScriptedPublish, Stream, Topics};

/// A database sqlmq can store messages in: the URL scheme picks it, and a [`Client`] is
/// generic over it (`Client<MySql>` is the default).
///
/// It is a `sqlx` database type, so a backend's connections and transactions are sqlx's own:
/// the `_in` methods take `&mut B::Connection`, to which a `&mut sqlx::Transaction<'_, B>`
/// coerces. Implemented by sqlmq's backends only (MySQL/MariaDB and SQLite); see
/// `docs/ARCHITECTURE.md` ("The seam") for how to add one.
///
/// ```
/// fn scheme<B: sqlmq::Backend>() -> &'static str { B::SCHEME }
/// assert_eq!(scheme::<sqlmq::MySql>(), "mysql");
/// assert_eq!(scheme::<sqlmq::Sqlite>(), "sqlite");
/// ```
///
/// [`Client`]: crate::Client
pub trait Backend: sqlx::Database + sealed::Sealed + body::Dialect {
    /// Every statement of this backend.
    #[doc(hidden)]
    type Store: Store<Self>;

    /// The URL scheme that picks this backend (`mysql`, `sqlite`).
    const SCHEME: &'static str;
}

/// Declare [`Store`] (every store trait at once, implemented for any type that implements
/// them all) and the [`prelude`] that brings their methods into scope, from one list.
macro_rules! store_traits {
    ($($t:ident),* $(,)?) => {
        /// Everything a backend's store implements.
        pub trait Store<B: Backend>: $($t<B> +)* Clone + Send + Sync + 'static {}

        impl<B: Backend, T> Store<B> for T where T: $($t<B> +)* Clone + Send + Sync + 'static {}

        /// The store traits in scope, for calling their methods on `B::Store` (a bound on an
        /// associated type does not bring its traits' methods into scope by itself).
        pub(crate) mod prelude {
            pub(crate) use super::{$($t as _),*};
        }
    };
}

store_traits!(
    Server,
    Schema,
    Queues,
    Enqueue,
    ScriptedSend,
    ScriptedPublish,
    Claim,
    Maintain,
    Admin,
    DeadLetters,
    Browse,
    Limits,
    QueueSettle,
    Probe,
    Follow,
    Topics,
    Publish,
    Stream,
    Retention,
    Groups,
    GroupClaim,
    GroupSettle,
    GroupDead,
    GroupState,
    MemberDead,
    Processes,
    Schedules,
    Flows,
);

mod sealed {
    /// Only sqlmq's own backends implement [`Backend`](super::Backend).
    pub trait Sealed {}
}
