//! The schema's primitives (the migration loop is the engine's, `client/migrate.rs`): the
//! version table, the lock, one migration at a time.

use sqlx::{AssertSqlSafe, SqlSafeStr};

use super::{Columns, SqlStore, Statement};
use crate::domain::{Error, Result};
use crate::store::Backend;
use crate::store::rows::Migration;

/// A backend's migrations and the statements around them.
pub struct MigrateSql {
    /// Every migration, in version order. Never edit a released one: add a new version.
    pub migrations: &'static [Migration],
    /// Whether DDL is transactional (see `SqlStore::DDL_IN_TRANSACTION`).
    pub ddl_in_transaction: bool,
    /// Create the table of applied versions if it is missing.
    pub create_table: &'static str,
    /// Record an applied version (version, description), ignored when recorded already.
    pub record_version: &'static str,
    /// Take (name; returns 1 when taken) and release (name) the migration lock, where the
    /// backend has one.
    pub lock: Option<(&'static str, &'static str)>,
    /// How many registered processes are live (their registration not yet expired).
    pub live_processes: &'static str,
    /// Whether a column a migration added holds a value (`{column}`): one other than the
    /// column's default, which a `NOT NULL` column holds in every row.
    pub holds_value: &'static str,
}

/// Highest version recorded, NULL when none.
const SELECT_VERSION: &str = "SELECT MAX(version) FROM {p}schema_migrations";

/// Forget a reversed version.
const DELETE_VERSION: &str = "DELETE FROM {p}schema_migrations WHERE version = ?";

/// Whether `err` says a column change was made already (see `Db::is_column_change_done`).
fn column_change_done<B: Backend>(err: &Error) -> bool {
    matches!(err, Error::Database {
        source: sqlx::Error::Database(db),
        ..
    } if B::is_column_change_done(db.as_ref()))
}

/// `result`, with a table that does not exist — before the migration that creates it, or after
/// a reverse dropped it — read as `absent`.
fn absent_table<B: Backend, T>(result: Result<T>, absent: T) -> Result<T> {
    match result {
        Err(Error::Database {
            source: sqlx::Error::Database(db),
            ..
        }) if B::is_missing_table(db.as_ref()) => Ok(absent),
        other => other,
    }
}

impl<B: Backend> SqlStore<B> {
    /// The name of the migration lock of this table prefix.
    fn lock_name(&self) -> String {
        format!("sqlmq.migrate.{}", self.st.prefix())
    }
}

/// Versioned migrations: the primitives of the engine's one migration loop
/// (`client/migrate.rs`).
impl<B: Backend> SqlStore<B> {
    /// Whether DDL is transactional here: the engine then applies every pending migration in
    /// one transaction of its own (a concurrent migrator waits for it, then finds the work
    /// done). Where it is not (MySQL), each statement commits by itself and the migrations'
    /// `IF NOT EXISTS` forms make a concurrent run harmless.
    pub(crate) const DDL_IN_TRANSACTION: bool = B::MIGRATE.ddl_in_transaction;

