//! A fair queue (the README's "Fair queues", verbatim in `send`): one tenant sends 2 000
//! reports, then two others send a few jobs each; on a fair queue the small tenants' jobs are
//! delivered at once, beside the big tenant's, and a tenant weighted 2 gets twice the share of
//! a default one. The program prints the deliveries of each tenant claim by claim, as a worker
//! pool would see them, then the keys as `sqlmq queue keys` and the dashboard show them.
//!
//! Run: `cargo run -p sqlmq --example fair_tenants`, against the server at
//! `SQLMQ_DATABASE_URL` (default `mysql://root@127.0.0.1:3306/test`). It creates the queue
//! `example.tenants` (emptied first).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use sqlmq::{Client, Message, QueueConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = common::connect().await?; // Client::connect, then migrate: see common/mod.rs
    let q = send(&client).await?;
    for k in q.fairness_keys(10).await? {
        println!("key {:>6}: weight {}, {} ready", k.key, k.weight, k.ready);
    }
    // Claims of 10, as a worker pool makes them: who got served.
    for claim in 1..=6 {
        let got = q.receive(10, Duration::from_secs(30)).await?;
        let mut by_tenant: BTreeMap<String, usize> = BTreeMap::new();
        for d in &got {
            let tenant = d.headers.get("tenant").cloned().unwrap_or_default();
            *by_tenant.entry(tenant).or_default() += 1;
        }
        println!("claim {claim}: {by_tenant:?}");
        let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
        q.ack_batch(&receipts).await?;
    }
    let left = q.stats().await?.ready;
    println!("{left} of bigco's reports still waiting; acme's and tiny's jobs are done");
    q.purge().await?;
    Ok(())
}

/// The README's block. Not formatted: it must stay identical to the README's text.
#[rustfmt::skip]
async fn send(client: &Client) -> anyhow::Result<sqlmq::Queue> {
    let q = client.create_queue("example.tenants", QueueConfig::default().fair(true)).await?;
    q.purge().await?;
    q.set_weight("acme", 2).await?; // twice a default tenant's share
    let reports: Vec<Message> = (0..2_000)
        .map(|i| Message::new(format!("report {i}")).fairness_key("bigco").header("tenant", "bigco"))
        .collect();
    q.send_batch(reports).await?;
    // Sent after bigco's 2 000, delivered beside them: each key gets its weight's share.
    for (tenant, jobs) in [("acme", 20), ("tiny", 5)] {
        let batch: Vec<Message> = (0..jobs)
            .map(|i| Message::new(format!("job {i}")).fairness_key(tenant).header("tenant", tenant))
            .collect();
        q.send_batch(batch).await?;
    }
    Ok(q)
}
