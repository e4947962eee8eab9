//! How far behind a group is, and how busy each topic is.

use std::time::Duration;

use super::Topic;
use super::group::Group;
use super::position::offset_for_time;
use crate::client::Client;
use crate::domain::GroupMode;
use crate::domain::Result;
use crate::domain::time_from_micros;
use crate::domain::{GroupLag, MemberLag, PartitionLag, TopicStats};
use crate::store::Backend;
use crate::store::rows::GroupTable;
use crate::tx;

/// The default of a lag report, the same on every backend (declared on the default backend's
/// `Group` so that `Group::DEFAULT_MEMBER_SILENCE` needs no type annotation).
impl Group {
    /// How long a broadcast member may go without a checkpoint before [`Group::lag`] leaves it
    /// out of the group's backlog: one hour (choose another with [`Group::lag_with`]).
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// use sqlmq::Group;
    /// assert_eq!(Group::DEFAULT_MEMBER_SILENCE, std::time::Duration::from_secs(3600));
    /// // Members silent for a day still count:
    /// let lag = g.lag_with(24 * Group::DEFAULT_MEMBER_SILENCE).await?;
    /// # let _ = lag;
    /// # Ok(()) }
    /// ```
    pub const DEFAULT_MEMBER_SILENCE: Duration = Duration::from_secs(3600);
}

impl<B: Backend> Group<B> {
    /// The group's lag (see [`GroupLag`]), leaving out broadcast members silent for longer than
    /// [`Group::DEFAULT_MEMBER_SILENCE`].
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let lag = g.lag().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lag(&self) -> Result<GroupLag> {
        self.lag_with(Group::DEFAULT_MEMBER_SILENCE).await
    }

    /// The group's lag, leaving out broadcast members silent (no checkpoint) for longer than
    /// `member_silence`: a member that left without [`leave`](crate::topic::BroadcastReader::leave)
    /// must not hold the group's backlog up forever. Such members are still listed, marked
    /// [`silent`](crate::topic::MemberLag::silent), and their checkpoints kept for their return.
    ///
    /// ```no_run
    /// # async fn f(g: sqlmq::Group) -> sqlmq::Result<()> {
    /// let lag = g.lag_with(std::time::Duration::from_secs(600)).await?;
    /// for m in lag.members.iter().filter(|m| !m.silent) { println!("{}: {}", m.member, m.behind) }
    /// # Ok(()) }
    /// ```
    pub async fn lag_with(&self, member_silence: Duration) -> Result<GroupLag> {
        self.topic.client.require_schema()?;
        // One snapshot: a claim moves a record from the retries to the leases, and a release
        // moves it back; read by statements at different instants, such a record could be
        // counted in neither and a busy group reported drained.
        let lag = tx::snapshot(self.topic.client.conns(), |conn, _| {
            Box::pin(self.read_lag(conn, member_silence))
        })
        .await?;
        metrics::gauge!(crate::telemetry::catalogue::GROUP_LAG.name(), "group" => self.label())
            .set(lag.unconsumed as f64);
        if let Some(age) = lag.oldest_unconsumed_age {
            metrics::gauge!(crate::telemetry::catalogue::GROUP_LAG_SECONDS.name(), "group" => self.label())
                .set(age.as_secs_f64());
        }
        Ok(lag)
    }

