//! Applying migrations and reading the schema version.

use sqlx::{Connection, Executor, Row, Sqlite, SqliteConnection};

use super::schema::{
    CREATE_MIGRATIONS_TABLE, MIGRATIONS, RECORD_VERSION, SELECT_VERSION, latest_version,
};
use super::{BEGIN_IMMEDIATE, SqliteStore};
use crate::domain::{GrantRole, MigrationReport, Result, check_not_newer};
use crate::store::Schema;

/// Whether the migrations table exists.
const HAS_TABLE: &str = "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = ?";

impl Schema<Sqlite> for SqliteStore {
    fn latest_version() -> i64 {
        latest_version()
    }

    /// The schema version in the database, 0 when there is none.
    async fn schema_version(&self, conn: &mut SqliteConnection) -> Result<i64> {
        let table = format!("{}schema_migrations", self.st.prefix());
        let exists: i64 = sqlx::query_scalar(HAS_TABLE)
            .bind(table)
            .fetch_one(&mut *conn)
            .await?;
        if exists == 0 {
            return Ok(0);
        }
        let row = sqlx::query(self.st.get(SELECT_VERSION))
            .fetch_one(&mut *conn)
            .await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.unwrap_or(0))
    }

    /// Apply every pending migration in one write transaction: a concurrent migrator waits for
    /// the write lock, then finds the work done.
    async fn migrate(&self, conn: &mut SqliteConnection) -> Result<MigrationReport> {
        let mut tx = conn.begin_with(BEGIN_IMMEDIATE).await?;
        tx.execute(self.st.get(CREATE_MIGRATIONS_TABLE)).await?;
        let from_version = self.schema_version(&mut tx).await?;
        check_not_newer(from_version, latest_version())?;
        let mut applied = Vec::new();
        for m in MIGRATIONS.iter().filter(|m| m.version > from_version) {
            tracing::info!(
                version = m.version,
                description = m.description,
                "applying migration"
            );
            for statement in m.statements {
                tx.execute(self.st.get(statement)).await?;
            }
            sqlx::query(self.st.get(RECORD_VERSION))
                .bind(m.version)
                .bind(m.description)
                .execute(&mut *tx)
                .await?;
            applied.push(m.version);
        }
        tx.commit().await?;
        Ok(MigrationReport {
            from_version,
            to_version: latest_version(),
            applied,
        })
    }

    /// None: SQLite has no users; access is the file's permissions.
    async fn grants(
        &self,
        _: &mut SqliteConnection,
        _: GrantRole,
        _: &str,
        _: &str,
    ) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}
