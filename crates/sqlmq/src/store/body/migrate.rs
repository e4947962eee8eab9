//! The schema's primitives (the migration loop is the engine's, `client/migrate.rs`): the
//! version table, the lock, one migration at a time.

use super::{Columns, SqlStore, Statement};
use crate::domain::{Error, GrantRole, Result};
use crate::store::rows::Migration;
use crate::store::{Backend, Schema};

/// A backend's migrations and the statements around them.
pub struct MigrateSql {
    /// Every migration, in version order. Never edit a released one: add a new version.
    pub migrations: &'static [Migration],
    /// Whether DDL is transactional (see `Schema::DDL_IN_TRANSACTION`).
    pub ddl_in_transaction: bool,
    /// Create the table of applied versions if it is missing.
    pub create_table: &'static str,
    /// Record an applied version (version, description), ignored when recorded already.
    pub record_version: &'static str,
    /// Take (name; returns 1 when taken) and release (name) the migration lock, where the
    /// backend has one.
    pub lock: Option<(&'static str, &'static str)>,
}

/// Highest version recorded, NULL when none.
const SELECT_VERSION: &str = "SELECT MAX(version) FROM {p}schema_migrations";

impl<B: Backend> SqlStore<B> {
    /// The name of the migration lock of this table prefix.
    fn lock_name(&self) -> String {
        format!("sqlmq.migrate.{}", self.st.prefix())
    }
}

impl<B: Backend> Schema<B> for SqlStore<B> {
    const DDL_IN_TRANSACTION: bool = B::MIGRATE.ddl_in_transaction;

    fn migrations() -> &'static [Migration] {
        B::MIGRATE.migrations
    }

    async fn schema_version(&self, conn: &mut B::Connection) -> Result<i64> {
        match self.query(SELECT_VERSION).first(conn).await {
            Ok(row) => Ok(match row {
                Some(row) => row.col::<Option<i64>>(0)?.unwrap_or(0),
                None => 0,
            }),
            Err(Error::Database {
                source: sqlx::Error::Database(db),
                ..
            }) if B::is_missing_table(db.as_ref()) => Ok(0),
            Err(e) => Err(e),
        }
    }

    async fn create_version_table(&self, conn: &mut B::Connection) -> Result<()> {
        B::run_text(conn, self.st.get(B::MIGRATE.create_table)).await?;
        Ok(())
    }

    /// A failure just means no mutual exclusion (Galera rejects `GET_LOCK`).
    async fn lock_migrations(&self, conn: &mut B::Connection) -> bool {
        let Some((take, _)) = B::MIGRATE.lock else {
            return false;
        };
        let row = self.query(take).arg(self.lock_name()).first(conn).await;
        matches!(row, Ok(Some(row)) if row.col::<Option<i64>>(0).ok().flatten() == Some(1))
    }

    async fn unlock_migrations(&self, conn: &mut B::Connection) {
        if let Some((_, release)) = B::MIGRATE.lock {
            let _ = self.query(release).arg(self.lock_name()).run(conn).await;
        }
    }

    async fn apply_migration(&self, conn: &mut B::Connection, migration: &Migration) -> Result<()> {
        for statement in migration.statements {
            B::run_text(conn, self.st.get(statement)).await?;
        }
        self.query(B::MIGRATE.record_version)
            .arg(migration.version)
            .arg(migration.description)
            .run(conn)
            .await?;
        Ok(())
    }

    async fn grants(
        &self,
        conn: &mut B::Connection,
        role: GrantRole,
        user: &str,
        host: &str,
    ) -> Result<Vec<String>> {
        B::grants(self, conn, role, user, host).await
    }
}
