//! `queue.claim`: how long one `receive(10, lease)` takes with a backlog of 10 000 messages and
//! with one of 1 000 000 (100 000 in `--quick`), and the ratio of the two medians. sqlmq claims
//! from the head of a narrow clustered index, so the ratio should stay near 1.
//!
//! Each timed claim is followed by an untimed `ack_batch`, so in-flight messages do not pile
//! up; the queue is filled with the messages the sampling will take on top of the nominal
//! backlog, so the backlog never falls below it. The first claims at each backlog are warm-up and
//! are not counted.

use std::time::Instant;

use anyhow::Result;
use sqlmq::queue::Receipt;
use sqlmq::{Delivery, Queue};

use super::{fill, with_queue};
use crate::args::{CLAIM_N, LEASE};
use crate::backend::Db;
use crate::context::Ctx;
use crate::measure::{Latencies, Summary};
use crate::outcome::Outcome;
use crate::progress::Bar;
use crate::report::{Figure, grouped};

/// Untimed claims before each measurement.
pub(super) const WARM_UP: u64 = 20;

/// `queue.claim`.
pub async fn claim<B: Db>(ctx: &Ctx<B>) -> Result<Outcome> {
    let plan = &ctx.plan;
    let bar = ctx.bar("queue.claim");
    let b = bar.clone();
    let (small, large) = with_queue(ctx, "claim", 4, |queue| async move {
        let per_phase = (WARM_UP + plan.claim_samples) * CLAIM_N as u64;
        fill(&queue, plan.claim_small + per_phase, &b).await?;
        let small = timed_claims(&queue, plan.claim_samples, &b).await?;
        fill(&queue, plan.claim_large - plan.claim_small + per_phase, &b).await?;
        let large = timed_claims(&queue, plan.claim_samples, &b).await?;
        Ok((small, large))
    })
    .await?;
    bar.finish();
    let label = |backlog: u64| format!("sqlmq claim {CLAIM_N}, backlog {}", grouped(backlog));
    Ok(Outcome::Ran(vec![
        Figure::latency("queue.claim.small", label(plan.claim_small), small),
        Figure::latency("queue.claim.large", label(plan.claim_large), large)
            .against("queue.claim.small")
            .note("ratio of median claim times at the large and the small backlog: near 1 means claim cost does not grow with the backlog"),
    ]))
}

/// Time `samples` claims (after [`WARM_UP`] untimed ones), acking each claim untimed.
pub(super) async fn timed_claims<B: Db>(
    queue: &Queue<B>,
    samples: u64,
    bar: &Bar,
) -> Result<Summary> {
    bar.phase(&format!("timed receive({CLAIM_N})"), WARM_UP + samples);
    let latencies = Latencies::default();
    for i in 0..WARM_UP + samples {
        let started = Instant::now();
        let got = queue.receive(CLAIM_N, LEASE).await?;
        let took = started.elapsed();
        if i >= WARM_UP {
            latencies.record(took);
        }
        let receipts: Vec<Receipt> = got.iter().map(Delivery::receipt).collect();
        queue.ack_batch(&receipts).await?;
        bar.inc(1);
    }
    Ok(latencies.summary())
}
