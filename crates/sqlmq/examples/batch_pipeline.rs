//! An exactly-once pipeline a claim at a time: topic → transform → topic. A batch handler gets
//! every record of a claim from the cluster group `counter` of `example.clicks`, and in one
//! transaction adds the batch's clicks to a business table, publishes one summary record per
//! batch to `example.click-batches`, and acks the whole batch. A crash at any point leaves all
//! of it or none; one commit serves the whole batch instead of one per record (see the
//! guide's "Topics and consumer groups" page, exactly-once pipelines, for the rates).
//!
//! Run: `cargo run -p sqlmq --example batch_pipeline`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It deletes and recreates
//! both topics and creates the table `example_clicks`.

mod common;

use sqlmq::source::SourceName;
use sqlmq::topic::StartAt;
use sqlmq::worker::BatchContext;
use sqlmq::{Delivery, GroupConfig, Outcome, Record, TopicConfig, Worker};

const INPUT: &str = "example.clicks";
const OUTPUT: &str = "example.click-batches";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    common::delete_topics(&client, &[INPUT, OUTPUT]).await?;
    let input = client
        .create_topic(INPUT, TopicConfig::default().partitions(4))
        .await?;
    let output = client.create_topic(OUTPUT, TopicConfig::default()).await?;
    input
        .create_group("counter", GroupConfig::default(), StartAt::Earliest)
        .await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS example_clicks \
         (page VARCHAR(100) PRIMARY KEY, clicks BIGINT NOT NULL)",
    )
    .execute(client.pool())
    .await?;
    sqlx::query("DELETE FROM example_clicks")
        .execute(client.pool())
        .await?;

    let pages = ["/", "/pricing", "/docs", "/blog"];
    let clicks = (0..1000).map(|i| {
        let page = pages[i % pages.len()];
        Record::new(page).key(page)
    });
    input.publish_batch(clicks.collect()).await?;
    input.sequence().await?;

    // The transform: one transaction per claim holds the counters, the summary record and the
    // acks of every record in the claim.
    let summaries = output.clone();
    let handler = move |batch: Vec<Delivery>, ctx: BatchContext| {
        let output = summaries.clone();
        async move {
            let mut tx = ctx.begin().await?;
            for d in &batch {
                sqlx::query(
                    "INSERT INTO example_clicks (page, clicks) VALUES (?, 1) \
                     ON DUPLICATE KEY UPDATE clicks = clicks + 1",
                )
                .bind(&d.body[..])
                .execute(&mut *tx)
                .await?;
            }
            let summary = serde_json::json!({ "records": batch.len() });
            tx.publish(&output, Record::json(&summary)?).await?;
            tx.commit().await?; // counters + summary + every ack, or nothing
            Ok::<_, anyhow::Error>(Outcome::Done)
        }
    };
    let report = Worker::builder(&client)
        .source_batch(SourceName::group(INPUT, "counter"), handler)
        .concurrency(200)
        .max_batch(100)
        .stop_when_drained()
        .run(sqlmq::worker::shutdown_on_signals())
        .await?;
    output.sequence().await?;
    let batches: i64 = output.partitions().await?.iter().map(|p| p.end).sum();
    println!("counted {} clicks in {batches} transactions", report.acked);
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT page, clicks FROM example_clicks ORDER BY page")
            .fetch_all(client.pool())
            .await?;
    for (page, clicks) in rows {
        println!("{page:10} {clicks}");
    }
    Ok(())
}
