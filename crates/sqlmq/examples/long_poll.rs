//! A long poll: `receive_wait` returns at the first message, or empty when its wait runs out.
//! Here a second client (standing in for another process, so no in-process wakeup helps) sends
//! a message half a second after the poll starts; the client's shared probe finds it.
//!
//! Run: `cargo run -p sqlmq --example long_poll`, against the server at `SQLMQ_DATABASE_URL`
//! (default `mysql://root@127.0.0.1:3306/test`). It creates the queue `example.emails` and
//! empties it first.

mod common;

use std::time::{Duration, Instant};

use sqlmq::{Message, QueueConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let emails = client
        .create_queue("example.emails", QueueConfig::default())
        .await?;
    emails.purge().await?;

    let other = common::connect().await?;
    let sender = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let q = other.queue("example.emails").await?;
        q.send(Message::new("welcome, ada")).await?;
        Ok::<Instant, sqlmq::Error>(Instant::now())
    });

    let batch = emails
        .receive_wait(10, Duration::from_secs(30), Duration::from_secs(20))
        .await?;
    let answered = Instant::now();
    let sent = sender.await??;
    for d in &batch {
        println!("got {:?}", String::from_utf8_lossy(&d.body));
        emails.ack(d.receipt()).await?;
    }
    println!(
        "{} message(s), answered {} ms after the send",
        batch.len(),
        answered.saturating_duration_since(sent).as_millis()
    );
    // Nothing comes: an empty answer when the wait runs out.
    let none = emails
        .receive_wait(10, Duration::from_secs(30), Duration::from_millis(300))
        .await?;
    println!("then {} message(s) after 300 ms", none.len());
    Ok(())
}
