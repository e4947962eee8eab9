//! The migration loop, written once over the store's `SqlStore` primitives: read the version,
//! refuse a newer schema, and apply what is missing (or reverse what is above the version
//! asked for) — in one transaction where the backend's DDL is transactional, under the
//! backend's lock hint where it is not.

use sqlx::Connection;

use crate::domain::{Error, MIGRATION_GRANTS_NEEDED, MigrationReport, Result, check_not_newer};
use crate::store::Backend;
use crate::store::SqlStore;
use crate::store::rows::Migration;

/// Take the schema on `conn` to version `target`, up or down (idempotent; harmless when run by
/// several processes at once).
pub(crate) async fn migrate_to<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    target: i64,
) -> Result<MigrationReport> {
    let latest = SqlStore::<B>::latest_version();
    if !(0..=latest).contains(&target) {
        return Err(Error::InvalidArgument(format!(
            "schema version {target} is not one this sqlmq knows (0 to {latest})"
        )));
    }
    // At the target: nothing to do, and no DDL either, so that the runtime user (which has no
    // CREATE right) may run `migrate` at start-up as many deployments do.
    let found = store.schema_version(conn).await?;
    check_not_newer(found, latest)?;
    if found == target {
        return Ok(MigrationReport {
            from_version: found,
            to_version: found,
            applied: Vec::new(),
            reverted: Vec::new(),
        });
    }
    let report = if SqlStore::<B>::DDL_IN_TRANSACTION {
        in_transaction::<B>(store, conn, target).await
    } else {
        let locked = store.lock_migrations(conn).await;
        let report = step::<B>(store, conn, target).await;
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

/// [`step`] in one transaction (on a pooled connection: `conn` comes from the pool).
async fn in_transaction<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    target: i64,
) -> Result<MigrationReport> {
    let mut tx = conn.begin_with(crate::store::begin_pooled::<B>()).await?;
    let report = step::<B>(store, &mut tx, target).await?;
    tx.commit().await?;
    Ok(report)
}

/// Create the version table, read the version again (a concurrent migrator may have gone
/// ahead), then apply or reverse the migrations between it and `target`.
async fn step<B: Backend>(
    store: &SqlStore<B>,
    conn: &mut B::Connection,
    target: i64,
) -> Result<MigrationReport> {
    store.create_version_table(conn).await?;
    let from_version = store.schema_version(conn).await?;
    check_not_newer(from_version, SqlStore::<B>::latest_version())?;
    let mut report = MigrationReport {
        from_version,
        to_version: target,
        applied: Vec::new(),
        reverted: Vec::new(),
    };
    let migrations = SqlStore::<B>::migrations();
    if target >= from_version {
        for m in migrations
            .iter()
            .filter(|m| m.version > from_version && m.version <= target)
        {
            if m.reverse.is_none() {
                tracing::warn!(
                    version = m.version,
                    description = m.description,
                    "this migration cannot be reversed: `migrate --to` will not go below it"
                );
            }
            log_step(m, "applying migration");
            store.apply_migration(conn, m).await?;
            report.applied.push(m.version);
        }
        return Ok(report);
    }
    let down: Vec<_> = migrations
        .iter()
        .rev()
        .filter(|m| m.version > target && m.version <= from_version)
        .collect();
    let live = store.live_processes(conn).await?;
    if live > 0 {
        return Err(Error::DowngradeRefused {
            target,
            reason: format!(
                "{live} worker process(es) of this version are running (`sqlmq processes` lists \
                 them); stop them first"
            ),
        });
    }
    // Every check before the first drop: where DDL is not transactional a refusal half-way
    // would leave the schema between the two versions.
    for m in &down {
        if let Some(reason) = store.reversal_refused(conn, m).await? {
            return Err(Error::DowngradeRefused { target, reason });
        }
    }
    for m in down {
        log_step(m, "reversing migration");
        store.reverse_migration(conn, m).await?;
        report.reverted.push(m.version);
    }
    Ok(report)
}

/// One log line per migration applied or reversed.
fn log_step(m: &Migration, what: &'static str) {
    tracing::info!(version = m.version, description = m.description, "{what}");
}
