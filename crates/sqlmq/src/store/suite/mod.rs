//! The store-level suite, in the spirit of River's `riverdrivertest`: each store trait method
//! exercised directly, against every backend, by the conformance machinery (`conformance!`
//! makes one test per backend, each on a throwaway database). The conformance suite
//! (`crates/sqlmq/tests/conformance/`) drives the public API; this one holds the seam itself to
//! its contract, edge values included (empty lists, the largest batch, huge durations), so
//! that the backends cannot drift apart behind an API that happens not to notice.
//!
//! Nothing here names a backend: every scenario is generic over [`SuiteBackend`]. The
//! consumer-group traits (`Groups`, `GroupClaim`, `GroupSettle`, `GroupDead`, `GroupState`) are
//! not covered yet.
//!
//! | file | traits |
//! |---|---|
//! | `processes.rs` | `Processes` |
//! | `queues.rs` | `Queues` |

mod processes;
mod queues;

use sqlmq_testkit::{TestBackend, TestDb};

use crate::Client;
use crate::store::Backend;

/// A backend the suite runs on: sqlmq's, with the test kit's throwaway databases.
pub(crate) trait SuiteBackend: Backend + TestBackend {}

impl<B: Backend + TestBackend> SuiteBackend for B {}

/// A fresh database, migrated, and a client on it as the runtime user (no DDL).
pub(crate) async fn fixture<B: SuiteBackend>() -> (TestDb<B>, Client<B>) {
    let db = TestDb::<B>::new().await;
    db.migrate().await;
    let client = Client::builder().open::<B>(&db.url).await.expect("connect");
    (db, client)
}
