//! The storage seam: the one store type, what each backend implements, and the backends.
//!
//! The engine (`client`, `queue`, `topic`, `consume`, `worker`, `tx`) validates input, opens
//! transactions, retries, decides (what a failure leads to, which records a claim takes,
//! how far retention may go) and records metrics; for every read and write it calls the
//! store's methods, with domain types and the plain rows and parameter structs of `rows.rs`.
//! A backend reads and writes rows and nothing else: all SQL text, migrations and error
//! numbers live in its folder.
//!
//! `SqlStore<B>` (`body/`) is the one store type: its methods are inherent, written once over
//! the backend's statement tables. Where a backend's shape differs, [`Backend`] is made of
//! traits each backend implements once:
//!
//! | file | what |
//! |---|---|
//! | `server.rs` | [`Server`]: connecting, the BEGIN statements, server checks, clock |
//! | `queue.rs` | [`Claim`] (the queue claim, `take_in`), [`ScriptedSend`] (a send in one round trip) |
//! | `topic.rs` | [`Publish`] (pending rows and sequencing, or offsets at publish), [`ScriptedPublish`] |
//! | `follow.rs` | [`Follow`]: the commits that wake waiting consumers (binary log, WAL file) |
//! | `body/` | the store, and [`Dialect`](body::Dialect) (statement tables and hooks), [`Driver`](body::Driver) |
//! | `consume.rs` | what acks in a transaction of their own share |
//! | `rows.rs` | rows and parameters that cross the seam |
//! | `statements.rs` | statement texts: table-prefix expansion, bucketed list sizes |
//! | `errors.rs` | driver errors as [`Error`](crate::Error) |
//! | `mysql/` | the MySQL/MariaDB backend |
//! | `sqlite/` | the SQLite backend |
//!
//! The engine calls a backend's own operations on its type (`B::claim(store, conn, …)`).
//! One conformance suite (`crates/sqlmq/tests`) runs every guarantee against every backend.

pub(crate) mod body;
mod consume;
mod errors;
pub(crate) mod follow;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
mod queue;
pub(crate) mod rows;
mod server;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;
pub(crate) mod statements;
#[cfg(test)]
mod suite;

mod topic;

pub(crate) use body::limits::WHOLE_QUEUE;
pub(crate) use body::slots::{line_key_of_message, slot_key};

pub(crate) use body::SqlStore;
pub(crate) use body::durable::{ChildState, JournalRow, NewStep};
pub(crate) use consume::{ack_in_own_transaction, receipts_except};
pub(crate) use errors::register;
pub use follow::Follow;

pub use queue::{Claim, ScriptedSend};
pub use server::Server;
pub(crate) use server::{begin_pooled, begin_snapshot};
pub use topic::{Publish, ScriptedPublish};

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
pub trait Backend:
    sqlx::Database
    + sealed::Sealed
    + body::Dialect
    + Server
    + Claim
    + Publish
    + ScriptedSend
    + ScriptedPublish
    + Follow
{
    /// The URL scheme that picks this backend (`mysql`, `sqlite`).
    const SCHEME: &'static str;
}

mod sealed {
    /// Only sqlmq's own backends implement [`Backend`](super::Backend).
    pub trait Sealed {}
}
