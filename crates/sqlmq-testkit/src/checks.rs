//! Checks of sqlmq's storage invariants, and a recording handler.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use sqlmq::worker::Handler;
use sqlmq::{Backend, Delivery, JobContext, MessageId, Outcome};

use crate::backend::TestBackend;
use crate::db::TestDb;

/// Check the storage invariants of queues: every message is in exactly one state table, every
/// state row has its message, every ordering key has exactly one live head, every waiting keyed
/// message has its key. (Only primary-key lookups: these run on tables of 100 000 rows.)
pub async fn check_invariants<B: TestBackend>(db: &TestDb<B>) {
    check_invariants_at::<B>(&db.url).await;
}

/// [`check_invariants`] of the database at `url` (a server of the test's own).
pub async fn check_invariants_at<B: TestBackend>(url: &str) {
    let db = TestDb::<B>::at(url);
    let messages = db.scalar("SELECT COUNT(*) FROM sqlmq_messages").await;
    let placed = db
        .scalar(
            "SELECT COUNT(*) FROM (SELECT id FROM sqlmq_ready UNION ALL SELECT id FROM sqlmq_scheduled \
             UNION ALL SELECT id FROM sqlmq_leases UNION ALL SELECT id FROM sqlmq_dead \
             UNION ALL SELECT id FROM sqlmq_blocked UNION ALL SELECT id FROM sqlmq_waiting \
             UNION ALL SELECT id FROM sqlmq_cancels) s JOIN sqlmq_messages m ON m.id = s.id",
        )
        .await;
    let distinct = db
        .scalar(
            "SELECT COUNT(DISTINCT id) FROM (SELECT id FROM sqlmq_ready UNION ALL SELECT id FROM sqlmq_scheduled \
             UNION ALL SELECT id FROM sqlmq_leases UNION ALL SELECT id FROM sqlmq_dead \
             UNION ALL SELECT id FROM sqlmq_blocked UNION ALL SELECT id FROM sqlmq_waiting \
             UNION ALL SELECT id FROM sqlmq_cancels) s",
        )
        .await;
    let rows = db
        .scalar(
            "SELECT (SELECT COUNT(*) FROM sqlmq_ready) + (SELECT COUNT(*) FROM sqlmq_scheduled) + \
             (SELECT COUNT(*) FROM sqlmq_leases) + (SELECT COUNT(*) FROM sqlmq_dead) + \
             (SELECT COUNT(*) FROM sqlmq_blocked) + (SELECT COUNT(*) FROM sqlmq_waiting) + \
             (SELECT COUNT(*) FROM sqlmq_cancels)",
        )
        .await;
    assert_eq!(rows, placed, "state rows without a message");
    assert_eq!(rows, distinct, "messages in two state tables at once");
    assert_eq!(messages, distinct, "messages in no state table");
    let headless = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_key_heads k LEFT JOIN sqlmq_messages m ON m.id = k.head_id WHERE \
             m.id IS NULL OR ( \
             NOT EXISTS (SELECT 1 FROM sqlmq_ready r WHERE r.queue_id = m.queue_id AND r.priority = m.priority AND r.id = m.id) \
             AND NOT EXISTS (SELECT 1 FROM sqlmq_scheduled s WHERE s.id = m.id) \
             AND NOT EXISTS (SELECT 1 FROM sqlmq_leases l WHERE l.id = m.id) \
             AND NOT EXISTS (SELECT 1 FROM sqlmq_cancels c WHERE c.id = m.id))",
        )
        .await;
    assert_eq!(headless, 0, "every ordering key needs a live head");
    let keyless = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_blocked b WHERE NOT EXISTS (SELECT 1 FROM sqlmq_key_heads k \
             WHERE k.queue_id = b.queue_id AND k.ordering_key = b.ordering_key) \
             AND NOT EXISTS (SELECT 1 FROM sqlmq_key_slots s \
             WHERE s.queue_id = b.queue_id AND s.slot_key = b.ordering_key)",
        )
        .await;
    assert_eq!(keyless, 0, "blocked messages need their key row");
    let miscounted = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_key_slots s WHERE s.busy <> ( \
             SELECT COUNT(*) FROM sqlmq_messages m WHERE m.queue_id = s.queue_id \
             AND (m.ordering_key = s.slot_key OR (SUBSTR(m.ordering_key, 1, 1) = X'01' \
             AND SUBSTR(m.ordering_key, 2) = s.slot_key)) AND ( \
             EXISTS (SELECT 1 FROM sqlmq_ready r WHERE r.queue_id = m.queue_id AND r.priority = m.priority AND r.id = m.id) \
             OR EXISTS (SELECT 1 FROM sqlmq_scheduled c WHERE c.id = m.id) \
             OR EXISTS (SELECT 1 FROM sqlmq_leases l WHERE l.id = m.id) \
             OR EXISTS (SELECT 1 FROM sqlmq_cancels x WHERE x.id = m.id)))",
        )
        .await;
    assert_eq!(
        miscounted, 0,
        "a concurrency key's busy count is its messages admitted"
    );
    check_flows(&db).await;
}

