//! The code of the guide's page docs/guide/src/topics.md, verbatim (see `readme_library.rs` for why).
//! For a version that stops on its own, see `topic_groups.rs`.
//!
//! Run: `cargo run -p sqlmq --example readme_topics`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the topic
//! `orders` and publishes one record; the cluster group's worker then runs until Ctrl-C or
//! SIGTERM, after which the broadcast member reads the topic and checkpoints.

mod common;

use sqlmq::{Client, Outcome, Worker};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    readme(client).await
}

/// The guide's block, with the `client`, `Worker` and `Outcome` of the blocks before it. Not
/// formatted: it must stay identical to the guide's text.
#[rustfmt::skip]
async fn readme(client: Client) -> anyhow::Result<()> {
    use sqlmq::{GroupConfig, Record, TopicConfig};
    use sqlmq::topic::StartAt;

    let orders = client.create_topic("orders", TopicConfig::default().partitions(8)).await?;
    // Published in the caller's transaction; the key picks the partition (per-key order).
    let mut tx = client.begin().await?;
    orders.publish_in(&mut tx, Record::json(&serde_json::json!({"order": 42}))?.key("customer-7")).await?;
    tx.commit().await?;

    // Cluster mode: each record to one member, acked one by one, retried on the group's ladder.
    orders.create_group("billing", GroupConfig::default(), StartAt::Earliest).await?;
    Worker::builder(&client)
        .topic_group_raw("orders", "billing", |d: sqlmq::Delivery, _ctx| async move {
            println!("partition {:?} offset {:?}", d.partition, d.offset);
            Ok::<_, String>(Outcome::Done)
        })
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;

    // Broadcast mode: every member reads everything in offset order, from its checkpoint.
    let audit = orders.create_group("audit", GroupConfig::broadcast(), StartAt::Earliest).await?;
    let mut reader = audit.reader("audit-1").await?;
    for r in reader.poll(100).await? { println!("{}:{} {:?}", r.partition, r.offset, r.key); }
    reader.checkpoint().await?;
    Ok(())
}
