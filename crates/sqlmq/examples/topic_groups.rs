//! Topics and consumer groups: a topic with partitions, `publish` and `publish_in` (inside a
//! business transaction), a cluster group whose records a worker handles (`topic_group_raw`),
//! a broadcast group read by a member (`BroadcastReader`) that checkpoints its position, and a
//! broadcast member run by the worker (`topic_broadcast_raw`).
//!
//! Run: `cargo run -p sqlmq --example topic_groups`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It deletes and recreates
//! the topic `example.orders` (so every run starts at offset 0) and creates the table
//! `example_orders`.

mod common;

use std::convert::Infallible;

use sqlmq::topic::StartAt;
use sqlmq::{Delivery, GroupConfig, JobContext, Outcome, Record, TopicConfig, Worker};

/// The example's topic.
const TOPIC: &str = "example.orders";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    common::delete_topics(&client, &[TOPIC]).await?;
    let orders = client
        .create_topic(TOPIC, TopicConfig::default().partitions(4))
        .await?;
    // Groups read from their start position on: created before publishing, at `Earliest`.
    orders
        .create_group("billing", GroupConfig::default(), StartAt::Earliest)
        .await?;
    let audit = orders
        .create_group("audit", GroupConfig::broadcast(), StartAt::Earliest)
        .await?;

    // The key picks the partition: one customer's records stay in order.
    for (customer, total) in [("ada", 30), ("bob", 12), ("ada", 7), ("cy", 99)] {
        let record = Record::json(&serde_json::json!({"customer": customer, "total": total}))?;
        let published = orders.publish(record.key(customer)).await?;
        println!(
            "published for {customer} to partition {}",
            published.partition
        );
    }

    // In the caller's transaction: the order row and its record commit together.
    common::create_orders_table(&client).await?;
    let mut tx = client.begin().await?;
    let order = common::insert_order(&mut tx, "ada").await?;
    let record = Record::json(&serde_json::json!({"customer": "ada", "order": order}))?;
    orders.publish_in(&mut tx, record.key("ada")).await?;
    tx.commit().await?;

    // Offsets are assigned right after each commit, by a sequencing step. Do it now, so that
    // the drained-worker below cannot look before the last record has its offset.
    orders.sequence().await?;

    // Cluster mode: each record goes to one member of `billing`, acked one by one.
    let report = Worker::builder(&client)
        .topic_group_raw(
            TOPIC,
            "billing",
            |d: Delivery, _ctx: JobContext| async move {
                println!(
                    "billing: partition {} offset {} key {}: {}",
                    d.partition.unwrap_or_default(),
                    d.offset.unwrap_or_default(),
                    d.ordering_key.as_deref().unwrap_or("-"),
                    String::from_utf8_lossy(&d.body)
                );
                Ok::<_, Infallible>(Outcome::Done)
            },
        )
        .stop_when_drained()
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;
    println!("billing acked {} records", report.acked);

    // Broadcast mode: this member reads every record, in offset order per partition, and
    // checkpoints where it is.
    let mut reader = audit.reader("audit-1").await?;
    loop {
        let records = reader.poll(2).await?;
        if records.is_empty() {
            break;
        }
        for r in &records {
            println!("audit: {}:{} {:?}", r.partition, r.offset, r.key);
        }
        reader.checkpoint().await?;
    }

    // The same member started again resumes from its checkpoint: nothing left to read.
    let mut restarted = audit.reader("audit-1").await?;
    println!(
        "audit-1 restarted at {:?}, {} record(s) left",
        restarted.positions(),
        restarted.poll(100).await?.len()
    );

    // A broadcast member on the worker: every record, in offset order per partition, as
    // member `node-a` (a failing record would be retried in place, holding back only its
    // partition, and end as node-a's dead letter). It checkpoints after each record.
    orders
        .create_group("caches", GroupConfig::broadcast(), StartAt::Earliest)
        .await?;
    let report = Worker::builder(&client)
        .topic_broadcast_raw(
            TOPIC,
            "caches",
            "node-a",
            |d: Delivery, ctx: JobContext| async move {
                println!(
                    "{}: refresh the cache after {}:{}",
                    ctx.member().unwrap_or("-"),
                    d.partition.unwrap_or_default(),
                    d.offset.unwrap_or_default()
                );
                Ok::<_, Infallible>(Outcome::Done)
            },
        )
        .stop_when_drained()
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;
    println!("node-a handled {} records", report.acked);
    Ok(())
}
