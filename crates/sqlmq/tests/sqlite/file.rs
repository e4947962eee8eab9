//! A database file: created when missing, in WAL mode, with durable commits and a busy
//! timeout on sqlmq's connections.

use sqlmq::{Client, Sqlite};
use sqlmq_testkit::TestDb;

/// Guarantee: `sqlite://path` creates the file; sqlmq's connections use WAL (readers never
/// block the writer), `synchronous = FULL` (a commit is on disk when it returns) and a busy
/// timeout of at least 5 s (a writer waits for another process's write instead of failing).
#[tokio::test]
async fn the_file_is_created_in_wal_mode_with_durable_commits() {
    let db = TestDb::<Sqlite>::new().await;
    let path = db.url.trim_start_matches("sqlite://").to_owned();
    std::fs::remove_file(&path).unwrap();
    let client = Client::<Sqlite>::open(&db.url).await.unwrap();
    client.migrate().await.unwrap();
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} was not created"
    );
    assert!(client.server().durable(), "{:?}", client.server().warnings);
    let mut conn = client.pool().acquire().await.unwrap();
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(journal, "wal");
    assert_eq!(synchronous, 2, "FULL");
    assert!(busy >= 5000, "busy timeout {busy} ms");
    drop(conn);
    db.drop().await;
}

/// Guarantee: a URL of another scheme, or a directory that does not exist, is a clear error.
#[tokio::test]
async fn bad_urls_are_clear_errors() {
    let err = Client::<Sqlite>::open("mysql://root@127.0.0.1/test")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sqlite:"), "{err}");
    let err = Client::<Sqlite>::open("sqlite:///nonexistent-dir-sqlmq/x.db")
        .await
        .unwrap_err();
    assert!(!err.to_string().is_empty());
}