    /// Every migration of this backend, in version order (1, 2, … without gaps).
    pub(crate) fn migrations() -> &'static [Migration] {
        B::MIGRATE.migrations
    }

    /// The schema version in the database, 0 when there is none.
    pub(crate) async fn schema_version(&self, conn: &mut B::Connection) -> Result<i64> {
        let row = absent_table::<B, _>(self.query(SELECT_VERSION).first(conn).await, None)?;
        match row {
            Some(row) => Ok(row.col::<Option<i64>>(0)?.unwrap_or(0)),
            None => Ok(0),
        }
    }

    /// Create the table of applied versions, if it is missing.
    pub(crate) async fn create_version_table(&self, conn: &mut B::Connection) -> Result<()> {
        B::run_text(conn, self.st.get(B::MIGRATE.create_table)).await?;
        Ok(())
    }

    /// Take the migration lock where the backend has one: a hint that keeps concurrent
    /// migrators from doing the work twice, never a condition of correctness. True when
    /// taken (then `SqlStore::unlock_migrations` must follow).
    ///
    /// A failure just means no mutual exclusion (Galera rejects `GET_LOCK`).
    pub(crate) async fn lock_migrations(&self, conn: &mut B::Connection) -> bool {
        let Some((take, _)) = B::MIGRATE.lock else {
            return false;
        };
        let row = self.query(take).arg(self.lock_name()).first(conn).await;
        matches!(row, Ok(Some(row)) if row.col::<Option<i64>>(0).ok().flatten() == Some(1))
    }

    /// Release the lock `SqlStore::lock_migrations` took.
    pub(crate) async fn unlock_migrations(&self, conn: &mut B::Connection) {
        if let Some((_, release)) = B::MIGRATE.lock {
            let _ = self.query(release).arg(self.lock_name()).run(conn).await;
        }
    }

    /// Apply one migration: its statements, then its version row (ignored when a concurrent
    /// migrator recorded it first).
    pub(crate) async fn apply_migration(
        &self,
        conn: &mut B::Connection,
        migration: &Migration,
    ) -> Result<()> {
        crate::failpoints::migration_step("migrate", migration.version, 0).await;
        for (i, statement) in migration.statements.iter().enumerate() {
            match B::run_text(conn, self.st.get(statement)).await {
                // A column added by an interrupted or concurrent run: there is no `ADD COLUMN
                // IF NOT EXISTS` on MySQL.
                Err(e) if statement.starts_with("ALTER TABLE") && column_change_done::<B>(&e) => {}
                other => {
                    other?;
                }
            }
            crate::failpoints::migration_step("migrate", migration.version, i + 1).await;
        }
        self.query(B::MIGRATE.record_version)
            .arg(migration.version)
            .arg(migration.description)
            .run(conn)
            .await?;
        Ok(())
    }

    /// How many registered worker processes are live (0 where the process table does not
    /// exist: before version 2).
    pub(crate) async fn live_processes(&self, conn: &mut B::Connection) -> Result<i64> {
        let live = self.query(B::MIGRATE.live_processes).first(conn).await;
        match absent_table::<B, _>(live, None)? {
            Some(row) => row.col::<i64>(0),
            None => Ok(0),
        }
    }

    /// Why `migration` cannot be reversed now (it has no reverse, or a table it would drop
    /// holds rows), or `None`.
    pub(crate) async fn reversal_refused(
        &self,
        conn: &mut B::Connection,
        migration: &Migration,
    ) -> Result<Option<String>> {
        let Some(reverse) = &migration.reverse else {
            return Ok(Some(format!(
                "migration {} ({}) cannot be reversed",
                migration.version, migration.description
            )));
        };
        let prefix = self.st.prefix();
        for table in reverse.drops {
            if reverse.disposable.contains(table) {
                continue;
            }
            // Table names are the migration's own constants, never input.
            let any = AssertSqlSafe(format!("SELECT 1 FROM {prefix}{table} LIMIT 1"));
            // A table gone already (a reverse that was interrupted) holds nothing.
            let row = absent_table::<B, _>(B::first(conn, sqlx::query(any)).await, None)?;
            if row.is_some() {
                return Ok(Some(format!(
                    "table {prefix}{table} (created by migration {}, {}) holds rows that would \
                     be lost; settle, purge or delete them first",
                    migration.version, migration.description
                )));
            }
        }
        for (table, column) in reverse.columns {
            // Names are the migration's own constants, never input.
            let holds = B::MIGRATE.holds_value.replace("{column}", column);
            let any = AssertSqlSafe(format!(
                "SELECT 1 FROM {prefix}{table} WHERE {holds} LIMIT 1"
            ));
            let row = absent_table::<B, _>(B::first(conn, sqlx::query(any)).await, None);
            // A column gone already (a reverse that was interrupted) holds nothing.
            let row = match row {
                Err(e) if column_change_done::<B>(&e) => None,
                other => other?,
            };
            if row.is_some() {
                return Ok(Some(format!(
                    "column {column} of {prefix}{table} (added by migration {}, {}) holds \
                     values that would be lost; settle, purge or delete those messages first",
                    migration.version, migration.description
                )));
            }
        }
        Ok(None)
    }

    /// Reverse one migration that `SqlStore::reversal_refused` let through: drop its tables
    /// and forget its version.
    pub(crate) async fn reverse_migration(
        &self,
        conn: &mut B::Connection,
        migration: &Migration,
    ) -> Result<()> {
        // The version first: where DDL is not transactional, a reverse interrupted half-way
        // leaves the version below with some of this migration's (empty) tables, which running
        // `migrate` again re-creates `IF NOT EXISTS` — never this version with tables missing.
        self.query(DELETE_VERSION)
            .arg(migration.version)
            .run(conn)
            .await?;
        crate::failpoints::migration_step("reverse", migration.version, 0).await;
        let prefix = self.st.prefix();
        let reverse = migration.reverse.iter();
        let procedures = reverse.clone().flat_map(|r| r.procedures);
        let drops = procedures
            .map(|name| format!("DROP PROCEDURE IF EXISTS {prefix}{name}"))
            .chain(
                reverse
                    .flat_map(|r| r.drops)
                    .map(|table| format!("DROP TABLE IF EXISTS {prefix}{table}")),
            );
        let columns = migration.reverse.iter().flat_map(|r| r.columns);
        let indexes = migration.reverse.iter().flat_map(|r| r.indexes);
        let drops =
            indexes
                .map(|drop| drop.replace("{p}", prefix))
                .chain(columns.map(|(table, column)| {
                    format!("ALTER TABLE {prefix}{table} DROP COLUMN {column}")
                }))
                .chain(drops);
        for (i, drop) in drops.enumerate() {
            // Names are the migration's own constants, never input.
            match B::run_text(conn, AssertSqlSafe(drop).into_sql_str()).await {
                // Dropped by a reverse that was interrupted.
                Err(e) if column_change_done::<B>(&e) => {}
                other => {
                    other?;
                }
            }
            crate::failpoints::migration_step("reverse", migration.version, i + 1).await;
        }
        Ok(())
    }

    /// The schema version this build writes and reads.
    pub(crate) fn latest_version() -> i64 {
        Self::migrations().last().map_or(0, |m| m.version)
    }
}

