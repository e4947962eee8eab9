//! `schema.migrate`: upgrading a full database. A database holding the large claim backlog
//! (1 000 000 ready messages; 100 000 in `--quick`) and a tenth as many topic records is taken
//! back to an earlier schema version with `migrate_to`, then timed while `migrate` brings it to
//! the newest; the same on an empty database is the baseline, so the ratio says what the rows
//! cost. Then every message must still be there.
//!
//! Two starting points: the version before the newest, with the messages and the records; and
//! version 1 (topics came with version 3, so the records are deleted first). Each migration is
//! timed [`ROUNDS`] times.

use std::time::Instant;

use anyhow::{Result, bail};
use sqlmq::{Client, Record, TopicConfig};

use super::args::PUBLISH_BATCH;
use super::backend::Db;
use super::context::Ctx;
use super::measure::{Latencies, Summary, body};
use super::outcome::Outcome;
use super::progress::Bar;
use super::queue::{fill, with_client};
use super::report::{Figure, grouped};

/// Timed migrations from each starting point.
const ROUNDS: u64 = 3;

/// `schema.migrate`.
pub async fn migrate<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let messages = ctx.plan.claim_large;
    let records = messages / 10;
    let bar = ctx.bar("schema.migrate");
    let b = bar.clone();
    let empty = with_client(ctx, "migrate_empty", 2, |client| async move {
        let latest = client.schema_version();
        let top = timed(&client, latest - 1, &b).await?;
        let all = timed(&client, 1, &b).await?;
        Ok((top, all, latest))
    })
    .await?;
    let latest = empty.2;
    let b = bar.clone();
    let full = with_client(ctx, "migrate", 4, |client| async move {
        let latest = client.schema_version();
        let queue = client.create_queue("migrate", Default::default()).await?;
        fill(&queue, messages, &b).await?;
        let topic = client
            .create_topic("migrate", TopicConfig::default().partitions(8))
            .await?;
        b.phase("pre-publish (publish_batch)", records);
        for start in (0..records).step_by(PUBLISH_BATCH) {
            let n = (records - start).min(PUBLISH_BATCH as u64);
            let batch = (0..n).map(|i| Record::new(body(start + i))).collect();
            topic.publish_batch(batch).await?;
            b.inc(n);
        }
        let top = timed(&client, latest - 1, &b).await?;
        client.delete_topic("migrate").await?;
        let all = timed(&client, 1, &b).await?;
        let ready = queue.stats().await?.ready;
        if ready != messages {
            bail!("{ready} messages ready after the migrations, {messages} before");
        }
        Ok((top, all))
    })
    .await?;
    bar.finish();
    let with = format!("{} messages", grouped(messages));
    Ok(Outcome::Ran(vec![
        Figure::latency(
            "schema.migrate.top.empty",
            format!("migrate v{} → v{latest}, empty database", latest - 1),
            empty.0,
        ),
        Figure::latency(
            "schema.migrate.top.full",
            format!(
                "migrate v{} → v{latest}, {with} + {} records",
                latest - 1,
                grouped(records)
            ),
            full.0,
        )
        .against("schema.migrate.top.empty")
        .note("ratio of the medians, full to empty: near 1 means the migration's cost does not grow with the rows it keeps"),
        Figure::latency(
            "schema.migrate.all.empty",
            format!("migrate v1 → v{latest}, empty database"),
            empty.1,
        ),
        Figure::latency(
            "schema.migrate.all.full",
            format!("migrate v1 → v{latest}, {with}"),
            full.1,
        )
        .against("schema.migrate.all.empty"),
    ]))
}

/// Take the schema down to `from`, then time `migrate` back to the newest, [`ROUNDS`] times.
async fn timed<B: Db>(client: &Client<B>, from: i64, bar: &Bar) -> Result<Summary> {
    bar.phase(&format!("migrate from v{from}"), ROUNDS);
    let latencies = Latencies::default();
    for _ in 0..ROUNDS {
        client.migrate_to(from).await?;
        let started = Instant::now();
        client.migrate().await?;
        latencies.record(started.elapsed());
        bar.inc(1);
    }
    Ok(latencies.summary())
}
