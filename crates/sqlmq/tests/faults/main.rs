//! Faults held at chosen moments (MySQL/MariaDB): tasks paused at the engine's fail points
//! (`sqlmq::failpoints`, built into the library for its own tests) while the test commits a
//! producer, starts another sequencer or cuts a connection.
//!
//! Fail points are global to the process, so the tests of this binary take turns ([`serial`]).

// Built with the backend only (`cargo test -p sqlmq --no-default-features --features mysql`).
#![cfg(feature = "mysql")]

mod connections;
mod sequencer;
mod sequencer_stress;

use tokio::sync::{Mutex, MutexGuard};

/// Held for the whole of a test: no other test of this binary reaches an armed point.
pub async fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::const_new(());
    TURN.lock().await
}
