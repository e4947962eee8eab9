//! Out of space: a SQLite file on a file system of its own (a 24 MiB tmpfs, with an 8 MiB file
//! beside the database), filled by sends. SQLite answers `SQLITE_FULL`, which sqlmq reports as
//! `Error::DatabaseFull`; the scenario (`sqlmq_testkit::fill_and_drain`) checks that nothing
//! is half-written and that the worker never stops; then the other file is removed (space
//! returns), and the worker drains everything and sends resume.
//!
//! Why space must come back from outside: SQLite in WAL mode keeps committed pages in the log
//! until a checkpoint copies them into the database file, which needs the file to grow: on a
//! full file system neither the log nor the file can, so acks alone cannot make room (seen
//! here: the log stayed at 4.2 MB, the claims failed until space returned).

use sqlmq::{Client, QueueConfig, Sqlite};
use sqlmq_testkit::{Tmpfs, fill_and_drain};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_file_system_fails_sends_cleanly_while_consumers_keep_going() {
    let fs = Tmpfs::mount(24);
    let ballast = fs.path().join("ballast");
    // Room enough, once freed, for the log to grow while the worker drains everything.
    std::fs::write(&ballast, vec![0u8; 8 << 20]).unwrap();
    let url = format!("sqlite://{}", fs.path().join("q.db").display());
    let client = Client::<Sqlite>::open(&url).await.unwrap();
    client.migrate().await.unwrap();
    client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let free = || async { std::fs::remove_file(&ballast).unwrap() };
    let full = fill_and_drain(&client, free, || {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("df {0}; ls -la {0}", fs.path().display()))
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    })
    .await;
    assert!(full.to_string().contains("full"), "{full}");
}
