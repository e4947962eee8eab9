//! Fair queues' statements: which queues are fair (read again within seconds), the virtual
//! start times of messages becoming ready, fairness keys' weights and backlogs. The arithmetic
//! is `domain/fair.rs`; each backend's claim reads ready in start-time order (MySQL: its
//! primary key, `(queue_id, priority, vt, id)`; SQLite: its `ready_fair` index).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Columns, SqlStore, Statement};
use crate::domain::{
    Error, FairnessKey, MessageId, NO_KEY, Result, check_weight, start_time, validate_key,
};
use crate::store::Backend;
use crate::store::rows::Entry;
use crate::store::statements::MAX_LIST;

/// Fair queues' statements that differ by backend.
pub struct FairSql {
    /// The earliest start time waiting at one priority (queue, priority): `vt`, in claim
    /// order.
    pub head: &'static str,
    /// The latest finish time given to any key of a queue (queue): `vt`.
    pub latest: &'static str,
    /// Save keys' finish times and count their messages made ready (`{list}` of
    /// `(?,?,1,?,?)`: queue, key, finish, messages), keeping the later finish time and a weight
    /// that is set.
    pub save_finish: &'static str,
    /// Set a key's weight (queue, key, weight), keeping its finish time.
    pub set_weight: &'static str,
    /// A queue's ready messages by fairness key (NULL: none), most first (queue, limit): key,
    /// count, age of the oldest in µs.
    pub backlog: &'static str,
    /// A queue's messages in flight (leased) by fairness key (queue): key, count.
    pub in_flight: &'static str,
}

/// Whether a queue is fair (queue): `fair`, 1 or NULL.
const MODE: &str = "SELECT fair FROM {p}queues WHERE id = ?";
/// Messages' fairness keys (`{list}` of ids): `id, fairness_key`.
const KEYS_OF: &str = "SELECT id, fairness_key FROM {p}messages WHERE id IN ({list})";
/// Keys' weights, finish times and messages made ready (queue, `{list}` of keys):
/// `fairness_key, weight, vt, arrived`.
const KEY_STATES: &str = "SELECT fairness_key, weight, vt, arrived FROM {p}fair_keys \
    WHERE queue_id = ? AND fairness_key IN ({list})";
/// A queue's keys whose weight is not the default (queue, limit): `fairness_key` (the weight
/// comes with the listed keys' states).
const WEIGHTED: &str = "SELECT fairness_key FROM {p}fair_keys \
    WHERE queue_id = ? AND weight <> 1 ORDER BY fairness_key LIMIT ?";
pub(crate) const INSERT_READY_FAIR: &str =
    "INSERT INTO {p}ready (queue_id, priority, id, attempts, token, vt) VALUES {list}";
pub(crate) const READY_FAIR_ROW: &str = "(?,?,?,?,?,?)";
pub(crate) const READY_FAIR_PARAMS: usize = 6;
const FINISH_ROW: &str = "(?,?,1,?,?)";
const FINISH_PARAMS: usize = 4;

/// A fairness key's row: its weight, the finish time of its last message placed, and how many
/// of its messages were made ready so far.
#[derive(Clone, Copy)]
struct KeyState {
    weight: u32,
    finish: i64,
    arrived: u64,
}

impl Default for KeyState {
    /// A key without a row: weight 1, nothing placed.
    fn default() -> Self {
        KeyState {
            weight: 1,
            finish: 0,
            arrived: 0,
        }
    }
}

/// How long a queue's mode read from its row is trusted: a queue made fair (or not) by another
/// process is seen within this. A message placed meanwhile the old way is claimed ahead of the
/// fair ones (no start time) or in start-time order on a queue no longer fair: never lost.
const MODE_TTL: Duration = Duration::from_secs(5);

/// Which queues are fair, as last read, shared by a store's clones.
#[derive(Debug, Default)]
pub(crate) struct FairModes(Mutex<HashMap<i32, (bool, Instant)>>);

impl FairModes {
    /// Remember `queue_id`'s mode, read now.
    pub(crate) fn note(&self, queue_id: i32, fair: bool) {
        let mut modes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        modes.insert(queue_id, (fair, Instant::now()));
    }

