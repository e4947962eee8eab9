//! The library's internal procedures: a lone send (`send_plain.sql`, schema version 9), a claim
//! (`claim_vt.sql`, version 16; `claim_plain.sql` of version 10 and `claim_timed.sql` of 15
//! stay for the clients of those schemas) and a lone ack (`ack_plain.sql`, version 10), each one prepared
//! `CALL` in place of a text script of four or five statements.
//!
//! Why: a text script is answered statement by statement, and the client waits for every
//! answer; a `CALL` is one statement with one answer, its values bound, its statements parsed
//! once by the server (docs/BENCHMARKS.md, "Connections kept between transactions, and a lone
//! send as one statement", and "A claim and an ack as one statement each"). Each procedure
//! opens and commits a transaction of its own, so only the units that run in a transaction of
//! their own call them; an error leaves that transaction open, and the caller rolls it back.
//!
//! Where the server says a procedure is missing (a schema older than its version) or not
//! allowed (grants not yet applied again after `migrate`), the client warns once and takes the
//! text script for that operation from then on ([`OneStatement`]).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::domain::Error;

/// Whether a lone send, a claim, a lone ack and a lone group ack may each take the backend's
/// one-statement path (MySQL: its internal procedures, `store/mysql/procedures.rs`). Each is
/// cleared, for the client and its clones, the first time the server says its procedure is
/// missing or not allowed. And whether every text script must be one statement too (a
/// compound statement, on a Galera node: see `script.rs`).
#[derive(Debug)]
#[doc(hidden)]
pub struct OneStatement {
    pub send: AtomicBool,
    pub claim: AtomicBool,
    pub ack: AtomicBool,
    pub group_ack: AtomicBool,
    pub compound_scripts: AtomicBool,
}

impl Default for OneStatement {
    fn default() -> Self {
        OneStatement {
            send: AtomicBool::new(true),
            claim: AtomicBool::new(true),
            ack: AtomicBool::new(true),
            group_ack: AtomicBool::new(true),
            compound_scripts: AtomicBool::new(false),
        }
    }
}

/// ER_SP_DOES_NOT_EXIST: a schema older than the procedure's version.
const NO_SUCH_PROCEDURE: u16 = 1305;
/// ER_PROCACCESS_DENIED_ERROR: no `EXECUTE` on the procedure.
const PROCEDURE_DENIED: u16 = 1370;

/// Whether `err` is the server refusing a procedure before it ran (nothing begun or written).
pub(super) fn refused(err: &Error) -> bool {
    matches!(
        err.mysql_error_number(),
        Some(NO_SUCH_PROCEDURE | PROCEDURE_DENIED)
    )
}

/// Close the one-statement path `open` of `what` (a lone send, a claim, a lone ack) after the
/// server refused its procedure (of schema version `version`) with `err`; warns the first time.
pub(super) fn give_up(open: &AtomicBool, what: &str, version: i64, err: &Error) {
    if open.swap(false, Ordering::Relaxed) {
        tracing::warn!(
            error = %err,
            "the {what} procedure of schema version {version} is missing or not allowed: \
             {what}s take the text script (run `sqlmq migrate`, then apply `sqlmq grants` again)"
        );
    }
}
