//! Running sequencing steps: right after local publishes, and for leftovers.
//!
//! Each client keeps one background task per partition it published to. A publish that
//! committed wakes its partition's task, which runs sequencing steps until nothing is pending,
//! then sleeps until the next wake: no polling, no cost while idle. Rows nobody local will wake
//! for (a `publish_in` whose transaction commits later, another process that died between its
//! INSERT and its step) are sequenced by readers: a group claim or a broadcast read sequences
//! the partitions it finds pending rows in.
//!
//! A backend whose publishing transaction gives the offsets itself
//! (`Publish::OFFSETS_AT_PUBLISH`: SQLite, one writer at a time) has nothing to sequence: no
//! task is started, and a publish wakes the local group members directly.

use std::sync::{Arc, Weak};

use tokio::sync::Notify;

use crate::client::{Client, Inner, Subject};
use crate::domain::Result;
use crate::store::{Backend, Publish};
use crate::tx;

/// Most pending records one sequencing step gives offsets to (one short transaction).
pub(crate) const SEQUENCE_BATCH: usize = 1000;

/// Sequence everything pending in one partition, in steps of [`SEQUENCE_BATCH`]. Returns how
/// many rows were consumed.
pub(crate) async fn sequence_partition<B: Backend>(
    client: &Client<B>,
    topic_id: i32,
    partition: i32,
) -> Result<usize> {
    if <B::Store as Publish<B>>::OFFSETS_AT_PUBLISH {
        return Ok(0); // records got their offsets in their publishing transactions
    }
    let store = client.store();
    let mut total = 0;
    loop {
        let n = tx::run(client.pool(), "sequence", |conn, _| {
            Box::pin(store.sequence_step(conn, topic_id, partition, SEQUENCE_BATCH))
        })
        .await?;
        total += n;
        if n < SEQUENCE_BATCH {
            if total > 0 {
                metrics::counter!("sqlmq_records_sequenced_total").increment(total as u64);
                // Local group members waiting for records can claim them now.
                client.notify_local(Subject::Topic(topic_id));
            }
            return Ok(total);
        }
    }
}

impl<B: Backend> Client<B> {
    /// Wake (or start) this client's sequencer of `(topic_id, partition)`.
    pub(crate) fn sequence_soon(&self, topic_id: i32, partition: i32) {
        let notify = {
            let mut map = self.inner.sequencers.lock().expect("poisoned");
            match map.get(&(topic_id, partition)) {
                Some(n) => Arc::clone(n),
                None => {
                    let n = Arc::new(Notify::new());
                    map.insert((topic_id, partition), Arc::clone(&n));
                    tokio::spawn(run(
                        Arc::downgrade(&self.inner),
                        topic_id,
                        partition,
                        Arc::clone(&n),
                    ));
                    n
                }
            }
        };
        notify.notify_one();
    }
}

/// The task: sequence on every wake until the client is gone.
async fn run<B: Backend>(client: Weak<Inner<B>>, topic_id: i32, partition: i32, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        let Some(inner) = client.upgrade() else {
            return;
        };
        let client = Client { inner };
        if let Err(e) = sequence_partition(&client, topic_id, partition).await {
            // Readers sequence leftovers; the next publish wakes us again.
            tracing::warn!(topic_id, partition, "sequencing failed: {e}");
        }
    }
}
