//! Tests of the SQLite backend alone (the conformance suite, `tests/conformance/`, runs every
//! guarantee on SQLite too): what SQLite users need beyond it.
//!
//! | module | what |
//! |---|---|
//! | `memory` | `sqlite::memory:` for unit tests of an application's handlers |
//! | `file` | the file is created, in WAL mode, with durable commits and a busy timeout |
//! | `contention` | many writers on one file, and the caller's own transactions: never "database is locked" |
//! | `full_disk` | a file system that fills: a typed error, nothing half-written, consumers drain, sends resume |
//! | `durability` | a producer process killed with `kill -9` loses no acknowledged message |
//! | `notifications` | another client's commit wakes waiting consumers through the WAL file |

// Built with the backend only (`cargo test -p sqlmq --no-default-features --features sqlite`).
#![cfg(feature = "sqlite")]

mod contention;
mod durability;
mod file;
mod full_disk;
mod memory;
mod notifications;