    /// `queue_id`'s mode if it was read within [`MODE_TTL`].
    pub(crate) fn known(&self, queue_id: i32) -> Option<bool> {
        let modes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        modes
            .get(&queue_id)
            .filter(|(_, at)| at.elapsed() < MODE_TTL)
            .map(|(fair, _)| *fair)
    }
}

/// A key's bytes as a string (keys are validated UTF-8 when sent).
fn key_of(bytes: Option<Vec<u8>>) -> Result<String> {
    String::from_utf8(bytes.unwrap_or_default())
        .map_err(|e| Error::Corrupt(format!("fairness key: {e}")))
}

/// A stored weight as a weight (the column is wider than the type).
fn weight_of(stored: i64) -> u32 {
    stored.clamp(1, u32::MAX.into()) as u32
}

/// Fair queues.
impl<B: Backend> SqlStore<B> {
    /// The state of each of `keys` of `queue_id` that has a row.
    async fn key_states(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        keys: &[&str],
    ) -> Result<HashMap<String, KeyState>> {
        let rows = self
            .fetch_key_list(conn, KEY_STATES, queue_id, keys)
            .await?;
        rows.iter()
            .map(|row| {
                let state = KeyState {
                    weight: weight_of(row.col(1)?),
                    finish: row.col(2)?,
                    arrived: row.col::<i64>(3)?.max(0) as u64,
                };
                Ok((key_of(row.col(0)?)?, state))
            })
            .collect()
    }

    /// The clock of `queue_id` at `priority`: the earliest start time waiting there; with
    /// nothing waiting, everything given a start time has been claimed, so the clock has passed
    /// every finish time given (`latest`, read once per placement).
    async fn clock(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        priority: i16,
        latest: &mut Option<i64>,
    ) -> Result<i64> {
        let head = self
            .query(B::FAIR.head)
            .arg(queue_id)
            .arg(priority)
            .first(conn)
            .await?;
        if let Some(row) = head {
            return row.col(0);
        }
        if let Some(at) = *latest {
            return Ok(at);
        }
        let row = self.query(B::FAIR.latest).arg(queue_id).first(conn).await?;
        let at = row.map(|r| r.col::<i64>(0)).transpose()?.unwrap_or(0);
        Ok(*latest.insert(at))
    }

    /// Whether `queue_id` is fair: as read within the last seconds, else read now.
    pub(crate) async fn is_fair(&self, conn: &mut B::Connection, queue_id: i32) -> Result<bool> {
        if let Some(fair) = self.fair_modes.known(queue_id) {
            return Ok(fair);
        }
        let row = self.query(MODE).arg(queue_id).first(conn).await?;
        let fair = match row {
            Some(row) => row.col::<Option<i64>>(0)?.is_some_and(|f| f != 0),
            None => false,
        };
        self.fair_modes.note(queue_id, fair);
        Ok(fair)
    }

    /// The start times of `entries` (messages of fair queue `queue_id` becoming ready), in
    /// order, with their keys' finish times saved.
    pub(crate) async fn start_times(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        entries: &[&(Entry, i64)],
    ) -> Result<Vec<i64>> {
        let ids: Vec<MessageId> = entries.iter().map(|(e, _)| e.id).collect();
        let mut key_by_id = HashMap::new();
        for row in self.fetch_id_list(conn, KEYS_OF, &ids).await? {
            key_by_id.insert(row.id_at(0)?, key_of(row.col(1)?)?);
        }
        let keys: Vec<&str> = entries
            .iter()
            .map(|(e, _)| key_by_id.get(&e.id).map_or(NO_KEY, String::as_str))
            .collect();
        // Weight and last finish time by key, and the messages placed now (sorted: the save
        // below writes the rows in key order, so that two senders' saves never wait for each
        // other crosswise).
        let mut states: BTreeMap<&str, KeyState> =
            keys.iter().map(|k| (*k, KeyState::default())).collect();
        let distinct: Vec<&str> = states.keys().copied().collect();
        for (key, stored) in self.key_states(conn, queue_id, &distinct).await? {
            if let Some(state) = states.get_mut(key.as_str()) {
                *state = KeyState {
                    arrived: 0,
                    ..stored
                };
            }
        }
        let mut clocks: HashMap<i16, i64> = HashMap::new();
        let mut latest = None;
        let mut starts = Vec::with_capacity(entries.len());
        for ((entry, _), key) in entries.iter().zip(&keys) {
            let clock = match clocks.get(&entry.priority) {
                Some(clock) => *clock,
                None => {
                    let clock = self
                        .clock(conn, queue_id, entry.priority, &mut latest)
                        .await?;
                    *clocks.entry(entry.priority).or_insert(clock)
                }
            };
            let state = states.get_mut(key).expect("every key has a state");
            let (start, finish) = start_time(state.finish, clock, state.weight);
            state.finish = finish;
            state.arrived += 1;
            starts.push(start);
        }
        let finishes: Vec<(&str, KeyState)> = states.into_iter().collect();
        self.insert_values(
            conn,
            B::FAIR.save_finish,
            FINISH_ROW,
            FINISH_PARAMS,
            &finishes,
            |q, (key, state)| {
                q.arg(queue_id)
                    .arg(key.as_bytes())
                    .arg(state.finish)
                    .arg(state.arrived as i64)
            },
        )
        .await?;
        Ok(starts)
    }

