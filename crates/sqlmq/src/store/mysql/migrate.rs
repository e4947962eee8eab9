//! The migrations' statements (the loop is the engine's, `client/migrate.rs`; the primitives
//! are `store/body/migrate.rs`): DDL is not transactional on MySQL, so every statement commits
//! by itself, the migrations use `IF NOT EXISTS` forms, versions are recorded with `INSERT
//! IGNORE`, and a named lock (a hint: Galera rejects `GET_LOCK`) keeps concurrent migrators
//! from doing the work twice.

use sqlx::MySqlConnection;

use super::MySqlStore;
use super::schema::{CREATE_MIGRATIONS_TABLE, MIGRATIONS, RECORD_VERSION};
use crate::domain::{Error, GrantRole, Result};
use crate::store::body::{Columns, MigrateSql, Statement};

pub(super) const SQL: MigrateSql = MigrateSql {
    migrations: MIGRATIONS,
    ddl_in_transaction: false,
    create_table: CREATE_MIGRATIONS_TABLE,
    record_version: RECORD_VERSION,
    lock: Some((
        "SELECT GET_LOCK(CONCAT(DATABASE(), '.', ?), 60)",
        "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.', ?))",
    )),
    live_processes: "SELECT COUNT(*) FROM {p}processes WHERE expires_at > UTC_TIMESTAMP(6)",
    holds_value: "NOT ({column} <=> DEFAULT({column}))",
};

/// The GRANT statements of `role` for `user`@`host` on the connection's database.
pub(super) async fn grants(
    store: &MySqlStore,
    conn: &mut MySqlConnection,
    role: GrantRole,
    user: &str,
    host: &str,
) -> Result<Vec<String>> {
    let row = store
        .query("SELECT DATABASE(), VERSION()")
        .first(conn)
        .await?;
    let (database, version): (Option<String>, String) = match row {
        Some(row) => (row.col(0)?, row.col(1)?),
        None => (None, String::new()),
    };
    let database = database
        .ok_or_else(|| Error::InvalidArgument("the database URL names no database".to_owned()))?;
    let mariadb = version.contains("MariaDB");
    Ok(super::grants::statements(
        &store.st, mariadb, &database, role, user, host,
    ))
}
