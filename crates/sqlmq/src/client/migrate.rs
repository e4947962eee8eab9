//! The migration loop, written once over the store's [`Schema`] primitives: read the version,
//! refuse a newer schema, and apply what is missing — in one transaction where the backend's
//! DDL is transactional, under the backend's lock hint where it is not.

use sqlx::Connection;

use crate::domain::{Error, MIGRATION_GRANTS_NEEDED, MigrationReport, Result, check_not_newer};
use crate::store::{Backend, Schema};

/// Create or upgrade the schema on `conn` (idempotent; harmless when run by several processes
/// at once).
pub(crate) async fn migrate<B: Backend>(
    store: &B::Store,
    conn: &mut B::Connection,
) -> Result<MigrationReport> {
    // Up to date: nothing to do, and no DDL either, so that the runtime user (which has no
    // CREATE right) may run `migrate` at start-up as many deployments do.
    let found = store.schema_version(conn).await?;
    let latest = <B::Store as Schema<B>>::latest_version();
    check_not_newer(found, latest)?;
    if found == latest {
        return Ok(MigrationReport {
            from_version: found,
            to_version: found,
            applied: Vec::new(),
        });
    }
    let report = if <B::Store as Schema<B>>::DDL_IN_TRANSACTION {
        in_transaction::<B>(store, conn).await
    } else {
        let locked = store.lock_migrations(conn).await;
        let report = apply_pending::<B>(store, conn).await;
        if locked {
            store.unlock_migrations(conn).await;
        }
        report
    };
    report.map_err(|e| match e {
        Error::PermissionDenied { source, .. } => Error::PermissionDenied {
            needs: MIGRATION_GRANTS_NEEDED,
            source,
        },
        e => e,
    })
}

/// [`apply_pending`] in one transaction (on a pooled connection: `conn` comes from the pool).
async fn in_transaction<B: Backend>(
    store: &B::Store,
    conn: &mut B::Connection,
) -> Result<MigrationReport> {
    let mut tx = conn.begin_with(crate::store::begin_pooled::<B>()).await?;
    let report = apply_pending::<B>(store, &mut tx).await?;
    tx.commit().await?;
    Ok(report)
}

/// Create the version table, then apply each migration above the version found there (read
/// again: a concurrent migrator may have gone ahead).
async fn apply_pending<B: Backend>(
    store: &B::Store,
    conn: &mut B::Connection,
) -> Result<MigrationReport> {
    store.create_version_table(conn).await?;
    let from_version = store.schema_version(conn).await?;
    let latest = <B::Store as Schema<B>>::latest_version();
    check_not_newer(from_version, latest)?;
    let mut applied = Vec::new();
    for m in <B::Store as Schema<B>>::migrations()
        .iter()
        .filter(|m| m.version > from_version)
    {
        tracing::info!(
            version = m.version,
            description = m.description,
            "applying migration"
        );
        store.apply_migration(conn, m).await?;
        applied.push(m.version);
    }
    Ok(MigrationReport {
        from_version,
        to_version: latest,
        applied,
    })
}
