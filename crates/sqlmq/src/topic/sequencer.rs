//! Running sequencing steps: right after local publishes, and for leftovers.
//!
//! Each client keeps one background task per topic it published to, with the set of that
//! topic's partitions written since it last ran (its `Backlog`, kept in the client's state). A publish that committed adds its partitions
//! and wakes the task, which runs steps over all of them at once (one transaction for every
//! partition written to, not one per partition) until nothing is pending, then sleeps until the
//! next wake: no polling, no cost while idle. Rows nobody local will wake for (a `publish_in`
//! whose transaction commits later, another process that died between its INSERT and its step)
//! are sequenced by readers: a group claim or a broadcast read sequences the partitions it finds
//! pending rows in.
//!
//! A backend whose publishing transaction gives the offsets itself
//! (`Publish::OFFSETS_AT_PUBLISH`: SQLite, one writer at a time) has nothing to sequence: no
//! task is started, and a publish wakes the local group members directly.

use std::sync::{Arc, Weak};

use crate::client::{Backlog, Client, Inner, Subject};
use crate::domain::Result;
use crate::store::Backend;
use crate::tx;

/// Most pending records one sequencing step gives offsets to, per partition it covers (one
/// short transaction).
pub(crate) const SEQUENCE_BATCH: usize = 1000;

/// Most partitions one step locks and reads (a topic with more is sequenced in groups).
const PARTITIONS_PER_STEP: usize = 64;

/// Sequence everything pending in `partitions` (distinct, ascending) of a topic, in steps of
/// up to [`PARTITIONS_PER_STEP`] partitions and [`SEQUENCE_BATCH`] records per partition.
/// Returns how many rows were consumed.
pub(crate) async fn sequence_partitions<B: Backend>(
    client: &Client<B>,
    topic_id: i32,
    partitions: &[i32],
) -> Result<usize> {
    if B::OFFSETS_AT_PUBLISH {
        return Ok(0); // records got their offsets in their publishing transactions
    }
    let store = client.store();
    let mut total = 0;
    for group in partitions.chunks(PARTITIONS_PER_STEP) {
        // As many records as steps of one partition each would take: the partitions share a
        // transaction, not a step's size.
        let limit = SEQUENCE_BATCH * group.len();
        loop {
            let n = tx::run(client.conns(), "sequence", |conn, _| {
                Box::pin(B::sequence_step(store, conn, topic_id, group, limit))
            })
            .await?;
            total += n;
            if n < limit {
                break;
            }
        }
    }
    if total > 0 {
        metrics::counter!(crate::telemetry::catalogue::RECORDS_SEQUENCED.name())
            .increment(total as u64);
        // Local group members waiting for records can claim them now.
        client.notify_local(Subject::Topic(topic_id));
    }
    Ok(total)
}

impl<B: Backend> Client<B> {
    /// Add `partitions` to what this client's sequencer of `topic_id` has to do, and wake (or
    /// start) it.
    pub(crate) fn sequence_soon(&self, topic_id: i32, partitions: impl IntoIterator<Item = i32>) {
        let sequencer = {
            let mut map = self.inner.sequencing.lock().expect("poisoned");
            match map.get(&topic_id) {
                Some(s) => Arc::clone(s),
                None => {
                    let s = Arc::new(Backlog::default());
                    map.insert(topic_id, Arc::clone(&s));
                    tokio::spawn(run(Arc::downgrade(&self.inner), topic_id, Arc::clone(&s)));
                    s
                }
            }
        };
        sequencer.dirty.lock().expect("poisoned").extend(partitions);
        sequencer.wake.notify_one();
    }
}

/// The task: on every wake, sequence the partitions written since the last, until the client
/// is gone.
async fn run<B: Backend>(client: Weak<Inner<B>>, topic_id: i32, sequencer: Arc<Backlog>) {
    loop {
        sequencer.wake.notified().await;
        let Some(inner) = client.upgrade() else {
            return;
        };
        let client = Client { inner };
        let partitions: Vec<i32> = std::mem::take(&mut *sequencer.dirty.lock().expect("poisoned"))
            .into_iter()
            .collect();
        if partitions.is_empty() {
            continue;
        }
        if let Err(e) = sequence_partitions(&client, topic_id, &partitions).await {
            // Readers sequence leftovers; the next publish wakes us again.
            tracing::warn!(topic_id, ?partitions, "sequencing failed: {e}");
        }
    }
}
