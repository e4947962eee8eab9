//! The storage seam: everything that knows SQL.
//!
//! The engine (`client`, `queue`, `tx`) validates input, opens transactions, retries and
//! records metrics; it calls into a backend for every read and write. Today the backend is
//! `mysql` (MySQL 8.0+ and MariaDB 10.6+), whose module holds every statement and the
//! migrations. A SQLite backend will sit beside it behind the same calls.

pub(crate) mod mysql;
pub(crate) mod statements;
