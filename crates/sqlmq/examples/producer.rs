//! Producing messages: single sends, an atomic batch, a delayed message, messages sharing an
//! ordering key, an idempotent retry, and `send_in` inside the transaction that writes a
//! business row (both commit, or neither).
//!
//! Run: `cargo run -p sqlmq --example producer`, against the MySQL 8.0+ / MariaDB 10.6+ server
//! at `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the queue
//! `example.emails` and the table `example_orders`, empties the queue first so that every run
//! prints the same counts, and leaves both behind (`sqlmq queues`, `sqlmq recv example.emails`).

mod common;

use std::time::Duration;

use sqlmq::{Message, MessageId, QueueConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let emails = client
        .create_queue("example.emails", QueueConfig::default())
        .await?;
    emails.purge().await?;

    // One message at a time: durable once `send` returns Ok.
    let sent = emails.send(Message::new("welcome, ada")).await?;
    println!("sent {}", sent.id);
    let body = serde_json::json!({"to": "bob@example.com", "template": "welcome"});
    emails
        .send(Message::json(&body)?.header("trace-id", "t-1").priority(-1))
        .await?;

    // A batch: one transaction, visible all at once at commit (or not at all), at any size.
    let batch = (0..100)
        .map(|i| Message::new(format!("newsletter to subscriber {i}")))
        .collect();
    println!("sent a batch of {}", emails.send_batch(batch).await?.len());

    // Delayed: scheduled now, claimable in an hour.
    emails
        .send(Message::new("did you forget something?").delay(Duration::from_secs(3600)))
        .await?;

    // Keyed: strict FIFO per ordering key. Only the first is claimable; the others wait
    // (blocked) until the one before them is acked or dead.
    for step in ["created", "paid", "shipped"] {
        let message = Message::new(format!("order 42 {step}")).ordering_key("order-42");
        emails.send(message).await?;
    }

    // Idempotent: a retry (say, after the connection dropped during COMMIT) sends the same
    // idempotency key again, and within the queue's window that is a no-op returning the
    // original id. The key names the business operation; here it is new on every run so that
    // each run sends its invoice once.
    let key = format!("invoice-{}", MessageId::new());
    let first = emails
        .send(Message::new("invoice 7").idempotency_key(&key))
        .await?;
    let retried = emails
        .send(Message::new("invoice 7").idempotency_key(&key))
        .await?;
    println!(
        "sent {key} twice: the second time a duplicate ({}) of {}",
        retried.duplicate, first.id
    );

    // In the caller's transaction: the order row and its message commit together...
    common::create_orders_table(&client).await?;
    let mut tx = client.begin().await?;
    let order = common::insert_order(&mut tx, "ada").await?;
    let confirmation = serde_json::json!({"order": order, "template": "confirmation"});
    emails
        .send_in(&mut tx, Message::json(&confirmation)?)
        .await?;
    tx.commit().await?;
    println!("order {order} and its confirmation committed together");

    // ...and a rollback leaves neither behind.
    let mut tx = client.begin().await?;
    common::insert_order(&mut tx, "bob").await?;
    emails.send_in(&mut tx, Message::new("never sent")).await?;
    tx.rollback().await?;

    let stats = emails.stats().await?;
    println!(
        "example.emails: {} ready, {} scheduled, {} blocked",
        stats.ready, stats.scheduled, stats.blocked
    );
    Ok(())
}
