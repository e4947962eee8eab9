//! `Server`: connecting, the server's facts, the locking self-test, the statement budget, the
//! table prefix, the history list length. (The database clock, `now_us`, is checked in
//! `schema.rs`.)

use sqlx::Connection;

use super::{SuiteBackend, fixture};
use crate::domain::{Error, ServerInfo};
use crate::store::Backend;
use crate::store::SqlStore;
use crate::store::rows::ConnectOptions;

/// The store type of backend `B`.
type StoreOf<B> = SqlStore<B>;

fn options() -> ConnectOptions {
    ConnectOptions {
        max_connections: 4,
        connect_timeout: std::time::Duration::from_secs(10),
        lock_wait_timeout: std::time::Duration::from_secs(5),
    }
}

/// `connect` opens pools that run statements; a URL of another scheme is refused with
/// `InvalidArgument`, before any connection is tried.
async fn connect_and_refuse_other_schemes<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let pools = <B as crate::store::Server>::connect(&db.url, &options())
        .await
        .unwrap();
    let mut conn = pools.read.acquire().await.unwrap();
    let now = <B as crate::store::Server>::now_us(client.store(), &mut conn)
        .await
        .unwrap();
    assert!(now > 0);
    drop(conn);
    let other = "postgres://localhost/x";
    match <B as crate::store::Server>::connect(other, &options()).await {
        Err(Error::InvalidArgument(_)) => {}
        Err(e) => panic!("{other}: {e}"),
        Ok(_) => panic!("{other} was taken for a {} URL", <B as Backend>::SCHEME),
    }
    pools.write.close().await;
    pools.read.close().await;
    db.drop().await;
}

/// `detect` reads the server's version and durability; the statement budget it gives is at
/// least 64 KiB and within the packet limit; a pool opened by the application is
/// adopted without error.
async fn detect_budget_and_adopt<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let mut conn = B::Connection::connect(&db.url).await.unwrap();
    let info: ServerInfo = <B as crate::store::Server>::detect(&mut conn)
        .await
        .unwrap();
    assert!(!info.version.is_empty());
    let budget = <B as crate::store::Server>::statement_budget(&info);
    assert!(budget >= 64 * 1024, "budget {budget}");
    assert!((budget as u64) <= info.max_allowed_packet, "{info:?}");
    conn.close().await.unwrap();
    <B as crate::store::Server>::adopt(client.pool());
    db.drop().await;
}

/// The locking self-test passes on the database sqlmq runs on, and runs again harmlessly.
async fn verify_locking_passes<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    let store = client.store();
    <B as crate::store::Server>::verify_locking(store, client.pool())
        .await
        .unwrap();
    <B as crate::store::Server>::verify_locking(store, client.pool())
        .await
        .unwrap();
    db.drop().await;
}

/// A store keeps the table prefix it was made with; statements of two prefixes are texts of
/// their own.
async fn prefixes_are_kept<B: SuiteBackend>() {
    let a = StoreOf::<B>::with_prefix("app_");
    let b = StoreOf::<B>::with_prefix("");
    assert_eq!(a.prefix(), "app_");
    assert_eq!(b.prefix(), "");
}

/// Where the backend keeps an undo history (`Server::UNDO_HISTORY`), `history_list_length`
/// answers with a length, or with the server's refusal of a user without the privilege to read
/// it (MySQL's PROCESS); where it keeps none, the client answers "not applicable" (`None`)
/// without asking.
async fn history_list_length_where_there_is_one<B: SuiteBackend>() {
    let (db, client) = fixture::<B>().await;
    if <B as crate::store::Server>::UNDO_HISTORY {
        let mut conn = client.pool().acquire().await.unwrap();
        let read = <B as crate::store::Server>::history_list_length(
            client.store(),
            &mut conn,
            client.server(),
        )
        .await;
        match read {
            Ok(Some(_)) | Err(Error::PermissionDenied { .. }) => {}
            other => panic!("{other:?}"),
        }
        drop(conn);
        assert!(client.history_list_length().await.unwrap().is_some());
    } else {
        assert_eq!(client.history_list_length().await.unwrap(), None);
    }
    db.drop().await;
}

sqlmq_testkit::conformance!(async: [
    connect_and_refuse_other_schemes,
    detect_budget_and_adopt,
    verify_locking_passes,
    prefixes_are_kept,
    history_list_length_where_there_is_one,
]);
