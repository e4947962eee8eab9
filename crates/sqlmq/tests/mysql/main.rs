//! Tests of the MySQL/MariaDB backend alone (the conformance suite, `tests/conformance/`, runs
//! every guarantee on every backend): a private `mariadbd` killed with `kill -9` mid-traffic,
//! one that accepts TLS connections only, and one whose tablespace fills; what waiting long
//! polls cost the server, counted; notifications from a private server's binary log; InnoDB's
//! history list length and what reading it needs; what 10 000 sleeping durable runs cost an
//! idle worker (nothing).

// Built with the backend only (`cargo test -p sqlmq --no-default-features --features mysql`).
#![cfg(feature = "mysql")]

mod ack_procedure;
mod claim_ack_procedures;
mod durability;
mod full_disk;
mod group_ack_procedure;
mod history;
mod kept_connections;
mod long_polls;
mod notifications;
mod privileges;
mod questions;
mod restart;
mod send_procedure;
mod sleeping_runs;
mod tls;
