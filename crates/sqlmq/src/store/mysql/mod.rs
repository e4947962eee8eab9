//! The MySQL/MariaDB backend: every SQL statement sqlmq runs, and its migrations.
//!
//! `sqlx::MySql` is the [`Backend`]; [`MySqlStore`] implements each store trait of the seam
//! (`store/*.rs`) in the file of its concept. Methods take a `&mut MySqlConnection` that is
//! already inside a transaction when they need one (the engine opens it, at READ COMMITTED,
//! and owns retries); they never commit — except the claim, `ack_own` and the send script, which
//! open and commit their own transaction in fewer round trips (`script.rs`).
//!
//! | file | implements | statements |
//! |---|---|---|
//! | `mod.rs` | [`Backend`] for `sqlx::MySql` | row decoding, id lists, multi-row inserts |
//! | `statements.rs` | | table-prefix expansion, bucketed list sizes, derived-table id lists |
//! | `errors.rs` | | error numbers and their classes |
//! | `connect.rs` | | opening a pool: session settings, when to ping |
//! | `tls.rs` | | TLS parameters: client keys in any PEM form, the follower's TLS options |
//! | `script.rs` | | several statements in one round trip, values rendered as literals |
//! | `server.rs` | `Server` | flavour/version/durability detection, `SKIP LOCKED` self-test, clock |
//! | `schema.rs` | | the migrations |
//! | `migrate.rs` | `Schema` | applying them, the schema version |
//! | `queues.rs` | `Queues` | queue rows: create, look up, pause |
//! | `send.rs` | `Enqueue` | messages, idempotency keys, routing to ready/scheduled |
//! | `send_script.rs` | | a send of plain messages in one round trip |
//! | `keys.rs` | | per-key FIFO: heads, blocked successors, release |
//! | `claim.rs` | `Claim` | the `SKIP LOCKED` claim |
//! | `settle.rs` | `Settle` | ack, fail, extend, releases (compare-and-set on the fencing token) |
//! | `maintain.rs` | `Maintain` | promote due messages, prune idempotency keys; queue releases |
//! | `member_dead.rs` | `MemberDead` | broadcast members' dead letters |
//! | `admin.rs` | `Admin` | counts, cancel, purge, key repair |
//! | `dead.rs` | `DeadLetters` | dead letters: list, redrive |
//! | `browse.rs` | `Browse` | messages by state, one by id or key (no locks) |
//! | `limits.rs` | `Limits` | a limited queue's limits row, read locked |
//! | `processes.rs` | `Processes` | worker process registry: register, heartbeat, find the dead |
//! | `schedules.rs` | `Schedules` | recurring schedules: the insert that keeps an existing row, the locked read |
//! | `probe.rs` | `Probe` | the idle worker's one-query wakeup probes |
//! | `follow.rs` | `Follow` | the binary log followed for commits (wake-up hints) |
//! | `topics.rs` | `Topics` | topic rows, partition counters, deleting a topic |
//! | `sequence.rs` | `Publish` | publishing to `topic_pending`, sequencing into `topic_log` |
//! | `stream.rs` | `Stream` | plain log reads: broadcast, queries, offsets by time, checkpoints |
//! | `retention.rs` | `Retention` | removing old records in primary-key-range chunks |
//! | `groups.rs` | `Groups` | consumer group rows, cursors, deleting a group |
//! | `group_claim.rs` | `GroupClaim` | the cluster claim's statements (`SKIP LOCKED` retries and cursors) |
//! | `group_settle.rs` | `GroupSettle` | group ack, failure, extend, lease releases; history events trimmed in SQL |
//! | `group_dead.rs` | `GroupDead` | group dead letters, waiting retries, replay |
//! | `group_state.rs` | `GroupState` | per-partition counts (lag), one record's rows (trace), timeouts |
//! | `plans.rs`, `plans_topics.rs` | | the EXPLAIN test of every hot statement |

pub(crate) mod admin;
pub(crate) mod browse;
pub(crate) mod claim;
pub(crate) mod connect;
pub(crate) mod dead;
pub(crate) mod enqueue;
pub(crate) mod errors;
pub(crate) mod flows;
mod follow;
pub(crate) mod grants;
mod group_ack;
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
#[cfg(test)]
mod plans;
#[cfg(test)]
mod plans_topics;
pub(crate) mod probe;
mod procedures;
pub(crate) mod processes;
mod publish_script;
pub(crate) mod queues;
pub(crate) mod retention;
mod schedules;
pub(crate) mod schema;
mod script;
mod send_script;
pub(crate) mod sequence;
pub(crate) mod server;
pub(crate) mod settle;

pub(crate) mod stream;
mod tls;
pub(crate) mod topics;

use sqlx::{MySql, MySqlConnection};

use crate::domain::Result;
use crate::store::{Backend, body};

/// Statement that opens a transaction of sqlmq's on a connection it does not own (a caller's,
/// or one opened for a check): READ COMMITTED set explicitly for this transaction (never the
/// server default, REPEATABLE READ, whose gap locks make claims deadlock with producers), sent
/// with `START TRANSACTION` in one round trip. The pool's own sessions are READ COMMITTED from
/// the moment they connect (`connect.rs`) and begin with a bare `START TRANSACTION`.
pub(crate) const BEGIN_READ_COMMITTED: &str =
    "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION";

/// SQL expression: microseconds since the Unix epoch of a `DATETIME(6)` column holding UTC.
/// `TIMESTAMPDIFF` is pure calendar arithmetic, unlike `UNIX_TIMESTAMP`, which depends on the
/// session time zone.
macro_rules! micros {
    ($col:literal) => {
        concat!(
            "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', ",
            $col,
            ")"
        )
    };
}
pub(crate) use micros;

/// Most placeholders MySQL accepts in one statement.
const MAX_PARAMS: usize = u16::MAX as usize;

/// The MySQL/MariaDB store: the body (`store/body/`) over this backend's statements.
pub type MySqlStore = crate::store::body::SqlStore<MySql>;

impl body::Dialect for MySql {
    const MAX_PARAMS: usize = MAX_PARAMS;
    body::statement_tables!();

    fn publish(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        batch: &crate::store::rows::PendingBatch<'_>,
    ) -> impl std::future::Future<Output = Result<()>> + Send {
        crate::store::Publish::insert_pending(store, conn, batch)
    }

    fn grants(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        role: crate::domain::GrantRole,
        user: &str,
        host: &str,
    ) -> impl std::future::Future<Output = Result<Vec<String>>> + Send {
        migrate::grants(store, conn, role, user, host)
    }

    fn ack_group_one(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        group_id: i32,
        receipt: &crate::domain::Receipt,
    ) -> impl std::future::Future<Output = Result<Option<bool>>> + Send {
        group_ack::ack_group_one(store, conn, group_id, receipt)
    }

    fn ack_queue_own(
        store: &MySqlStore,
        conn: &mut MySqlConnection,
        queue_id: i32,
        receipts: &[crate::domain::Receipt],
        acked: &std::sync::Mutex<Vec<crate::domain::Receipt>>,
        op: &'static str,
    ) -> impl std::future::Future<Output = Result<Vec<crate::domain::Receipt>>> + Send {
        settle::ack_queue_own(store, conn, queue_id, receipts, acked, op)
    }
}

impl Backend for MySql {
    type Store = MySqlStore;
    const SCHEME: &'static str = "mysql";
}

impl crate::store::sealed::Sealed for MySql {}
