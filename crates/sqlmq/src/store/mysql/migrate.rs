//! Applying migrations and reading the schema version.

use sqlx::{Executor, MySql, MySqlConnection, Row};

use super::MySqlStore;
use super::schema::{
    CREATE_MIGRATIONS_TABLE, MIGRATIONS, RECORD_VERSION, SELECT_VERSION, latest_version,
};
use crate::domain::{
    Error, GrantRole, MIGRATION_GRANTS_NEEDED, MigrationReport, Result, check_not_newer,
};
use crate::store::Schema;

/// ER_NO_SUCH_TABLE
const NO_SUCH_TABLE: u16 = 1146;

impl Schema<MySql> for MySqlStore {
    fn latest_version() -> i64 {
        latest_version()
    }

    /// The schema version in the database, 0 when there is none.
    async fn schema_version(&self, conn: &mut MySqlConnection) -> Result<i64> {
        match sqlx::query(self.st.get(SELECT_VERSION))
            .fetch_one(&mut *conn)
            .await
        {
            Ok(row) => Ok(row.try_get::<Option<i64>, _>(0)?.unwrap_or(0)),
            Err(e) => {
                let err = Error::from(e);
                if err.mysql_error_number() == Some(NO_SUCH_TABLE) {
                    Ok(0)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Apply every pending migration. Safe to run from several processes at once: DDL is
    /// idempotent (`IF NOT EXISTS`) and versions are recorded with `INSERT IGNORE`; a named lock,
    /// where the server supports it, merely keeps concurrent migrators from doing the work twice.
    async fn migrate(&self, conn: &mut MySqlConnection) -> Result<MigrationReport> {
        // Up to date: nothing to do, and no DDL either, so that the runtime user (which has
        // no CREATE right) may run `migrate` at start-up as many deployments do.
        let found = self.schema_version(conn).await?;
        check_not_newer(found, latest_version())?;
        if found == latest_version() {
            return Ok(MigrationReport {
                from_version: found,
                to_version: found,
                applied: Vec::new(),
            });
        }
        self.migrate_now(conn).await.map_err(|e| match e {
            Error::PermissionDenied { source, .. } => Error::PermissionDenied {
                needs: MIGRATION_GRANTS_NEEDED,
                source,
            },
            e => e,
        })
    }

    async fn grants(
        &self,
        conn: &mut MySqlConnection,
        role: GrantRole,
        user: &str,
        host: &str,
    ) -> Result<Vec<String>> {
        let database: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
            .fetch_one(&mut *conn)
            .await?;
        let database = database.ok_or_else(|| {
            Error::InvalidArgument("the database URL names no database".to_owned())
        })?;
        Ok(super::grants::statements(
            &self.st, &database, role, user, host,
        ))
    }
}

impl MySqlStore {
    /// Create the version table and apply what is missing, under the migration lock.
    async fn migrate_now(&self, conn: &mut MySqlConnection) -> Result<MigrationReport> {
        conn.execute(self.st.get(CREATE_MIGRATIONS_TABLE)).await?;
        let lock_name = format!("sqlmq.migrate.{}", self.st.prefix());
        // GET_LOCK is a hint only (Galera rejects it); a failure just means no mutual exclusion.
        let locked = sqlx::query("SELECT GET_LOCK(CONCAT(DATABASE(), '.', ?), 60)")
            .bind(&lock_name)
            .fetch_one(&mut *conn)
            .await
            .ok()
            .and_then(|r| r.try_get::<Option<i64>, _>(0).ok().flatten())
            == Some(1);
        let result = self.apply_pending(conn).await;
        if locked {
            let _ = sqlx::query("SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.', ?))")
                .bind(&lock_name)
                .execute(&mut *conn)
                .await;
        }
        result
    }

    async fn apply_pending(&self, conn: &mut MySqlConnection) -> Result<MigrationReport> {
        let from_version = self.schema_version(conn).await?;
        check_not_newer(from_version, latest_version())?;
        let mut applied = Vec::new();
        for m in MIGRATIONS.iter().filter(|m| m.version > from_version) {
            tracing::info!(
                version = m.version,
                description = m.description,
                "applying migration"
            );
            for statement in m.statements {
                conn.execute(self.st.get(statement)).await?;
            }
            sqlx::query(self.st.get(RECORD_VERSION))
                .bind(m.version)
                .bind(m.description)
                .execute(&mut *conn)
                .await?;
            applied.push(m.version);
        }
        Ok(MigrationReport {
            from_version,
            to_version: latest_version(),
            applied,
        })
    }
}
