//! The ack of one cluster-group receipt inside the caller's transaction as one prepared
//! `CALL {p}ack_group_one(…)` (`ack_group_one.sql`, schema version 11, see `procedures.rs`) in
//! place of three round trips (the lease locked, deleted, the history written): what a
//! worker's job transaction runs before its COMMIT, and the acker's lone ack.

use std::sync::atomic::Ordering;

use super::MySqlStore;
use super::procedures;
use super::settle::{ACK_DONE, ACK_LOST};
use crate::domain::{Error, GROUP_EVENTS_KEPT, Receipt, Result};
use crate::store::body::group_state::STATE_ACKED;

/// The procedure's call: group, id, token, the acked state, the events kept.
const CALL_ACK_GROUP_ONE: &str = "CALL {p}ack_group_one(?, ?, ?, ?, ?)";

/// `Some(held)` when the procedure ran (see `ack_group_one.sql`), `None` when the server
/// refused it (a schema older than version 11, or no `EXECUTE` yet): nothing was done, and the
/// caller takes the statements.
pub(super) async fn ack_group_one(
    store: &MySqlStore,
    conn: &mut sqlx::MySqlConnection,
    group_id: i32,
    receipt: &Receipt,
) -> Result<Option<bool>> {
    if !store.state.group_ack.load(Ordering::Relaxed) {
        return Ok(None);
    }
    // All of the answer, to its final OK.
    let called = sqlx::query_scalar::<_, i64>(store.st.get(CALL_ACK_GROUP_ONE))
        .bind(group_id)
        .bind(receipt.id.bytes())
        .bind(receipt.token as i64)
        .bind(STATE_ACKED)
        .bind(GROUP_EVENTS_KEPT as i64)
        .fetch_all(&mut *conn)
        .await
        .map_err(Error::from);
    match called {
        Ok(answer) => match answer[..] {
            [ACK_DONE] => Ok(Some(true)),
            [ACK_LOST] => Ok(Some(false)),
            _ => Err(Error::Corrupt(format!(
                "the group ack procedure answered {answer:?}"
            ))),
        },
        Err(e) if procedures::refused(&e) => {
            procedures::give_up(&store.state.group_ack, "group ack", 11, &e);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
