//! Every scenario, in run order: its id, what it measures, the baselines it is compared with,
//! and the function that runs it. Selecting by name happens here too. The scenarios' result,
//! [`Outcome`], is in `outcome.rs`, below both: the registry imports the scenarios, never the
//! other way round.
//!
//! Scenarios of later issues plug into [`SCENARIOS`] at the marked place and leave [`PLANNED`].

use anyhow::Result;

use super::backend::Db;
use super::context::Ctx;
use super::outcome::Outcome;
use super::report::Planned;
use super::{
    durable, peers, queue, raw, raw_head, raw_queue, running, schema, serve, serve_wait, topic,
    worker, worker_fleet, worker_group,
};
use sqlmq_cli_common::UsageError;

/// A scenario.
#[derive(Debug)]
pub struct Scenario {
    /// Id, also its name on the command line.
    pub id: &'static str,
    /// What it measures.
    pub title: &'static str,
    /// Scenarios whose figures it is compared with: they run whenever it runs.
    pub needs: &'static [&'static str],
}

/// Every scenario, in run order (baselines first).
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        id: "raw.insert",
        title: "raw autocommit INSERT on 1 and on 16 connections",
        needs: &[],
    },
    Scenario {
        id: "raw.multirow",
        title: "raw multi-row INSERT, 1 000 rows per transaction, then 100",
        needs: &[],
    },
    Scenario {
        id: "raw.lifecycle",
        title: "raw INSERT then DELETE by primary key, autocommit, 16 connections",
        needs: &[],
    },
    Scenario {
        id: "raw.queue",
        title: "raw one-table queue (SKIP LOCKED batches; SQLite: its one writer): drain with 8 consumers; 4 producers + 8 consumers",
        needs: &[],
    },
    Scenario {
        id: "raw.head",
        title: "raw one-row lease layouts: a claim of 10 behind 10 000 in flight and 100 000 scheduled, against one with nothing at the head",
        needs: &[],
    },
    Scenario {
        id: "queue.produce",
        title: "send single messages with 1 and with 16 producers",
        needs: &["raw.insert"],
    },
    Scenario {
        id: "queue.batch",
        title: "send_batch of 100 and of 10 000 messages",
        needs: &["raw.multirow"],
    },
    Scenario {
        id: "queue.drain",
        title: "drain a pre-filled queue with 8 consumers: with leases, lock-held, take_in; peak memory",
        needs: &["raw.lifecycle", "raw.queue"],
    },
    Scenario {
        id: "queue.limits",
        title: "queue.drain's lease drain on a queue with max_in_flight and rate_limit set but never reached, against the drain without limits",
        needs: &["queue.drain"],
    },
    Scenario {
        id: "queue.keys",
        title: "queue.drain's lease drain of messages with concurrency keys (100 keys, a per-key limit never reached), against the drain of plain messages; their pre-fill against the same pre-fill without keys",
        needs: &["queue.drain"],
    },
    Scenario {
        id: "queue.fair",
        title: "queue.drain's lease drain on a fair queue (1 000 fairness keys), against the drain of a plain queue; its pre-fill against a plain pre-fill; the fair claim's latency with 10 000 keys and the large backlog against 10 keys and the small one",
        needs: &["queue.drain"],
    },
    Scenario {
        id: "queue.flows",
        title: "queue.drain's lease drain of messages that each depend on an acked message, and of members of batches of 1 000, against the drain of plain messages; their pre-fills against the same pre-fill of plain messages",
        needs: &["queue.drain"],
    },
    Scenario {
        id: "queue.mixed",
        title: "4 producers alone, then with 8 consumers draining at once (leases, then take_in)",
        needs: &["raw.lifecycle", "raw.queue"],
    },
    Scenario {
        id: "queue.latency",
        title: "end-to-end latency p50/p99, busy and after 10 s idle",
        needs: &[],
    },
    Scenario {
        id: "queue.claim",
        title: "claim latency with a backlog of 10 000 vs 1 000 000 (100 000 quick)",
        needs: &[],
    },
    Scenario {
        id: "queue.budget",
        title: "statements the server runs per send, per claim and ack, per empty claim",
        needs: &[],
    },
    Scenario {
        id: "queue.idle",
        title: "statements/s the server runs for one idle polling consumer",
        needs: &[],
    },
    Scenario {
        id: "worker.e2e",
        title: "worker runtime: drain with a no-op typed handler; peak memory",
        needs: &["queue.drain"],
    },
    Scenario {
        id: "worker.limits",
        title: "worker.e2e on a queue with max_in_flight and rate_limit set but never reached, against the worker without limits",
        needs: &["worker.e2e"],
    },
    Scenario {
        id: "worker.group",
        title: "worker.e2e's worker on a cluster group of an 8-partition topic, against the worker on a queue",
        needs: &["worker.e2e"],
    },
    Scenario {
        id: "worker.latency",
        title: "worker runtime: send → handler start, busy and after idle",
        needs: &[],
    },
    Scenario {
        id: "worker.idle",
        title: "worker runtime: idle statements/s and wakeup latency by poll ceiling",
        needs: &[],
    },
    Scenario {
        id: "worker.durable",
        title: "durable execution: a worker recording 3 steps per message against worker.e2e; sleep and event resume latency; claims of ready work with 100 000 runs asleep against none",
        needs: &["worker.e2e"],
    },
    Scenario {
        id: "worker.running",
        title: "control of running jobs: a worker whose handlers report progress every 100 ms against one whose handlers report nothing; cancel by another client → handler's token",
        needs: &[],
    },
    Scenario {
        id: "worker.fleet",
        title: "worker runtime: a fleet of 20 idle worker processes, statements/s and wakeup",
        needs: &[],
    },
    Scenario {
        id: "topic.publish",
        title: "topic publish until sequenced (1/8 partitions, 1/16 producers, single/batches of 100); sequencer alone",
        needs: &["raw.insert"],
    },
    Scenario {
        id: "topic.group",
        title: "drain an 8-partition topic with one consumer group of 8 members",
        needs: &["raw.lifecycle"],
    },
    Scenario {
        id: "topic.pipeline",
        title: "exactly-once pipeline: worker consuming a group, then publishing each result and acking in one transaction",
        needs: &["raw.lifecycle"],
    },
    Scenario {
        id: "serve.send",
        title: "HTTP send (sqlmq serve), 16 keep-alive clients, one message per request",
        needs: &["queue.produce"],
    },
    Scenario {
        id: "serve.drain",
        title: "HTTP receive + ack (sqlmq serve), 8 keep-alive clients, batches of 100",
        needs: &["queue.drain"],
    },
    Scenario {
        id: "serve.wait",
        title: "HTTP long polls waiting (sqlmq serve): statements/s at 10, 1 000 and 10 000 waiters; wakeup from another client; memory",
        needs: &[],
    },
    Scenario {
        id: "schema.migrate",
        title: "migrate a full database (the large claim backlog, a tenth as many topic records) from earlier schema versions, against an empty one",
        needs: &[],
    },
    // Later issues add their scenarios here, before the peers, and remove them from PLANNED.
    Scenario {
        id: "peer.postgres",
        title: "PostgreSQL: same SKIP LOCKED queue pattern, and its raw baselines",
        needs: &[],
    },
    Scenario {
        id: "peer.rabbitmq",
        title: "RabbitMQ: durable queue, persistent messages, confirms, manual acks",
        needs: &["raw.insert", "raw.lifecycle"],
    },
    Scenario {
        id: "peer.redis",
        title: "Redis Streams: XADD, XREADGROUP, XACK",
        needs: &["raw.insert", "raw.lifecycle"],
    },
];

