//! `store/body/migrate.rs`: the version, the version table, the lock hint, one migration at a time, the
//! grants; and `Server::now_us`, the database clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlmq_testkit::TestDb;

use super::{SuiteBackend, fixture, messages, put, queue};
use crate::Client;
use crate::domain::GrantRole;
use crate::store::SqlStore;

/// The migrations of backend `B`.
fn migrations<B: SuiteBackend>() -> &'static [crate::store::rows::Migration] {
    SqlStore::<B>::migrations()
}

/// The schema version this build writes.
fn latest<B: SuiteBackend>() -> i64 {
    SqlStore::<B>::latest_version()
}

/// A client as the database's admin (DDL allowed).
async fn admin<B: SuiteBackend>(db: &TestDb<B>) -> Client<B> {
    Client::builder()
        .open::<B>(&db.admin_url)
        .await
        .expect("connect as admin")
}

/// Migrations are numbered 1, 2, … without gaps; after a migration the database is at the
/// latest version.
async fn version_after_migrate<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let versions: Vec<i64> = migrations::<B>().iter().map(|m| m.version).collect();
    assert_eq!(versions, (1..=versions.len() as i64).collect::<Vec<_>>());
    assert_eq!(latest::<B>(), *versions.last().unwrap());
    let mut conn = client.pool().acquire().await.unwrap();
    assert_eq!(
        client.store().schema_version(&mut conn).await.unwrap(),
        latest::<B>()
    );
    drop(conn);
    let mut conn = client.reader().acquire().await.unwrap();
    assert_eq!(
        client.store().schema_version(&mut conn).await.unwrap(),
        latest::<B>()
    );
    drop(conn);
    db.drop().await;
}

/// The primitives migrate an empty database by hand: version 0 before the version table and
/// right after it, then each version as it is applied.
async fn migrate_by_hand<B: SuiteBackend>() {
    let db = TestDb::<B>::new().await;
    let admin = admin(&db).await;
    let store = admin.store();
    let mut conn = admin.pool().acquire().await.unwrap();
    assert_eq!(store.schema_version(&mut conn).await.unwrap(), 0);
    store.create_version_table(&mut conn).await.unwrap();
    store.create_version_table(&mut conn).await.unwrap();
    assert_eq!(store.schema_version(&mut conn).await.unwrap(), 0);
    for m in migrations::<B>() {
        store.apply_migration(&mut conn, m).await.unwrap();
        assert_eq!(store.schema_version(&mut conn).await.unwrap(), m.version);
    }
    drop(conn);
    admin.pool().close().await;
    assert_eq!(db.count("schema_migrations").await, latest::<B>());
    // The runtime user works on it.
    let client = Client::builder().open::<B>(&db.url).await.unwrap();
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", 1)).await;
    db.drop().await;
}

