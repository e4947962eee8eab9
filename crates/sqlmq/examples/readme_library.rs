//! The code of the README's first program and of the guide's "Queues" page
//! (docs/guide/src/queues.md), verbatim: `tests/readme.rs` checks that every ```rust block of
//! README.md and of the guide stands unchanged in an example, and `cargo test` compiles the
//! examples, so the docs' code cannot rot. For a walk-through that runs anywhere, see
//! `producer.rs` and `ack_in.rs`.
//!
//! Run: `cargo run -p sqlmq --example readme_library`. Like the guide, it connects to the
//! database `app` on 127.0.0.1 and expects a table
//! `orders (id BIGINT PRIMARY KEY, mailed BOOL NOT NULL DEFAULT FALSE)` there; a second run
//! stops at the duplicate order 42.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    readme().await
}

/// The guide's block. Not formatted: it must stay identical to the guide's text.
#[rustfmt::skip]
async fn readme() -> anyhow::Result<()> {
    use std::time::Duration;
    use sqlmq::{Client, Message, QueueConfig};

    let client = Client::connect("mysql://root@127.0.0.1:3306/app").await?;
    client.migrate().await?; // idempotent; also `sqlmq migrate`
    let emails = client.create_queue("emails", QueueConfig::default().max_attempts(5)).await?;

    // Send inside the transaction that creates the order: both or neither.
    let mut tx = client.begin().await?;
    sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
    emails.send_in(&mut tx, Message::json(&serde_json::json!({"order": 42}))?).await?;
    tx.commit().await?;

    // Consume: claim, handle, ack (here in the handler's own transaction).
    for d in emails.receive(10, Duration::from_secs(30)).await? {
        let mut tx = client.begin().await?;
        sqlx::query("UPDATE orders SET mailed = 1 WHERE id = 42").execute(&mut *tx).await?;
        match emails.ack_in(&mut tx, d.receipt()).await {
            Ok(()) => tx.commit().await?,
            Err(_) => tx.rollback().await?, // lease lost: another consumer owns it now
        }
    }
    Ok(())
}
