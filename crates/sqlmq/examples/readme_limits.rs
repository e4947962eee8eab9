//! The code of the guide's page docs/guide/src/limits.md, verbatim (see `readme_library.rs` for why).
//!
//! Run: `cargo run -p sqlmq --example readme_limits`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates (or updates)
//! the queues `webhooks` and `syncs` with their limits, sends one keyed message and prints the
//! limits.

mod common;

use sqlmq::Client;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    readme(client).await
}

/// The guide's block, with the `client` of the blocks before it. Not formatted: it must stay
/// identical to the guide's text.
#[rustfmt::skip]
async fn readme(client: Client) -> anyhow::Result<()> {
    use sqlmq::{Message, QueueConfig};
    use sqlmq::queue::RateLimit;

    // A partner's API takes at most 10 requests at once and 100 a minute, whatever the number of
    // workers: both are counted in the database.
    let config = QueueConfig::default().max_in_flight(Some(10)).rate_limit(Some("100/1m".parse::<RateLimit>()?));
    let webhooks = client.create_queue("webhooks", config).await?;

    // At most 2 syncs of one customer at once; the other customers' syncs are not held back.
    let syncs = client.create_queue("syncs", QueueConfig::default().concurrency_limit(Some(2))).await?;
    syncs.send(Message::new("sync").concurrency_key("customer-42")).await?;
    println!("{} limited: {:?}", webhooks.name(), client.queue_configs().await?);
    Ok(())
}
