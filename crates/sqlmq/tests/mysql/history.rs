//! InnoDB's history list length (`Client::history_list_length`): the runtime user reads it on
//! MariaDB (a status variable every user may read) and is told what to grant on MySQL (PROCESS,
//! `GrantRole::Monitoring`), after which it reads it; the figure counts the undo logs a held
//! read view keeps from purge.

use sqlmq::admin::{Flavor, GrantRole, HistoryListLength};
use sqlmq::{Client, MySql};
use sqlmq_testkit::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_user_reads_it_or_is_told_what_to_grant() {
    let db = TestDb::<MySql>::new().await;
    let client = db.client().await;
    let got = client.history_list_length().await.unwrap();
    let monitoring = client
        .grants(GrantRole::Monitoring, &db.name, "%")
        .await
        .unwrap();
    if client.server().flavor == Flavor::MariaDb {
        assert!(matches!(got, Some(HistoryListLength::Length(_))), "{got:?}");
        assert!(monitoring.is_empty(), "{monitoring:?}");
    } else {
        // MySQL: the runtime grants leave PROCESS out; the reason names it and the way out.
        let Some(HistoryListLength::Unavailable(reason)) = &got else {
            panic!("expected unavailable, got {got:?}")
        };
        assert!(
            reason.contains("PROCESS") && reason.contains("--monitoring"),
            "{reason}"
        );
        assert_eq!(
            monitoring,
            [format!("GRANT PROCESS ON *.* TO '{}'@'%';", db.name)]
        );
        let granted = monitoring_client(&db).await;
        let got = granted.history_list_length().await.unwrap();
        assert!(matches!(got, Some(HistoryListLength::Length(_))), "{got:?}");
        granted.pool().close().await;
    }
    db.drop().await;
}

/// A client on `db` as its runtime user, with what `GrantRole::Monitoring` prints granted.
async fn monitoring_client(db: &TestDb<MySql>) -> Client<MySql> {
    let client = db.client().await;
    let grants = client
        .grants(GrantRole::Monitoring, &db.name, "%")
        .await
        .unwrap();
    if grants.is_empty() {
        return client;
    }
    for grant in &grants {
        db.exec(grant, &[]).await;
    }
    // Privileges are a session's from its start: a client opened now has them.
    Client::<MySql>::open(&db.url).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_counts_the_undo_logs_a_read_view_keeps_from_purge() {
    let db = TestDb::<MySql>::new().await;
    let client = monitoring_client(&db).await;
    // A transaction left open with a read view: purge may not remove any row version committed
    // after it, whoever committed it (the long-running transaction the alert is about).
    let updates = 200;
    let view = sqlmq_testkit::hold_undo(&db, updates as usize).await;
    let length = client
        .history_list_length()
        .await
        .unwrap()
        .and_then(|h| h.length())
        .expect("readable with the monitoring grants");
    assert!(length >= updates, "{length} < {updates}");
    view.release().await;
    db.drop().await;
}
