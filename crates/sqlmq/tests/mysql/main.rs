//! Tests of the MySQL/MariaDB backend alone (the conformance suite, `tests/conformance/`, runs
//! every guarantee on every backend): a private `mariadbd` killed with `kill -9` mid-traffic,
//! one that accepts TLS connections only, and one whose tablespace fills; what waiting long
//! polls cost the server, counted.

mod durability;
mod full_disk;
mod long_polls;
mod privileges;
mod restart;
mod tls;
