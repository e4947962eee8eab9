//! The migrations' statements (the loop is the engine's, `client/migrate.rs`; the primitives
//! are `store/body/migrate.rs`): SQLite's DDL is transactional, so every pending migration is
//! applied in one `BEGIN IMMEDIATE` transaction, and a concurrent migrator waits for the write
//! lock, then finds the work done.

use super::schema::{CREATE_MIGRATIONS_TABLE, MIGRATIONS, RECORD_VERSION};
use crate::store::body::MigrateSql;

pub(super) const SQL: MigrateSql = MigrateSql {
    migrations: MIGRATIONS,
    ddl_in_transaction: true,
    create_table: CREATE_MIGRATIONS_TABLE,
    record_version: RECORD_VERSION,
    lock: None,
    live_processes: concat!(
        "SELECT COUNT(*) FROM {p}processes WHERE expires_at > ",
        super::now_us!()
    ),
    // Every column a migration added is NULL where it holds nothing.
    holds_value: "{column} IS NOT NULL",
};