/// Checks the backends' schema tests run on their migrations.
#[cfg(test)]
pub(crate) mod checks {
    use crate::store::rows::Migration;

    /// FNV-1a over a migration's statements: a fingerprint of its text.
    pub(crate) fn fingerprint(m: &Migration) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for s in m.statements {
            for b in s.bytes().chain([0]) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    /// Released migrations are never edited: a database migrated by an earlier release holds
    /// exactly what their statements make, and the upgrade tests build the earlier versions
    /// from them. `released` are their fingerprints; a new schema is a new version, whose
    /// fingerprint is added when it is released.
    pub(crate) fn released_are_unchanged(migrations: &[Migration], released: &[u64]) {
        let found: Vec<u64> = migrations.iter().map(fingerprint).collect();
        assert_eq!(&found[..released.len()], released, "{found:#x?}");
    }

    /// A reverse drops exactly the tables its migration created, newest first, the procedures
    /// it created and the columns it added.
    pub(crate) fn reverses_drop_what_was_created(migrations: &[Migration]) {
        for m in migrations {
            let mut created: Vec<&str> = m
                .statements
                .iter()
                .filter_map(|s| s.strip_prefix("CREATE TABLE IF NOT EXISTS {p}"))
                .map(|s| {
                    s.split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or_default()
                })
                .collect();
            created.reverse();
            let reverse = m
                .reverse
                .as_ref()
                .expect("every migration so far is reversible");
            assert_eq!(reverse.drops, created, "migration {}", m.version);
            let procedures: Vec<&str> = m
                .statements
                .iter()
                .filter_map(|s| s.strip_prefix("CREATE PROCEDURE IF NOT EXISTS {p}"))
                .map(|s| s.split('(').next().unwrap_or_default())
                .collect();
            assert_eq!(reverse.procedures, procedures, "migration {}", m.version);
            let columns: Vec<(&str, &str)> = m
                .statements
                .iter()
                .filter_map(|s| s.strip_prefix("ALTER TABLE {p}"))
                .filter_map(|s| {
                    let (table, rest) = s.split_once(' ')?;
                    let column = rest.strip_prefix("ADD COLUMN ")?.split(' ').next()?;
                    Some((table, column))
                })
                .collect();
            assert_eq!(reverse.columns, columns, "migration {}", m.version);
            assert!(reverse.disposable.iter().all(|t| created.contains(t)));
        }
    }
}