    /// The lag as the reads on `conn` see it.
    async fn read_lag(
        &self,
        conn: &mut B::Connection,
        member_silence: Duration,
    ) -> Result<GroupLag> {
        let store = self.topic.client.store();
        let topic_id = self.topic.id();
        let parts = store.partitions(&mut *conn, topic_id).await?;
        let cursors = store.cursors(&mut *conn, self.id()).await?;
        let unsequenced: i64 = B::pending_partitions(store, &mut *conn, topic_id)
            .await?
            .values()
            .sum();
        let broadcast = self.config().mode == GroupMode::Broadcast;
        let (leases, retries, dead) = if broadcast {
            Default::default()
        } else {
            (
                store
                    .by_partition(&mut *conn, GroupTable::Leases, self.id())
                    .await?,
                store
                    .by_partition(&mut *conn, GroupTable::Retries, self.id())
                    .await?,
                store
                    .by_partition(&mut *conn, GroupTable::Dead, self.id())
                    .await?,
            )
        };
        let positions = if broadcast {
            store.all_positions(&mut *conn, self.id()).await?
        } else {
            Vec::new()
        };
        let silent_before = if positions.is_empty() {
            i64::MIN
        } else {
            let silence = i64::try_from(member_silence.as_micros()).unwrap_or(i64::MAX);
            B::now_us(store, &mut *conn).await?.saturating_sub(silence)
        };
        // Members seen within the silence window; the others do not hold the group back.
        let is_silent = |member: &str| {
            positions
                .iter()
                .filter(|x| x.member == member)
                .all(|x| x.updated_us < silent_before)
        };
        let mut lag = GroupLag {
            topic: self.topic.name().to_owned(),
            group: self.name().to_owned(),
            mode: self.config().mode,
            unconsumed: unsequenced.max(0) as u64,
            backlog: 0,
            in_flight: 0,
            retrying: 0,
            dead: 0,
            unsequenced: unsequenced.max(0) as u64,
            oldest_unconsumed_age: None,
            partitions: Vec::new(),
            members: Vec::new(),
        };
        for part in &parts {
            let p = part.partition;
            let cursor = cursors.iter().find(|c| c.0 == p).map_or(0, |c| c.1);
            let position = if broadcast {
                positions
                    .iter()
                    .filter(|x| x.partition == p && !is_silent(&x.member))
                    .map(|x| x.next_offset)
                    .min()
                    .unwrap_or(cursor)
            } else {
                cursor
            };
            let position = position.max(part.low_offset);
            let backlog = (part.next_offset - position).max(0) as u64;
            let (in_flight, min_lease) = leases.get(&p).copied().unwrap_or((0, i64::MAX));
            let (retrying, min_retry) = retries.get(&p).copied().unwrap_or((0, i64::MAX));
            let (dead_n, _) = dead.get(&p).copied().unwrap_or((0, 0));
            let mut oldest = i64::MAX;
            if backlog > 0 {
                oldest = position;
            }
            oldest = oldest.min(min_lease).min(min_retry);
            let age = if oldest == i64::MAX {
                None
            } else {
                store
                    .age_of(&mut *conn, topic_id, p, oldest)
                    .await?
                    .map(|us| Duration::from_micros(us.max(0) as u64))
            };
            lag.backlog += backlog;
            lag.in_flight += in_flight as u64;
            lag.retrying += retrying as u64;
            lag.dead += dead_n as u64;
            lag.oldest_unconsumed_age = lag.oldest_unconsumed_age.max(age);
            lag.partitions.push(PartitionLag {
                partition: p as u32,
                end: part.next_offset,
                position,
                backlog,
                in_flight: in_flight as u64,
                retrying: retrying as u64,
                dead: dead_n as u64,
                oldest_unconsumed_age: age,
            });
        }
        lag.unconsumed += lag.backlog + lag.in_flight + lag.retrying;
        let mut members: Vec<MemberLag> = Vec::new();
        for pos in &positions {
            if members.iter().any(|m| m.member == pos.member) {
                continue;
            }
            let mine: Vec<_> = positions
                .iter()
                .filter(|x| x.member == pos.member)
                .collect();
            let mut behind_by_partition = std::collections::BTreeMap::new();
            for part in &parts {
                let at = mine
                    .iter()
                    .find(|x| x.partition == part.partition)
                    .map_or_else(
                        || {
                            cursors
                                .iter()
                                .find(|c| c.0 == part.partition)
                                .map_or(0, |c| c.1)
                        },
                        |x| x.next_offset,
                    )
                    .max(part.low_offset);
                behind_by_partition
                    .insert(part.partition as u32, (part.next_offset - at).max(0) as u64);
            }
            let seen_us = mine.iter().map(|x| x.updated_us).max().unwrap_or(i64::MIN);
            members.push(MemberLag {
                member: pos.member.clone(),
                behind: behind_by_partition.values().sum(),
                checkpointed_at: time_from_micros(seen_us),
                behind_by_partition,
                silent: is_silent(&pos.member),
            });
        }
        lag.members = members;
        Ok(lag)
    }
}

impl<B: Backend> Topic<B> {
    /// The topic's size and its volume over the last `window` (see [`TopicStats`]).
    ///
    /// ```no_run
    /// # async fn f(t: sqlmq::Topic) -> sqlmq::Result<()> {
    /// let s = t.stats(std::time::Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn stats(&self, window: Duration) -> Result<TopicStats> {
        self.client.require_schema()?;
        let store = self.client.store();
        let mut conn = self.client.conns().read().await?;
        let parts = store.partitions(&mut conn, self.id()).await?;
        let groups = store.groups_of_topic(&mut conn, self.id()).await?.len();
        let now_us = B::now_us(store, &mut conn).await?;
        let since = now_us - window.as_micros().min(i64::MAX as u128) as i64;
        let mut stats = TopicStats {
            name: self.name().to_owned(),
            partitions: parts.len() as u32,
            records: 0,
            bytes: 0,
            total: 0,
            recent: 0,
            rate_per_s: 0.0,
            groups,
        };
        for p in &parts {
            stats.records += (p.next_offset - p.low_offset).max(0) as u64;
            stats.bytes += p.bytes.max(0) as u64;
            stats.total += p.next_offset.max(0) as u64;
            let from = offset_for_time::<B>(store, &mut conn, self.id(), p, since).await?;
            stats.recent += (p.next_offset - from).max(0) as u64;
        }
        stats.rate_per_s = stats.recent as f64 / window.as_secs_f64().max(1e-3);
        Ok(stats)
    }
}

impl<B: Backend> Client<B> {
    /// Every topic's size and volume over the last `window`, busiest first (by rate, then
    /// by records retained).
    ///
    /// ```no_run
    /// # async fn f(client: sqlmq::Client) -> sqlmq::Result<()> {
    /// let ranking = client.topic_stats(std::time::Duration::from_secs(300)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn topic_stats(&self, window: Duration) -> Result<Vec<TopicStats>> {
        let mut out = Vec::new();
        for topic in self.topics().await? {
            out.push(topic.stats(window).await?);
        }
        out.sort_by(|a, b| {
            b.rate_per_s
                .total_cmp(&a.rate_per_s)
                .then(b.records.cmp(&a.records))
                .then(a.name.cmp(&b.name))
        });
        Ok(out)
    }
}
