//! Exactly-once effects with `ack_in`: a consumer writes a message's effect and acks the message
//! in one transaction, so the two commit together or not at all. A consumer that was too slow
//! (its lease ended and another consumer took the message) gets `Error::LeaseLost` from
//! `ack_in` and rolls its write back: the effect is applied once, by the current holder.
//!
//! Run: `cargo run -p sqlmq --example ack_in`, against the server at `SQLMQ_DATABASE_URL`
//! (default `mysql://root@127.0.0.1:3306/test`). It creates the queue `example.payments` and
//! the table `example_ledger`, and empties both first so that every run prints the same.

mod common;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlmq::{Client, Delivery, Message, Queue, QueueConfig};

/// A message's body.
#[derive(Serialize, Deserialize)]
struct Payment {
    amount_cents: i64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let payments = client
        .create_queue("example.payments", QueueConfig::default())
        .await?;
    payments.purge().await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS example_ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, \
         message_id CHAR(36) NOT NULL, amount_cents BIGINT NOT NULL)",
    )
    .execute(client.pool())
    .await?;
    sqlx::query("DELETE FROM example_ledger")
        .execute(client.pool())
        .await?;
    for amount_cents in [1_000, 2_500, 400] {
        payments
            .send(Message::json(&Payment { amount_cents })?)
            .await?;
    }

    // Consumer A claims the first payment with a lease much shorter than its work, and writes
    // the ledger row in its transaction...
    let slow = payments
        .receive(1, Duration::from_millis(300))
        .await?
        .remove(0);
    let mut slow_tx = client.begin().await?;
    record(&mut slow_tx, &slow).await?;
    tokio::time::sleep(Duration::from_millis(800)).await;

    // ...meanwhile its lease ended: consumer B is handed the same message (new fencing token)
    // and applies it.
    let taken = payments
        .receive(1, Duration::from_secs(30))
        .await?
        .remove(0);
    assert_eq!(
        taken.id, slow.id,
        "the expired message is handed out again first"
    );
    println!(
        "B: applied {} (token {}): {}",
        taken.id,
        taken.token,
        apply(&client, &payments, &taken).await?
    );

    // A's ack is refused: its ledger row must go. (Dropping the transaction rolls it back too.)
    match payments.ack_in(&mut slow_tx, slow.receipt()).await {
        Err(sqlmq::Error::LeaseLost { id, token }) => {
            slow_tx.rollback().await?;
            println!("A: lease lost for {id} (token {token}): rolled back");
        }
        other => anyhow::bail!("expected LeaseLost, got {other:?}"),
    }

    // The rest, the ordinary way.
    loop {
        let batch = payments.receive(10, Duration::from_secs(30)).await?;
        if batch.is_empty() {
            break;
        }
        for d in &batch {
            println!("applied {}: {}", d.id, apply(&client, &payments, d).await?);
        }
    }

    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT message_id, COUNT(*) FROM example_ledger GROUP BY message_id ORDER BY message_id",
    )
    .fetch_all(client.pool())
    .await?;
    for (message_id, count) in &rows {
        println!("ledger: {message_id} applied {count} time(s)");
    }
    Ok(())
}

/// The handler's effect: one ledger row for the payment.
async fn record(conn: &mut sqlx::MySqlConnection, d: &Delivery) -> anyhow::Result<()> {
    let payment: Payment = d.json()?;
    sqlx::query("INSERT INTO example_ledger (message_id, amount_cents) VALUES (?, ?)")
        .bind(d.id.to_string())
        .bind(payment.amount_cents)
        .execute(conn)
        .await?;
    Ok(())
}

/// Handle `d`: its ledger row and its ack in one transaction. Returns what happened.
async fn apply(client: &Client, queue: &Queue, d: &Delivery) -> anyhow::Result<&'static str> {
    let mut tx = client.begin().await?;
    record(&mut tx, d).await?;
    match queue.ack_in(&mut tx, d.receipt()).await {
        Ok(()) => {
            tx.commit().await?;
            Ok("ledger row and ack committed")
        }
        Err(sqlmq::Error::LeaseLost { .. }) => {
            // Another consumer owns the message now: its effect is theirs to write.
            tx.rollback().await?;
            Ok("lease lost, rolled back")
        }
        Err(e) => Err(e.into()),
    }
}
