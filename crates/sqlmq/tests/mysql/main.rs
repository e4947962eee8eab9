//! Tests of the MySQL/MariaDB backend alone (the conformance suite, `tests/conformance/`, runs
//! every guarantee on every backend): a private `mariadbd` killed with `kill -9` mid-traffic,
//! and one that accepts TLS connections only.

mod durability;
mod private_server;
mod privileges;
mod restart;
mod tls;
