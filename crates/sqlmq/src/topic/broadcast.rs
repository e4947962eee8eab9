//! Broadcast members: every member reads every record in offset order, at its own position.

use std::collections::BTreeMap;

use super::group::Group;
use super::position::offsets_at;
use crate::domain::StreamRecord;
use crate::domain::validate_name;
use crate::domain::{Error, Result};
use crate::domain::{GroupMode, StartAt};
use crate::store::Backend;

/// One member of a broadcast group: reads every record of every partition in offset order,
/// keeping its own position per partition. No acks, no retries; [`checkpoint`] saves the
/// position, so that a member restarted under the same name resumes there (at-least-once for
/// what was read after the last checkpoint). A member without a checkpoint starts where the
/// group starts (its creation's [`StartAt`], or its last reset).
///
/// [`checkpoint`]: BroadcastReader::checkpoint
///
/// ```no_run
/// # async fn f(topic: sqlmq::Topic) -> sqlmq::Result<()> {
/// let cache = topic.create_group("cache-invalidation", sqlmq::GroupConfig::broadcast(), sqlmq::topic::StartAt::Latest).await?;
/// let mut reader = cache.reader("web-1").await?;
/// loop {
///     let batch = reader.poll(100).await?;
///     for r in &batch { println!("{}:{} {:?}", r.partition, r.offset, r.key) }
///     reader.checkpoint().await?;
///     if batch.is_empty() { tokio::time::sleep(std::time::Duration::from_millis(100)).await }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct BroadcastReader<B: Backend = crate::DefaultBackend> {
    group: Group<B>,
    member: String,
    /// Next offset to read, per partition.
    positions: BTreeMap<i32, i64>,
    /// Where the next poll starts (round robin over partitions).
    turn: usize,
}

impl<B: Backend> Group<B> {
    /// A broadcast member named `member` (a stable name, such as a host name, so that a
    /// restart resumes from the member's checkpoint).
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let reader = g.reader("node-a").await?;
    /// # Ok(()) }
    /// ```
    pub async fn reader(&self, member: &str) -> Result<BroadcastReader<B>> {
        validate_name("member", member)?;
        if self.config().mode != GroupMode::Broadcast {
            return Err(Error::InvalidArgument(format!(
                "group {} is a cluster group: consume it with receive",
                self.label()
            )));
        }
        self.topic.client.require_schema()?;
        let mut reader = BroadcastReader {
            group: self.clone(),
            member: member.to_owned(),
            positions: BTreeMap::new(),
            turn: 0,
        };
        reader.load().await?;
        Ok(reader)
    }
}

impl<B: Backend> Group<B> {
    /// Up to `n` records of partition `p` from member `member`'s position `at`, in offset
    /// order and without holes, and the position after them. Records removed by retention
    /// before the member read them are skipped (with a warning): the position moves to the
    /// partition's first retained offset.
    pub(crate) async fn read_partition(
        &self,
        conn: &mut B::Connection,
        member: &str,
        p: i32,
        at: i64,
        n: usize,
    ) -> Result<(Vec<StreamRecord>, i64)> {
        let store = self.topic.client.store();
        let topic_id = self.topic.id();
        let rows = store.read_from(conn, topic_id, p, at, n).await?;
        let Some(first) = rows.first() else {
            return Ok((rows, at));
        };
        let mut expect = at;
        if first.offset != at {
            // Only retention moves a partition's start: then the records are gone.
            let low = store
                .partitions(conn, topic_id)
                .await?
                .into_iter()
                .find(|r| r.partition == p)
                .map_or(0, |r| r.low_offset);
            if low <= at || first.offset > low {
                tracing::error!(partition = p, at, first = first.offset, "gap in the log");
                return Ok((Vec::new(), at));
            }
            tracing::warn!(
                group = self.label(),
                member,
                partition = p,
                skipped = low - at,
                "records removed by retention before this member read them"
            );
            expect = low;
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            if r.offset != expect {
                break; // never deliver past a hole
            }
            expect += 1;
            out.push(r);
        }
        Ok((out, expect))
    }
}

impl<B: Backend> BroadcastReader<B> {
    /// The member's name.
    ///
    /// ```no_run
    /// # fn f(r: sqlmq::topic::BroadcastReader) { println!("{}", r.member()); }
    /// ```
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The group read.
    ///
    /// ```no_run
    /// # fn f(r: sqlmq::topic::BroadcastReader) { println!("{}", r.group().name()); }
    /// ```
    pub fn group(&self) -> &Group<B> {
        &self.group
    }

