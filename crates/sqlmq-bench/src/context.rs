//! What every scenario gets: the plan, the scratch area, fresh sqlmq clients on tables of
//! their own, progress bars, and the peers' addresses.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};

use super::args::Plan;
use super::backend::Db;
use super::progress::Bar;
use super::scratch::Scratch;

/// Where the peers listen.
#[derive(Clone, Debug)]
pub struct PeerUrls {
    /// PostgreSQL.
    pub postgres: String,
    /// Redis.
    pub redis: String,
    /// RabbitMQ (AMQP 0-9-1).
    pub amqp: String,
}

/// Shared state of one run on backend `B`.
pub struct Ctx<B: Db> {
    /// Message counts and durations.
    pub plan: Plan,
    /// The scratch database, table prefix or file.
    pub scratch: Scratch<B>,
    /// Random id of this run: names every table, queue and stream the bench creates.
    pub run_id: String,
    /// Zero of the send timestamps carried in bodies.
    pub origin: Instant,
    /// Whether progress bars are drawn.
    pub progress: bool,
    /// Peers.
    pub peers: PeerUrls,
    /// Peers that may hold something of this run, for the final clean-up.
    pub peers_touched: Mutex<Vec<&'static str>>,
    next_area: AtomicU32,
}

impl<B: Db> Ctx<B> {
    /// A context for a run.
    pub fn new(
        plan: Plan,
        scratch: Scratch<B>,
        run_id: String,
        progress: bool,
        peers: PeerUrls,
    ) -> Ctx<B> {
        Ctx {
            plan,
            scratch,
            run_id,
            origin: Instant::now(),
            progress,
            peers,
            peers_touched: Mutex::default(),
            next_area: AtomicU32::new(1),
        }
    }

    /// A migrated sqlmq client on tables of its own (prefix `<base><tag><n>_`), with a pool of
    /// `max_connections` (on SQLite: readers, beside the one writer). Fresh tables keep
    /// scenarios independent of each other's leftovers. Give it back with [`Ctx::release`].
    pub async fn client(&self, tag: &str, max_connections: u32) -> Result<sqlmq::Client<B>> {
        let n = self.next_area.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("{}{tag}{n}_", self.scratch.base_prefix);
        let client = sqlmq::Client::builder()
            .table_prefix(&prefix)
            .max_connections(max_connections)
            .open::<B>(&self.scratch.url)
            .await
            .with_context(|| format!("cannot connect to the {}", self.scratch.describe()))?;
        client.migrate().await?;
        Ok(client)
    }

    /// Close a client from [`Ctx::client`] and drop its tables.
    pub async fn release(&self, client: sqlmq::Client<B>) -> Result<()> {
        client.pool().close().await;
        let prefix = client.table_prefix().to_owned();
        // Its other connections (SQLite's readers) close with its last handle.
        drop(client);
        self.scratch.drop_tables(&prefix).await
    }

    /// A progress bar for a scenario.
    pub fn bar(&self, title: &str) -> Bar {
        Bar::new(self.progress, title)
    }

    /// Name of a peer-side object (queue, stream, table) of this run.
    pub fn peer_name(&self, what: &str) -> String {
        format!("sqlmq_bench_{}_{what}", self.run_id)
    }

    /// Remember that `peer` may hold objects of this run.
    pub fn touch_peer(&self, peer: &'static str) {
        let mut touched = self.peers_touched.lock().expect("poisoned");
        if !touched.contains(&peer) {
            touched.push(peer);
        }
    }
}
