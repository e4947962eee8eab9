//! The SQLite backend: every SQL statement sqlmq runs on SQLite, and its migrations.
//!
//! `sqlx::Sqlite` is the [`Backend`]. As for MySQL, the store body runs most statements from
//! this folder's statement tables, and what has a shape of its own here is implemented for
//! `SqlStore<Sqlite>`.
//!
//! SQLite admits one writer at a time per database file, and that shapes everything here:
//!
//! - **Every transaction sqlmq opens is `BEGIN IMMEDIATE`**: it takes the write lock at once,
//!   waiting up to the busy timeout for it. A deferred `BEGIN` that reads and then writes fails
//!   with `SQLITE_BUSY` at the write, without waiting, when another connection wrote meanwhile:
//!   the "database is locked" users of SQLite-backed queues meet.
//! - **One writer connection per process**, with reader connections beside it (`connect.rs`):
//!   the process's writers queue in the pool, in order, instead of polling the file lock in
//!   SQLite's busy handler; readers never wait (WAL).
//! - **No row locks**: a write transaction holds the whole database, so a claim reads the head
//!   of the queue and moves it without `SKIP LOCKED`, and nothing can take the rows in between.
//!   The lease, its fencing token and the database clock still decide every settlement.
//! - **Offsets are given at publish**: the publishing transaction holds the write lock until it
//!   commits, so commit order is publish order, and a record can take its partition's next
//!   offset inside that transaction. No sequencer, no pending table.
//! - **Times are integers**, microseconds since the Unix epoch (UTC), from the database clock
//!   (`unixepoch('subsec')`: the clock of the machine the file is on).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Backend`] and `Dialect` for `sqlx::Sqlite`: the tables, the hooks (`publish`, `group_history_events`: events appended in Rust) |
//! | `errors.rs` | `Driver`: result codes and their classes |
//! | `connect.rs` | opening the writer and the readers (WAL, busy timeout, synchronous) |
//! | `server.rs` | `Server`: version and settings, clock |
//! | `schema.rs`, `migrate.rs` | the migrations; the version table's statements |
//! | `enqueue.rs` | `ScriptedSend` (nothing to save in-process) and the enqueue table |
//! | `claim.rs` | `Claim`: the claim of the one writer |
//! | `publish.rs` | `Publish`, `ScriptedPublish`: straight into `topic_log`, with offsets |
//! | `follow.rs` | `Follow`: the database's files watched for commits (wakeup hints) |
//! | `queues.rs`, `keys.rs`, `settle.rs`, `limits.rs`, `maintain.rs`, `admin.rs`, `dead.rs`, `browse.rs`, `probe.rs`, `processes.rs`, `schedules.rs`, `flows.rs` | the statement tables of the body's files of those names |
//! | `topics.rs`, `stream.rs`, `retention.rs`, `member_dead.rs`, `groups.rs`, `group_claim.rs`, `group_settle.rs`, `group_dead.rs`, `group_state.rs` | the topic and group statement tables |

pub(crate) mod admin;
pub(crate) mod browse;
pub(crate) mod claim;
mod connect;
pub(crate) mod dead;
pub(crate) mod durable;
pub(crate) mod enqueue;
pub(crate) mod errors;
pub(crate) mod fair;
pub(crate) mod flows;
mod follow;
pub(crate) mod group_claim;
pub(crate) mod group_dead;
pub(crate) mod group_settle;
pub(crate) mod group_state;
pub(crate) mod groups;
pub(crate) mod keys;
mod limits;
pub(crate) mod maintain;
mod member_dead;
pub(crate) mod migrate;
pub(crate) mod probe;
pub(crate) mod processes;
pub(crate) mod publish;
pub(crate) mod queues;
pub(crate) mod retention;
pub(crate) mod running;
mod schedules;
pub(crate) mod schema;
pub(crate) mod server;
pub(crate) mod settle;
pub(crate) mod stream;
pub(crate) mod topics;

use sqlx::{Sqlite, SqliteConnection};

use crate::domain::Result;
use crate::store::{Backend, body};

/// Statement that opens every transaction sqlmq owns (see the module documentation).
pub(crate) const BEGIN_IMMEDIATE: &str = "BEGIN IMMEDIATE";

/// SQL expression: the database clock, in microseconds since the Unix epoch (millisecond
/// resolution: SQLite's clock). Use it in `concat!` to build statements.
macro_rules! now_us {
    () => {
        "CAST(unixepoch('subsec') * 1000000 AS INTEGER)"
    };
}
pub(crate) use now_us;

/// SQL expression: the RFC 3339 UTC text of the database clock with milliseconds
/// (`2026-11-23T20:01:13.123Z`), as error histories record it.
macro_rules! now_text {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    };
}
pub(crate) use now_text;

/// The SQLite store: the body (`store/body/`) over this backend's statements.
pub type SqliteStore = crate::store::body::SqlStore<Sqlite>;

impl body::Dialect for Sqlite {
    const MAX_PARAMS: usize = MAX_PARAMS;
    type State = ();
    body::statement_tables!();

    fn publish(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        batch: &crate::store::rows::PendingBatch<'_>,
    ) -> impl std::future::Future<Output = Result<()>> + Send {
        crate::store::Publish::insert_pending(store, conn, batch)
    }

    fn group_history_events(
        store: &SqliteStore,
        conn: &mut SqliteConnection,
        group_id: i32,
        rows: &mut [crate::store::body::HistoryRow<'_>],
    ) -> impl std::future::Future<Output = Result<()>> + Send {
        group_settle::history_events(store, conn, group_id, rows)
    }
}

impl Backend for Sqlite {
    const SCHEME: &'static str = "sqlite";
}

impl crate::store::sealed::Sealed for Sqlite {}

/// SQLite's limit of bound parameters per statement (`SQLITE_MAX_VARIABLE_NUMBER`).
pub(crate) const MAX_PARAMS: usize = 32_766;
