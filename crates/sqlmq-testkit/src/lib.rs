//! Test support shared by every test of the workspace (dev-only, never published).
//!
//! | module | what |
//! |---|---|
//! | `server.rs` | the test server (`SQLMQ_TEST_DATABASE_URL`, else `SQLMQ_DATABASE_URL`, else `mysql://root@127.0.0.1:3306/test`): throwaway databases, swept after two hours when a killed run left them, admin SQL; [`TestDatabase`] for the binaries' process tests |
//! | `backend.rs` | [`TestBackend`]: what the conformance suite needs from each backend, and plain SQL ([`Value`]) |
//! | `db.rs` | [`TestDb`]: an async test's own database and client, on any backend |
//! | `checks.rs` | the storage invariants, [`Recorder`] |
//! | `full.rs` | [`fill_and_drain`]: the out-of-space scenario, on any backend |
//! | `conformance.rs` | [`conformance!`]: one generic scenario, one test per backend |
//! | `private_server.rs` | [`PrivateServer`]: a MariaDB of the test's own (ports, data directory, optionally on a small tmpfs) to kill, restart, fill or limit |
//! | `tmpfs.rs` | [`Tmpfs`]: a small file system to fill (a full disk) |
//! | `wait.rs` | [`eventually`], [`eventually_async`]: conditions with a deadline, never a fixed sleep |
//! | `undo.rs` | [`hold_undo`]: a read view held open while a row is updated (InnoDB's history list grows) |

#![warn(missing_docs)]

#[cfg(not(any(feature = "mysql", feature = "sqlite")))]
compile_error!("sqlmq-testkit serves a backend: enable its feature `mysql` or `sqlite`");

mod backend;
mod checks;
mod conformance;
mod db;
mod full;
mod ports;
#[cfg(feature = "mysql")]
mod private_server;
mod proxy;
#[cfg(feature = "mysql")]
mod server;
mod tmpfs;
#[cfg(feature = "mysql")]
mod undo;
mod wait;

pub use backend::{TestBackend, Value};
pub use checks::{Recorder, check_invariants, check_invariants_at};
pub use conformance::child_test;
pub use db::{TestDb, queue};
pub use full::fill_and_drain;
pub use ports::free_port;
#[cfg(feature = "mysql")]
pub use private_server::{PrivateServer, install_data_dir};
pub use proxy::{Proxy, address_of};
#[cfg(feature = "mysql")]
pub use server::{
    TestDatabase, admin, admin_url_for, create_database, drop_database, server_url, url_for,
};
pub use tmpfs::Tmpfs;
#[cfg(feature = "mysql")]
pub use undo::{HeldReadView, hold_undo};
pub use wait::{eventually, eventually_async};
