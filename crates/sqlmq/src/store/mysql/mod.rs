//! The MySQL/MariaDB backend: every SQL statement sqlmq runs, and its migrations.
//!
//! `sqlx::MySql` is the [`Backend`]. The store body (`store/body/`) runs most statements for
//! every backend from the statement tables this folder gives it (one `SQL` table per concept,
//! in the file named as the body's, gathered by `impl Dialect` here); what has a shape of its
//! own on MySQL is implemented here for `SqlStore<MySql>`. Methods take a connection already
//! inside a transaction when they need one (the engine opens it, at READ COMMITTED, and owns
//! retries); they never commit — except the claim, the lone ack and the send and publish
//! scripts, which open and commit their own transaction in fewer round trips (`script.rs`).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Backend`] and `Dialect` for `sqlx::MySql`: the tables, the hooks (`ack_queue_own`, `ack_group_one`, `publish`, `grants`) |
//! | `errors.rs` | `Driver`: error numbers and their classes |
//! | `connect.rs`, `tls.rs` | opening a pool (session settings, when to ping); TLS parameters |
//! | `server.rs` | `Server`: flavour, version, durability, the `SKIP LOCKED` self-test, clock |
//! | `schema.rs`, `migrate.rs` | the migrations' DDL; the version table's statements |
//! | `procedures.rs` | the stored procedures where the server refuses a script |
//! | `script.rs` | several statements in one round trip, values rendered as literals |
//! | `enqueue.rs`, `send_script.rs`, `send_plain.sql` | `ScriptedSend`: a send in one round trip; the enqueue table |
//! | `send_procedure.sql`, `ack_procedure.sql` | the SQL contract: `CALL sqlmq_send`, `CALL sqlmq_ack` |
//! | `claim.rs`, `claim_vt.sql` (`claim_plain.sql`, `claim_timed.sql`: versions 10's and 15's) | `Claim`: the `SKIP LOCKED` claim, one call or two round trips |
//! | `settle.rs`, `ack_plain.sql` | the settle table; the lone ack as one statement |
//! | `queues.rs`, `keys.rs`, `limits.rs`, `maintain.rs`, `admin.rs`, `dead.rs`, `browse.rs`, `probe.rs`, `processes.rs`, `schedules.rs`, `flows.rs` | the statement tables of the body's files of those names |
//! | `follow.rs` | `Follow`: the binary log followed for commits (wakeup hints) |
//! | `grants.rs` | the GRANT statements of each role |
//! | `topics.rs`, `stream.rs`, `retention.rs`, `member_dead.rs`, `groups.rs`, `group_claim.rs`, `group_settle.rs`, `group_dead.rs`, `group_state.rs` | the topic and group statement tables |
//! | `sequence.rs` | `Publish`: publishing to `topic_pending`, sequencing into `topic_log` |
//! | `publish_script.rs` | `ScriptedPublish`: a publish in one round trip |
//! | `group_ack.rs`, `ack_group_one.sql` | a lone consumer-group ack in the caller's transaction as one statement |
//! | `plans.rs`, `plans_topics.rs` | the EXPLAIN test of every hot statement |

pub(crate) mod admin;
pub(crate) mod browse;
pub(crate) mod claim;
pub(crate) mod connect;
pub(crate) mod dead;
pub(crate) mod durable;
pub(crate) mod enqueue;
pub(crate) mod errors;
pub(crate) mod fair;
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
pub(crate) mod running;
pub(crate) use procedures::OneStatement;
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
    type State = OneStatement;
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
    const SCHEME: &'static str = "mysql";
}

impl crate::store::sealed::Sealed for MySql {}
