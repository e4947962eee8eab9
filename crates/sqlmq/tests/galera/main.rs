//! sqlmq on a MariaDB Galera cluster of three nodes (`cluster.rs`): producers and consumers on
//! different nodes, certification conflicts retried, offsets dense while producers commit on
//! different nodes, and a node killed with SIGKILL mid-run while clients go on through the
//! others. See the guide, "Running on a cluster".

// Built with the backend only (`cargo test -p sqlmq --no-default-features --features mysql`).
#![cfg(feature = "mysql")]

mod aborts;
mod balancer;
mod cluster;
mod failover;
mod traffic;