/// Scenarios that come with later issues: listed in every report as not measured yet.
pub const PLANNED: &[Planned] = &[];

/// Run scenario `id`.
pub async fn run<B: Db>(ctx: &Ctx<B>, id: &str) -> Result<Outcome> {
    match id {
        "raw.insert" => raw::insert(ctx).await,
        "raw.multirow" => raw::multirow(ctx).await,
        "raw.lifecycle" => raw::lifecycle(ctx).await,
        "raw.queue" => raw_queue::queue(ctx).await,
        "raw.head" => raw_head::head(ctx).await,
        "queue.produce" => queue::produce::produce(ctx).await,
        "queue.batch" => queue::produce::batch(ctx).await,
        "queue.drain" => queue::drain::drain(ctx).await,
        "queue.limits" => queue::limits::limits(ctx).await,
        "queue.keys" => queue::keys::keys(ctx).await,
        "queue.fair" => queue::fair::fair_queue(ctx).await,
        "queue.flows" => queue::flows::flows(ctx).await,
        "queue.mixed" => queue::drain::mixed(ctx).await,
        "queue.latency" => queue::latency::latency(ctx).await,
        "queue.claim" => queue::claim::claim(ctx).await,
        "queue.idle" => queue::idle::idle(ctx).await,
        "queue.budget" => queue::budget::budget(ctx).await,
        "worker.e2e" => worker::e2e(ctx).await,
        "worker.limits" => worker::limits(ctx).await,
        "worker.group" => worker_group::group(ctx).await,
        "worker.latency" => worker::latency(ctx).await,
        "worker.idle" => worker::idle(ctx).await,
        "worker.durable" => durable::durable(ctx).await,
        "worker.running" => running::running(ctx).await,
        "worker.fleet" => worker_fleet::fleet(ctx).await,
        "topic.publish" => topic::publish::publish(ctx).await,
        "topic.group" => topic::group::group(ctx).await,
        "topic.pipeline" => topic::pipeline::pipeline(ctx).await,
        "serve.send" => serve::send(ctx).await,
        "serve.drain" => serve::drain(ctx).await,
        "serve.wait" => serve_wait::wait(ctx).await,
        "schema.migrate" => schema::migrate(ctx).await,
        "peer.postgres" => peers::postgres::run(ctx).await,
        "peer.rabbitmq" => peers::rabbitmq::run(ctx).await,
        "peer.redis" => peers::redis::run(ctx).await,
        other => unreachable!("scenario {other} is in SCENARIOS but has no runner"),
    }
}