/// The flow tables' invariants: a waiting message's counters are its dependencies not acked
/// and dead, nothing waits that could run, every tracked message carries the mark, and a
/// batch's counts are its members' states.
async fn check_flows<B: TestBackend>(db: &TestDb<B>) {
    let miscounted = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_flow_nodes n JOIN sqlmq_waiting w ON w.id = n.id \
             WHERE n.role = 0 AND (n.waiting <> (SELECT COUNT(*) FROM sqlmq_flow_edges e \
             JOIN sqlmq_flow_nodes p ON p.id = e.parent WHERE e.child = n.id AND p.state <> 1) \
             OR n.held <> (SELECT COUNT(*) FROM sqlmq_flow_edges e \
             JOIN sqlmq_flow_nodes p ON p.id = e.parent WHERE e.child = n.id AND p.state = 2))",
        )
        .await;
    assert_eq!(
        miscounted, 0,
        "a dependant's counters are its unmet dependencies"
    );
    let stuck = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_flow_nodes n JOIN sqlmq_waiting w ON w.id = n.id \
             WHERE n.role = 0 AND n.waiting <= 0 AND n.held <= 0",
        )
        .await;
    assert_eq!(
        stuck, 0,
        "a message with every dependency acked does not wait"
    );
    let unmarked = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_flow_nodes n JOIN sqlmq_messages m ON m.id = n.id \
             WHERE m.ordering_key IS NULL OR SUBSTR(m.ordering_key, 1, 1) <> X'01'",
        )
        .await;
    assert_eq!(unmarked, 0, "a tracked message's key carries the flow mark");
    let ended_alive = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_flow_nodes n JOIN sqlmq_messages m ON m.id = n.id \
             WHERE n.state IN (1, 3)",
        )
        .await;
    assert_eq!(
        ended_alive, 0,
        "a message recorded acked or cancelled is gone"
    );
    let counts = db
        .scalar(
            "SELECT COUNT(*) FROM sqlmq_batches b WHERE b.state < 2 AND (\
             b.pending <> (SELECT COUNT(*) FROM sqlmq_flow_nodes n \
               WHERE n.batch_id = b.id AND n.role = 0 AND n.state = 0) \
             OR b.succeeded <> (SELECT COUNT(*) FROM sqlmq_flow_nodes n \
               WHERE n.batch_id = b.id AND n.role = 0 AND n.state = 1) \
             OR b.members <> (SELECT COUNT(*) FROM sqlmq_flow_nodes n \
               WHERE n.batch_id = b.id AND n.role = 0))",
        )
        .await;
    assert_eq!(
        counts, 0,
        "an unfinished batch's counts are its members' states"
    );
}

/// A raw handler that records the id of every delivery it handles, then acks it.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<MessageId>>>);

impl Recorder {
    /// How many deliveries were handled.
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The distinct ids handled.
    pub fn ids(&self) -> HashSet<MessageId> {
        self.0.lock().unwrap().iter().copied().collect()
    }
}

impl<B: Backend> Handler<Delivery, B> for Recorder {
    type Error = String;

    fn handle(
        &self,
        delivery: Delivery,
        _ctx: JobContext<B>,
    ) -> impl Future<Output = Result<Outcome, String>> + Send {
        self.0.lock().unwrap().push(delivery.id);
        std::future::ready(Ok(Outcome::Done))
    }
}