/// Applying a migration that is applied already, or creating the version table again, is
/// harmless: no error, the version and the data stay (in a transaction where the backend's
/// DDL is transactional, as the engine runs it, and outside one).
async fn reapplying_is_harmless<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let q = queue(&client, "q").await;
    put(&client, q, &messages("m", 3)).await;
    let admin = admin(&db).await;
    let store = admin.store();
    let mut conn = admin.pool().acquire().await.unwrap();
    store.create_version_table(&mut conn).await.unwrap();
    for m in migrations::<B>() {
        store.apply_migration(&mut conn, m).await.unwrap();
    }
    drop(conn);
    if SqlStore::<B>::DDL_IN_TRANSACTION {
        let mut tx = admin.begin().await.unwrap();
        for m in migrations::<B>() {
            store.apply_migration(&mut tx, m).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let mut conn = admin.pool().acquire().await.unwrap();
    assert_eq!(
        store.schema_version(&mut conn).await.unwrap(),
        latest::<B>()
    );
    drop(conn);
    admin.pool().close().await;
    assert_eq!(db.count("schema_migrations").await, latest::<B>());
    assert_eq!(db.count("messages").await, 3);
    assert_eq!(db.count("ready").await, 3);
    assert_eq!(db.count("probe").await, 1);
    let mut conn = client.pool().acquire().await.unwrap();
    assert!(
        client
            .store()
            .queue_by_name(&mut conn, "q")
            .await
            .unwrap()
            .is_some()
    );
    drop(conn);
    db.drop().await;
}

/// A migration interrupted after any of its statements (a `kill -9` where DDL commits
/// statement by statement; where it is transactional, nothing of it stays) completes when
/// `migrate` runs again: each version recorded once, the schema works. The same for a reverse
/// interrupted after any of its drops, run again down or up.
async fn an_interrupted_migration_completes_when_run_again<B: SuiteBackend>() {
    for m in migrations::<B>() {
        for cut in 0..=m.statements.len() {
            let db = TestDb::<B>::new().await;
            let admin = admin(&db).await;
            admin.migrate_to(m.version - 1).await.unwrap();
            for statement in &m.statements[..cut] {
                db.exec(&statement.replace("{p}", "sqlmq_"), &[]).await;
            }
            let report = admin.migrate().await.unwrap();
            assert_eq!(report.from_version, m.version - 1);
            works_at_latest(&db, &admin).await;
            admin.pool().close().await;
            db.drop().await;
        }
        let drops = m.reverse.as_ref().map_or(&[][..], |r| r.drops);
        for cut in 0..=drops.len() {
            for rerun_down in [true, false] {
                let db = TestDb::<B>::new().await;
                let admin = admin(&db).await;
                admin.migrate_to(m.version).await.unwrap();
                db.exec(
                    "DELETE FROM sqlmq_schema_migrations WHERE version = ?",
                    &[m.version.into()],
                )
                .await;
                for table in &drops[..cut] {
                    db.exec(&format!("DROP TABLE sqlmq_{table}"), &[]).await;
                }
                if rerun_down {
                    let report = admin.migrate_to(m.version - 1).await.unwrap();
                    assert_eq!(report.to_version, m.version - 1);
                }
                admin.migrate().await.unwrap();
                works_at_latest(&db, &admin).await;
                admin.pool().close().await;
                db.drop().await;
            }
        }
    }
}

/// Every version recorded once, and a queue works.
async fn works_at_latest<B: SuiteBackend>(db: &TestDb<B>, admin: &Client<B>) {
    assert_eq!(db.count("schema_migrations").await, latest::<B>());
    assert_eq!(admin.schema_version(), latest::<B>());
    let q = queue(admin, "q").await;
    put(admin, q, &messages("m", 1)).await;
    assert_eq!(db.count("ready").await, 1);
}

/// The lock hint never fails: taken or not, it can be released and taken again the same way,
/// by the admin and by the runtime user.
async fn lock_and_unlock<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let admin = admin(&db).await;
    for c in [&admin, &client] {
        let mut conn = c.pool().acquire().await.unwrap();
        let first = c.store().lock_migrations(&mut conn).await;
        if first {
            c.store().unlock_migrations(&mut conn).await;
        }
        // Releasing a lock not held is no error either.
        c.store().unlock_migrations(&mut conn).await;
        let again = c.store().lock_migrations(&mut conn).await;
        assert_eq!(again, first);
        if again {
            c.store().unlock_migrations(&mut conn).await;
        }
    }
    admin.pool().close().await;
    db.drop().await;
}

/// The grants name the user; the runtime role's give data statements (and calls of the
/// send procedure) only, the migration role's DDL too; a backend without users has none of either.
async fn grants_by_role<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let mut conn = client.pool().acquire().await.unwrap();
    let store = client.store();
    let runtime = <B as crate::store::body::Dialect>::grants(
        store,
        &mut conn,
        GrantRole::Runtime,
        "app",
        "%",
    )
    .await
    .unwrap();
    let migration = <B as crate::store::body::Dialect>::grants(
        store,
        &mut conn,
        GrantRole::Migration,
        "app",
        "%",
    )
    .await
    .unwrap();
    drop(conn);
    for g in runtime.iter().chain(&migration) {
        assert!(g.starts_with("GRANT ") && g.contains("'app'@'%'"), "{g}");
    }
    assert_eq!(runtime.is_empty(), migration.is_empty());
    for g in &runtime {
        assert!(!g.contains("CREATE") && !g.contains("ALTER"), "{g}");
        assert!(
            g.contains("SELECT") || g.contains("EXECUTE ON PROCEDURE"),
            "{g}"
        );
    }
    if !migration.is_empty() {
        assert!(
            migration.iter().any(|g| g.contains("CREATE")),
            "{migration:?}"
        );
        let all = migration.join(" ");
        for right in ["SELECT", "INSERT", "UPDATE", "DELETE"] {
            assert!(all.contains(right), "{right}: {migration:?}");
        }
    }
    db.drop().await;
}

/// The database clock is this machine's, within a few seconds, on writers and readers, and
/// does not go back.
async fn the_database_clock<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let machine = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64
    };
    let near = Duration::from_secs(5).as_micros() as i64;
    let mut last = 0;
    for pool in [client.pool(), client.reader(), client.pool()] {
        let mut conn = pool.acquire().await.unwrap();
        let now = <B as crate::store::Server>::now_us(client.store(), &mut conn)
            .await
            .unwrap();
        assert!((now - machine()).abs() < near, "{now} vs {}", machine());
        assert!(now >= last, "{now} < {last}");
        last = now;
    }
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    version_after_migrate,
    migrate_by_hand,
    reapplying_is_harmless,
    lock_and_unlock,
    an_interrupted_migration_completes_when_run_again,
    grants_by_role,
    the_database_clock,
]);
