//! A publish in one round trip: `START TRANSACTION`, one INSERT into `topic_pending` of the
//! records whose ids are not in the log yet, a check that it inserted every record, `COMMIT`,
//! as one [`Script`] — where the full publish pays four (its BEGIN, a read of the known ids,
//! the INSERT, its COMMIT).
//!
//! The known-id read becomes the INSERT's own `NOT EXISTS` on the log and on `topic_pending`
//! (an id pending already, committed after that read, still fails the INSERT on
//! `topic_pending`'s unique id). Either way the record is a resend, whose
//! answer (`duplicate`) the full publish knows: the script must then write nothing. An
//! `INSERT … SELECT … WHERE NOT EXISTS` that skips a row is no error, so the statement after it
//! makes one ([`Script::expect_changed`]): the server stops the script there, and
//! [`Script::run`] rolls the transaction back.

use sqlx::MySqlConnection;

use super::MySqlStore;
use super::script::{Lit, Script, changed_other_than_expected};
use crate::domain::Result;
use crate::store::ScriptedPublish;
use crate::store::rows::PendingBatch;
use crate::store::statements::MAX_LIST;

/// Largest script text (as the send's: a long text of literals parses more slowly than the
/// prepared statements of the full publish bind the same values).
const MAX_SCRIPT_BYTES: usize = 256 * 1024;

/// The records (`{rows}` of [`RECORD_ROW`]) whose ids neither the log nor `topic_pending`
/// holds. Both in one statement, so in one read view: a sequencing step moving the id from one
/// to the other commits both moves at once, and the view sees the id in one place or the
/// other, never in neither (the unique id of `topic_pending` alone would let a resend in once
/// the step had deleted the pending row).
const INSERT_NEW: &str = "INSERT INTO {p}topic_pending \
    (topic_id, partition_no, id, msg_key, headers, body, published_at) \
    SELECT v.t, v.pa, v.id, v.k, v.h, v.b, UTC_TIMESTAMP(6) FROM ({rows}) v \
    WHERE NOT EXISTS (SELECT 1 FROM {p}topic_log l FORCE INDEX (id) WHERE l.id = v.id) \
    AND NOT EXISTS (SELECT 1 FROM {p}topic_pending q FORCE INDEX (id) WHERE q.id = v.id)";
const RECORD_ROW: &str = "SELECT ? AS t, ? AS pa, ? AS id, ? AS k, ? AS h, ? AS b";

/// One publish, ready to run.
pub struct PublishScript(Script);

impl ScriptedPublish for sqlx::MySql {
    type PublishScript = PublishScript;

    fn prepare_publish_script(
        store: &MySqlStore,
        batch: &PendingBatch<'_>,
        budget: usize,
    ) -> Result<Option<PublishScript>> {
        let rows = batch.rows;
        let limit = budget.min(MAX_SCRIPT_BYTES);
        // Twice the bytes (hexadecimal), checked before rendering; the text again below.
        if rows.is_empty()
            || rows.len() > MAX_LIST
            || rows.iter().map(|r| 2 * r.bytes()).sum::<usize>() > limit
        {
            return Ok(None);
        }
        let t = i64::from(batch.topic_id);
        let args: Vec<Lit<'_>> = rows
            .iter()
            .flat_map(|r| {
                [
                    Lit::Int(t),
                    Lit::Int(r.partition.into()),
                    Lit::Bytes(r.id.bytes()),
                    r.key.into(),
                    r.headers.as_deref().map(str::as_bytes).into(),
                    Lit::Bytes(r.body),
                ]
            })
            .collect();
        let mut s = Script::begin(store);
        s.push(
            &store.st.list_text(INSERT_NEW, RECORD_ROW, rows.len()),
            &args,
        );
        s.expect_changed(rows.len());
        s.commit();
        if s.len() > limit {
            return Ok(None);
        }
        Ok(Some(PublishScript(s)))
    }

    async fn publish_script(
        _store: &MySqlStore,
        conn: &mut MySqlConnection,
        script: &PublishScript,
    ) -> Result<bool> {
        crate::failpoints::before_commit("publish").await;
        match script.0.run(conn).await {
            Ok(()) => Ok(true),
            Err(e) if e.is_duplicate_key() || changed_other_than_expected(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
