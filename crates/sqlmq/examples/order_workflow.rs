//! A durable order workflow (the README's "Durable workflows" and the guide's page of the
//! same name, verbatim in `workflow`): reserve stock (a `step_in`: its write and its record
//! commit together), charge (a `step`), wait up to three days for the "shipped" event without
//! holding a worker, then email. The program plays both sides: it runs the worker, and once the
//! run is suspended it emits the event as the warehouse's system would, then prints the run's
//! journal and stops when the order is done.
//!
//! Run: `cargo run -p sqlmq --example order_workflow`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the queue
//! `example.orders` (emptied first) and the table `example_stock`; each run is a new order.

mod common;

use std::time::Duration;

use sqlmq::worker::CancellationToken;
use sqlmq::{Client, JobContext, QueueConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let orders = client
        .create_queue("example.orders", QueueConfig::default())
        .await?;
    orders.purge().await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS example_stock (sku VARCHAR(32) PRIMARY KEY, n INT NOT NULL)",
    )
    .execute(client.pool())
    .await?;
    sqlx::query("REPLACE INTO example_stock (sku, n) VALUES ('mug', 10)")
        .execute(client.pool())
        .await?;

    // A new order id each run: an event is kept a week and the first emit of a name wins, so a
    // second run waiting for the same name would find the first run's event.
    let id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let order = Order {
        id,
        sku: "mug".into(),
        email: "ada@example.com".into(),
    };
    let sent = orders.enqueue(&order).await?;
    let stop = CancellationToken::new();
    let worker = tokio::spawn(workflow(client.clone(), stop.clone()));

    // The warehouse ships the order once the run waits for it (a suspended run holds no worker).
    let event = format!("order-{id}-shipped");
    while client.journal(sent.id).await?.waiting_for != [event.clone()] {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("the run is suspended, waiting for {event}; the warehouse ships it");
    let emitted = client.emit_event(&event, &"DHL 00340434").await?;
    println!("emitted: {} run woken", emitted.woken);
    loop {
        let s = orders.stats().await?;
        if s.ready + s.scheduled + s.in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    let report = worker.await??;
    println!("worker report: {} acked", report.acked);
    Ok(())
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Order {
    id: u64,
    sku: String,
    email: String,
}

impl sqlmq::Job for Order {
    const NAME: &'static str = "order";
}

/// The guide's block, with the `client` of the program. Not formatted: it must stay identical
/// to the guide's text.
#[rustfmt::skip]
async fn workflow(client: Client, stop: CancellationToken) -> anyhow::Result<sqlmq::worker::WorkerReport> {
    use std::time::Duration;
    use sqlmq::{Outcome, Worker};

    let report = Worker::builder(&client)
        .queue("example.orders", |order: Order, ctx: JobContext| async move {
            // Exactly once: the stock row and the step's record commit together.
            ctx.step_in("reserve stock", |tx| Box::pin(async move {
                sqlx::query("UPDATE example_stock SET n = n - 1 WHERE sku = ?").bind(&order.sku).execute(&mut *tx).await
                    .map(|_| ())
            })).await?;
            // At least once, recorded: a retry or a crash after this line does not charge again.
            let charge: String = ctx.step("charge", || async {
                Ok::<_, anyhow::Error>(format!("ch_{}", order.id)) // call the payment provider here
            }).await?;
            // Suspended (no worker held) until the event comes, or for at most three days.
            let shipped: Option<String> = ctx
                .wait_for_event(&format!("order-{}-shipped", order.id), Duration::from_secs(3 * 86_400))
                .await?;
            ctx.step("email", || async {
                match &shipped {
                    Some(tracking) => println!("to {}: order {} ({charge}) shipped, tracking {tracking}", order.email, order.id),
                    None => println!("to {}: order {} ({charge}) is late, sorry", order.email, order.id),
                }
                Ok::<_, anyhow::Error>(())
            }).await?;
            Ok::<_, sqlmq::Error>(Outcome::Done) // Suspended, returned by `?` above, is not a failure
        })
        .run(stop)
        .await?;
    Ok(report)
}
