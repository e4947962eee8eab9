//! The lock-held mode: claim a batch inside your transaction with `receive_in`, write its
//! effects and ack it there with `ack_batch_in`, then commit — one transaction and one commit
//! for the whole batch. A rollback (or a crash) gives the whole batch back at once. Then the
//! same with `take_in`, which claims and removes in one step: no lease, no ack.
//!
//! Run: `cargo run -p sqlmq --example lock_held`, against the server at `SQLMQ_DATABASE_URL`
//! (default `mysql://root@127.0.0.1:3306/test`). It creates the queue `example.clicks` and the
//! table `example_click_counts`, and empties both first so that every run prints the same.

mod common;

use std::time::Duration;

use sqlmq::{Delivery, Message, QueueConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let clicks = client
        .create_queue("example.clicks", QueueConfig::default())
        .await?;
    clicks.purge().await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS example_click_counts (page VARCHAR(64) PRIMARY KEY, \
         clicks BIGINT NOT NULL)",
    )
    .execute(client.pool())
    .await?;
    sqlx::query("DELETE FROM example_click_counts")
        .execute(client.pool())
        .await?;
    let pages = ["/", "/pricing", "/", "/docs", "/", "/pricing"];
    clicks
        .send_batch(pages.iter().map(|p| Message::new(*p)).collect())
        .await?;

    let lease = Duration::from_secs(30); // applies only if a transaction commits without acking
    // A batch that fails half-way: rolled back, the messages are ready again at once (no
    // lease to wait out) and no attempt was counted.
    let mut tx = client.begin().await?;
    let batch = clicks.receive_in(&mut tx, 3, lease).await?;
    println!("claimed {} lock-held, then rolled back", batch.len());
    tx.rollback().await?;

    // Claim, count and ack in one transaction: the counts and the acks commit together.
    loop {
        let mut tx = client.begin().await?;
        let batch = clicks.receive_in(&mut tx, 100, lease).await?;
        count_pages(&mut tx, &batch).await?; // the handler's writes
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        clicks.ack_batch_in(&mut tx, &receipts).await?;
        tx.commit().await?;
        if batch.is_empty() {
            break;
        }
        println!("counted and acked {} in one commit", batch.len());
    }

    // Take them: claimed and removed in one step, no lease and no ack (the cheapest way).
    clicks
        .send_batch(pages.iter().map(|p| Message::new(*p)).collect())
        .await?;
    loop {
        let mut tx = client.begin().await?;
        let batch = clicks.take_in(&mut tx, 100).await?;
        count_pages(&mut tx, &batch).await?; // the handler's writes
        tx.commit().await?; // the counts and the removals, or neither
        if batch.is_empty() {
            break;
        }
        println!("counted and removed {} in one commit", batch.len());
    }

    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT page, clicks FROM example_click_counts ORDER BY page")
            .fetch_all(client.pool())
            .await?;
    for (page, n) in counts {
        println!("{page}: {n}");
    }
    Ok(())
}

/// The handler: one more click for each message's page.
async fn count_pages(conn: &mut sqlx::MySqlConnection, batch: &[Delivery]) -> anyhow::Result<()> {
    for d in batch {
        sqlx::query(
            "INSERT INTO example_click_counts (page, clicks) VALUES (?, 1) \
             ON DUPLICATE KEY UPDATE clicks = clicks + 1",
        )
        .bind(std::str::from_utf8(&d.body)?)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
