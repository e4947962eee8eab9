//! The code of the guide's page docs/guide/src/backends.md, runnable with nothing installed: it creates
//! `app.db` in the current directory, sends a message in the caller's transaction, receives and
//! acks it, and removes the file again.
//!
//! Run: `cargo run -p sqlmq --example readme_sqlite`.

use std::time::Duration;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    run().await?;
    for file in ["app.db", "app.db-wal", "app.db-shm"] {
        let _ = std::fs::remove_file(file);
    }
    Ok(())
}

/// The guide's block, then a receive. Not formatted: it must stay identical to the guide's text.
#[rustfmt::skip]
async fn run() -> anyhow::Result<()> {
    use sqlmq::{Client, Message, QueueConfig, Sqlite};

    let client = Client::<Sqlite>::open("sqlite://app.db").await?; // created when missing
    client.migrate().await?;
    let jobs = client.create_queue("jobs", QueueConfig::default()).await?;
    let mut tx = client.begin().await?; // BEGIN IMMEDIATE: holds the write lock from the start
    jobs.send_in(&mut tx, Message::new("hello")).await?;
    tx.commit().await?;

    for d in jobs.receive(10, Duration::from_secs(30)).await? {
        println!("received {}", String::from_utf8_lossy(&d.body));
        jobs.ack(d.receipt()).await?;
    }
    Ok(())
}
