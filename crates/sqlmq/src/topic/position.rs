//! Where a position (`earliest`, `latest`, an offset, a time) falls in each partition.

use crate::domain::{Result, StartAt};
use crate::store::Backend;
use crate::store::SqlStore;
use crate::store::rows::PartitionRow;

/// The offset `start` designates in each partition of the topic: its first retained record,
/// its end, the given offset (clamped to what is retained), or the first record sequenced at
/// or after the given time.
pub(crate) async fn offsets_at<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    topic_id: i32,
    start: StartAt,
) -> Result<Vec<(i32, i64)>> {
    let partitions = store.partitions(conn, topic_id).await?;
    let mut targets = Vec::with_capacity(partitions.len());
    for p in &partitions {
        let offset = match start {
            StartAt::Earliest => p.low_offset,
            StartAt::Latest => p.next_offset,
            StartAt::Offset(o) => o.clamp(p.low_offset, p.next_offset),
            StartAt::Time(t) => {
                let us = crate::domain::micros_of_time(t);
                offset_for_time::<B>(store, conn, topic_id, p, us).await?
            }
        };
        targets.push((p.partition, offset));
    }
    Ok(targets)
}

/// The first offset of `partition` sequenced at or after `at_us` (µs since the epoch): its
/// end when none is. Sequencing times never decrease within a partition, so this is a binary
/// search by primary key over the retained offsets.
pub(crate) async fn offset_for_time<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    topic_id: i32,
    partition: &PartitionRow,
    at_us: i64,
) -> Result<i64> {
    let (mut lo, mut hi) = (partition.low_offset, partition.next_offset);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match store
            .sequenced_at(conn, topic_id, partition.partition, mid)
            .await?
        {
            Some(us) if us >= at_us => hi = mid,
            Some(_) => lo = mid + 1,
            // Removed by retention meanwhile: everything below is gone too.
            None => lo = mid + 1,
        }
    }
    Ok(lo)
}

/// Point a group's cursors at `start` in every partition. Returns the new positions.
pub(crate) async fn move_cursors<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    topic_id: i32,
    group_id: i32,
    start: StartAt,
) -> Result<Vec<(i32, i64)>> {
    let targets = offsets_at::<B>(store, conn, topic_id, start).await?;
    store.set_cursors(conn, group_id, &targets).await?;
    Ok(targets)
}