    /// Set fairness key `key`'s weight on `queue_id`.
    pub(crate) async fn set_weight(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        key: &str,
        weight: u32,
    ) -> Result<()> {
        if !key.is_empty() {
            validate_key("fairness key", key)?;
        }
        check_weight(weight)?;
        self.query(B::FAIR.set_weight)
            .arg(queue_id)
            .arg(key.as_bytes())
            .arg(i64::from(weight))
            .run(conn)
            .await?;
        Ok(())
    }

    /// The `limit` keys of `queue_id` with the most ready messages, then those with messages
    /// in flight and nothing ready, then those with a weight set and neither (at most `limit`
    /// each). A plain read; the backlog count reads every ready row of the queue.
    pub(crate) async fn fairness_keys(
        &self,
        conn: &mut B::Connection,
        queue_id: i32,
        limit: usize,
    ) -> Result<Vec<FairnessKey>> {
        let limit = limit.clamp(1, MAX_LIST) as i64;
        let mut keys = Vec::new();
        for row in self
            .query(B::FAIR.backlog)
            .arg(queue_id)
            .arg(limit)
            .rows(conn)
            .await?
        {
            let mut k = FairnessKey::named(key_of(row.col(0)?)?);
            k.ready = row.col::<i64>(1)?.max(0) as u64;
            k.oldest_ready_ms = (row.col::<Option<i64>>(2)?.unwrap_or(0).max(0) / 1000) as u64;
            keys.push(k);
        }
        let mut running: Vec<(String, u64)> = Vec::new();
        for row in self
            .query(B::FAIR.in_flight)
            .arg(queue_id)
            .rows(conn)
            .await?
        {
            running.push((key_of(row.col(0)?)?, row.col::<i64>(1)?.max(0) as u64));
        }
        // Most in flight first, for the keys listed only for that.
        running.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let listed = keys.len();
        for (key, count) in running {
            if let Some(k) = keys.iter_mut().find(|k| k.key == key) {
                k.in_flight = count;
            } else if keys.len() < listed + limit as usize {
                let mut k = FairnessKey::named(key);
                k.in_flight = count;
                keys.push(k);
            }
        }
        for row in self
            .query(WEIGHTED)
            .arg(queue_id)
            .arg(limit)
            .rows(conn)
            .await?
        {
            let key = key_of(row.col(0)?)?;
            if !keys.iter().any(|k| k.key == key) {
                keys.push(FairnessKey::named(key));
            }
        }
        let names: Vec<&str> = keys.iter().map(|k| k.key.as_str()).collect();
        let states = self.key_states(conn, queue_id, &names).await?;
        for k in &mut keys {
            let state = states.get(&k.key).copied().unwrap_or_default();
            k.weight = state.weight;
            k.arrived = state.arrived;
            // What was made ready and is neither ready nor in flight has left: acked, dead,
            // cancelled, purged, or waiting for a retry (which makes it ready, and counts,
            // again).
            k.settled = state.arrived.saturating_sub(k.ready + k.in_flight);
        }
        Ok(keys)
    }
}