/// The scenarios `names` select, with the baselines they need, in run order. No names: all.
///
/// A name selects the scenario with that id, every scenario under it (`queue` selects
/// `queue.*`), or a peer by its own name (`redis`); `peers` means `peer` and `baselines` `raw`.
pub fn select(names: &[String]) -> Result<Vec<&'static Scenario>, UsageError> {
    let mut wanted = vec![false; SCENARIOS.len()];
    for name in names {
        let name = match name.as_str() {
            "peers" => "peer",
            "baselines" => "raw",
            n => n,
        };
        let mut found = false;
        for (i, s) in SCENARIOS.iter().enumerate() {
            if name == "all" || matches(s.id, name) {
                wanted[i] = true;
                found = true;
            }
        }
        if !found {
            let planned = PLANNED.iter().any(|p| matches(p.id, name));
            let ids: Vec<&str> = SCENARIOS.iter().map(|s| s.id).collect();
            return Err(UsageError(if planned {
                format!("scenario {name} comes with a later issue and is not built yet")
            } else {
                format!(
                    "unknown scenario {name}; known: {} (see --list)",
                    ids.join(", ")
                )
            }));
        }
    }
    if names.is_empty() {
        wanted.fill(true);
    }
    let needed: Vec<&str> = SCENARIOS
        .iter()
        .zip(&wanted)
        .filter(|(_, w)| **w)
        .flat_map(|(s, _)| s.needs.iter().copied())
        .collect();
    Ok(SCENARIOS
        .iter()
        .zip(wanted)
        .filter(|(s, w)| *w || needed.contains(&s.id))
        .map(|(s, _)| s)
        .collect())
}

/// Whether `name` selects scenario `id`.
fn matches(id: &str, name: &str) -> bool {
    id == name
        || id
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('.'))
        || id.strip_prefix("peer.") == Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<&'static str> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        select(&names).unwrap().iter().map(|s| s.id).collect()
    }

    #[test]
    fn selection_adds_baselines_and_keeps_order() {
        assert_eq!(ids(&[]).len(), SCENARIOS.len());
        assert_eq!(
            ids(&["queue.drain"]),
            vec!["raw.lifecycle", "raw.queue", "queue.drain"]
        );
        let queue = ids(&["queue"]);
        assert_eq!(
            &queue[..3],
            &["raw.insert", "raw.multirow", "raw.lifecycle"]
        );
        assert!(queue.iter().all(|id| !id.starts_with("peer.")));
        assert_eq!(
            ids(&["redis"]),
            vec!["raw.insert", "raw.lifecycle", "peer.redis"]
        );
        assert_eq!(
            ids(&["peers"])
                .iter()
                .filter(|i| i.starts_with("peer."))
                .count(),
            3
        );
        assert!(
            select(&["nope".into()])
                .unwrap_err()
                .0
                .contains("unknown scenario")
        );
        assert_eq!(ids(&["topic.group"]), vec!["raw.lifecycle", "topic.group"]);
        assert_eq!(ids(&["queue.limits"]), vec!["queue.drain", "queue.limits"]);
        assert_eq!(ids(&["queue.keys"]), vec!["queue.drain", "queue.keys"]);
        assert_eq!(ids(&["worker.limits"]), vec!["worker.e2e", "worker.limits"]);
        assert_eq!(
            ids(&["topic"]),
            vec![
                "raw.insert",
                "raw.lifecycle",
                "topic.publish",
                "topic.group",
                "topic.pipeline"
            ]
        );
        assert!(!matches("queue.drain", "queue.d"));
    }
}
