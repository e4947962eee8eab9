//! An exactly-once pipeline: topic → transform → topic. A worker consumes `example.orders-in`
//! through the cluster group `enricher` and, in the job transaction that acks each order,
//! writes a business row and publishes the enriched order to `example.orders-enriched`. The
//! row, the output record and the ack commit together: a crash at any point leaves all three
//! or none, so every order has exactly one enriched record (no Kafka-style transactions
//! protocol needed: it is one database transaction).
//!
//! Run: `cargo run -p sqlmq --example pipeline`, against the server at `SQLMQ_DATABASE_URL`
//! (default `mysql://root@127.0.0.1:3306/test`). It deletes and recreates both topics and
//! creates the table `example_orders`.

mod common;

use sqlmq::topic::StartAt;
use sqlmq::{Delivery, GroupConfig, JobContext, Outcome, Record, TopicConfig, Worker};

const INPUT: &str = "example.orders-in";
const OUTPUT: &str = "example.orders-enriched";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    common::delete_topics(&client, &[INPUT, OUTPUT]).await?;
    let input = client
        .create_topic(INPUT, TopicConfig::default().partitions(2))
        .await?;
    let output = client
        .create_topic(OUTPUT, TopicConfig::default().partitions(2))
        .await?;
    input
        .create_group("enricher", GroupConfig::default(), StartAt::Earliest)
        .await?;
    let audit = output
        .create_group("audit", GroupConfig::broadcast(), StartAt::Earliest)
        .await?;
    common::create_orders_table(&client).await?;

    for customer in ["ada", "bob", "cy", "ada"] {
        input.publish(Record::new(customer).key(customer)).await?;
    }
    input.sequence().await?;

    // The transform: one transaction per input holds the business row, the output record
    // and the ack. Retried inputs (after a crash or an error) find none of their earlier
    // outputs: a rolled-back attempt left nothing behind.
    let report = Worker::builder(&client)
        .topic_group_raw(INPUT, "enricher", move |d: Delivery, ctx: JobContext| {
            let output = output.clone();
            async move {
                let customer = String::from_utf8_lossy(&d.body).into_owned();
                let mut tx = ctx.begin().await?;
                let order = common::insert_order(&mut tx, &customer).await?;
                let enriched = serde_json::json!({
                    "customer": customer,
                    "order": order,
                    "from": format!("{}:{}", d.partition.unwrap_or_default(), d.offset.unwrap_or_default()),
                });
                tx.publish(&output, Record::json(&enriched)?.key(customer))
                    .await?;
                tx.commit().await?; // row + output + ack, or nothing
                Ok::<_, anyhow::Error>(Outcome::Done)
            }
        })
        .stop_when_drained()
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;
    println!("enricher handled {} orders", report.acked);

    // Read the output topic: one enriched record per input.
    client.topic(OUTPUT).await?.sequence().await?;
    let mut reader = audit.reader("example").await?;
    for r in reader.poll(100).await? {
        println!(
            "{OUTPUT} {}:{} {}",
            r.partition,
            r.offset,
            String::from_utf8_lossy(&r.body)
        );
    }
    Ok(())
}
