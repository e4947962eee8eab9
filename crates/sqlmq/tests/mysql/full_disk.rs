//! Out of space: a private `mariadbd` whose tablespace has a size limit, filled by sends. The
//! send that does not fit fails with the typed `Error::DatabaseFull` and writes nothing (a
//! batch: none of it); a worker keeps claiming and acking through it; once the acks have freed
//! pages, sends succeed again.
//!
//! Why a tablespace limit and not a full file system: MariaDB 10.11 on a tmpfs that fills
//! either stops answering ("preallocating … failed with error 28", then nothing) or aborts
//! ("[FATAL] InnoDB: Error (Out of disk space) in rollback", signal 6) — measured here with
//! this test's sends on a 120 MB tmpfs. The server's own limit (`innodb_data_file_path`'s `max`)
//! is where InnoDB refuses a write cleanly with 1114, the error a disk that fills between
//! extents also gives; a crashed server is an outage, which the restart tests cover.

use sqlmq::{Client, QueueConfig};
use sqlmq_testkit::{PrivateServer, fill_and_drain};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_fails_sends_cleanly_while_consumers_keep_going() {
    // Every table in the system tablespace (no file per table), which may grow to 64 MB.
    let mut server = PrivateServer::install_with(&[
        "--innodb-file-per-table=0",
        "--innodb-data-file-path=ibdata1:12M:autoextend:max:64M",
    ]);
    server.start();
    server.wait_ready().await;
    PrivateServer::create_database(&server.url("mysql"), "app").await;
    let client = Client::connect(&server.url("app")).await.unwrap();
    client.migrate().await.unwrap();
    client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();

    let log = server.dir().join("error.log");
    // Nothing to free: the acks' rows free their pages once purged.
    let full = fill_and_drain(
        &client,
        || {},
        || {
            format!(
                "server log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        },
    )
    .await;
    assert_eq!(full.mysql_error_number(), Some(1114), "{full:?}");
}
