//! Library handles by name, cached for a moment.
//!
//! Looking a queue up costs a query; on the send and receive paths that would be one more
//! round trip per request. Handles are therefore kept for [`HANDLE_TTL`], and dropped at once
//! when this server deletes the object. The library does not re-check a handle on use, so a
//! queue deleted by another process may still receive sends through a cached handle for up to
//! the TTL — the same window the library documents for any long-lived handle ("stop producers
//! before deleting a queue").

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlmq::Backend;

use crate::error::ApiResult;
use crate::state::AppState;

/// How long a looked-up handle is reused.
pub const HANDLE_TTL: Duration = Duration::from_secs(2);

/// Values by key, with when each was looked up.
type Cache<K, V> = Mutex<HashMap<K, (Instant, V)>>;

/// Cached queue, topic and group handles.
pub(crate) struct Handles<B: Backend> {
    queues: Cache<String, sqlmq::Queue<B>>,
    topics: Cache<String, sqlmq::Topic<B>>,
    groups: Cache<(String, String), sqlmq::Group<B>>,
}

// Not derived: a derive would require `B: Default`.
impl<B: Backend> Default for Handles<B> {
    fn default() -> Self {
        Handles {
            queues: Mutex::default(),
            topics: Mutex::default(),
            groups: Mutex::default(),
        }
    }
}

fn fresh<K: std::hash::Hash + Eq, V: Clone>(map: &Cache<K, V>, key: &K) -> Option<V> {
    let map = map.lock().expect("poisoned");
    map.get(key)
        .filter(|(at, _)| at.elapsed() < HANDLE_TTL)
        .map(|(_, v)| v.clone())
}

fn keep<K: std::hash::Hash + Eq, V>(map: &Cache<K, V>, key: K, value: V) {
    let mut map = map.lock().expect("poisoned");
    if map.len() > 10_000 {
        map.retain(|_, (at, _)| at.elapsed() < HANDLE_TTL);
    }
    map.insert(key, (Instant::now(), value));
}

impl<B: Backend> Handles<B> {
    /// Forget everything about `topic` (and its groups) or `queue`.
    pub fn forget_queue(&self, name: &str) {
        self.queues.lock().expect("poisoned").remove(name);
    }

    pub fn forget_topic(&self, name: &str) {
        self.topics.lock().expect("poisoned").remove(name);
        self.groups
            .lock()
            .expect("poisoned")
            .retain(|(t, _), _| t != name);
    }

    pub fn forget_group(&self, topic: &str, group: &str) {
        self.groups
            .lock()
            .expect("poisoned")
            .remove(&(topic.to_owned(), group.to_owned()));
    }
}

impl<B: Backend> AppState<B> {
    /// The queue `name` (404 `unknown_queue` when it does not exist).
    pub(crate) async fn queue(&self, name: &str) -> ApiResult<sqlmq::Queue<B>> {
        if let Some(q) = fresh(&self.handles.queues, &name.to_owned()) {
            return Ok(q);
        }
        let q = self.client.queue(name).await?;
        keep(&self.handles.queues, name.to_owned(), q.clone());
        Ok(q)
    }

    /// The topic `name` (404 `unknown_topic`).
    pub(crate) async fn topic(&self, name: &str) -> ApiResult<sqlmq::Topic<B>> {
        if let Some(t) = fresh(&self.handles.topics, &name.to_owned()) {
            return Ok(t);
        }
        let t = self.client.topic(name).await?;
        keep(&self.handles.topics, name.to_owned(), t.clone());
        Ok(t)
    }

    /// The group `group` of `topic` (404 `unknown_topic` or `unknown_group`).
    pub(crate) async fn group(&self, topic: &str, group: &str) -> ApiResult<sqlmq::Group<B>> {
        let key = (topic.to_owned(), group.to_owned());
        if let Some(g) = fresh(&self.handles.groups, &key) {
            return Ok(g);
        }
        let g = self.topic(topic).await?.group(group).await?;
        keep(&self.handles.groups, key, g.clone());
        Ok(g)
    }
}