    /// The next offset to read in each partition.
    ///
    /// ```no_run
    /// # fn f(r: sqlmq::topic::BroadcastReader) { for (p, o) in r.positions() { println!("{p}: {o}") } }
    /// ```
    pub fn positions(&self) -> Vec<(u32, i64)> {
        self.positions
            .iter()
            .map(|(p, o)| (*p as u32, *o))
            .collect()
    }

    /// Positions: the member's checkpoint, else the group's start; partitions added since
    /// start at 0.
    async fn load(&mut self) -> Result<()> {
        let client = &self.group.topic.client;
        let store = &client.inner.db.store;
        let mut conn = client.conns().read().await?;
        let saved = store
            .positions(&mut conn, self.group.id(), &self.member)
            .await?;
        for (p, start) in store.cursors(&mut conn, self.group.id()).await? {
            let at = saved.get(&p).copied().unwrap_or(start);
            self.positions.entry(p).or_insert(at);
        }
        Ok(())
    }

    /// Read up to `n` (1 to 1000, [`Queue::MAX_RECEIVE`](crate::Queue::MAX_RECEIVE)) records,
    /// continuing from the member's positions: in offset order within each partition,
    /// partitions taken in turn. Empty when the member is at the
    /// end of every partition.
    ///
    /// ```no_run
    /// # async fn f(mut r: sqlmq::topic::BroadcastReader) -> sqlmq::Result<()> {
    /// let records = r.poll(100).await?;
    /// # Ok(()) }
    /// ```
    pub async fn poll(&mut self, n: usize) -> Result<Vec<StreamRecord>> {
        if n == 0 || n > crate::consume::MAX_RECEIVE {
            return Err(Error::InvalidArgument(format!(
                "n must be 1..={}, got {n}",
                crate::consume::MAX_RECEIVE
            )));
        }
        let out = self.read(n).await?;
        if !out.is_empty() {
            return Ok(out);
        }
        // At the end: records may wait for their offsets, or partitions may have been added.
        if self.group.topic.sequence_pending().await? > 0 {
            return self.read(n).await;
        }
        if self.positions.len() < self.group.topic.current_partitions().await? as usize {
            self.load().await?;
            return self.read(n).await;
        }
        Ok(out)
    }

    async fn read(&mut self, n: usize) -> Result<Vec<StreamRecord>> {
        let client = &self.group.topic.client;
        let mut conn = client.conns().read().await?;
        let partitions: Vec<i32> = self.positions.keys().copied().collect();
        let mut out = Vec::new();
        for i in 0..partitions.len() {
            if out.len() >= n {
                break;
            }
            let p = partitions[(self.turn + i) % partitions.len()];
            let at = self.positions[&p];
            let (rows, next) = self
                .group
                .read_partition(&mut conn, &self.member, p, at, n - out.len())
                .await?;
            out.extend(rows);
            self.positions.insert(p, next);
        }
        self.turn = self.turn.wrapping_add(1);
        Ok(out)
    }

    /// Save the member's positions: a member restarted under this name resumes from here.
    ///
    /// ```no_run
    /// # async fn f(r: sqlmq::topic::BroadcastReader) -> sqlmq::Result<()> {
    /// r.checkpoint().await?;
    /// # Ok(()) }
    /// ```
    pub async fn checkpoint(&self) -> Result<()> {
        let client = &self.group.topic.client;
        let mut conn = client.conns().acquire().await?;
        let positions: Vec<(i32, i64)> = self.positions.iter().map(|(p, o)| (*p, *o)).collect();
        client
            .inner
            .db
            .store
            .save_positions(&mut conn, self.group.id(), &self.member, &positions)
            .await
    }

    /// Move this member to `start` (in memory; [`checkpoint`](Self::checkpoint) to keep it).
    ///
    /// ```no_run
    /// # async fn f(mut r: sqlmq::topic::BroadcastReader) -> sqlmq::Result<()> {
    /// r.seek(sqlmq::topic::StartAt::Earliest).await?;
    /// # Ok(()) }
    /// ```
    pub async fn seek(&mut self, start: StartAt) -> Result<()> {
        let client = &self.group.topic.client;
        let mut conn = client.conns().acquire().await?;
        let offsets =
            offsets_at::<B>(client.store(), &mut conn, self.group.topic.id(), start).await?;
        self.positions = offsets.into_iter().collect();
        Ok(())
    }

    /// Leave the group for good: forget this member's checkpoint.
    ///
    /// ```no_run
    /// # async fn f(r: sqlmq::topic::BroadcastReader) -> sqlmq::Result<()> {
    /// r.leave().await?;
    /// # Ok(()) }
    /// ```
    pub async fn leave(self) -> Result<()> {
        let client = &self.group.topic.client;
        let mut conn = client.conns().acquire().await?;
        client
            .store()
            .delete_positions(&mut conn, self.group.id(), Some(&self.member))
            .await
            .map(drop)
    }
}
