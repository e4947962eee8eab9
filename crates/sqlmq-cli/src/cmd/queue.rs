//! `sqlmq queue create|delete|weight|keys`: declare and remove queues; a fair queue's keys.

use std::time::Duration;

use anyhow::Result;
use clap::Subcommand;
use sqlmq::QueueConfig;
use sqlmq::queue::{Backoff, RateLimit};

use super::{confirm, open_queue, parse_backoff, parse_duration};
use crate::output::{print_json, print_table, short_duration};
use crate::settings::Settings;
use sqlmq::Backend;

/// `sqlmq queue ...`
#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Create a queue, or change the given settings of an existing one (its messages are kept)
    Create {
        /// Queue name: 1 to 128 characters of A-Z a-z 0-9 . _ -
        name: String,
        /// Deliveries before a failing message becomes a dead letter [default: 25]
        #[arg(long, value_name = "N")]
        max_attempts: Option<u32>,
        /// Wait between attempts: `exp:BASE:MAX` (e.g. exp:1s:1h, the default) or a ladder of
        /// steps (e.g. 10s,30s,1m)
        #[arg(long, value_name = "SPEC", value_parser = parse_backoff)]
        backoff: Option<Backoff>,
        /// How long idempotency keys (`send --id`) are remembered [default: 24h]
        #[arg(long, value_name = "DUR", value_parser = parse_duration)]
        dedup_window: Option<Duration>,
        /// At most N messages in flight in the whole queue, every process together (0: no
        /// limit)
        #[arg(long, value_name = "N")]
        max_in_flight: Option<u32>,
        /// At most COUNT deliveries in any window of DURATION, every process together: e.g.
        /// 100/1m or 20/1s (`none`: no limit)
        #[arg(long, value_name = "COUNT/DUR", value_parser = parse_rate_limit)]
        rate_limit: Option<RateChoice>,
        /// At most N messages of one concurrency key (`send --concurrency-key`) at once, every
        /// process together; the others wait in line (0: no limit)
        #[arg(long, value_name = "N")]
        concurrency_limit: Option<u32>,
        /// At most COUNT deliveries of one concurrency key in any window of DURATION, every
        /// process together; a key over it is skipped while the others flow: e.g. 10/1s
        /// (`none`: no limit)
        #[arg(long, value_name = "COUNT/DUR", value_parser = parse_rate_limit)]
        rate_limit_per_key: Option<RateChoice>,
        /// Hand out messages across fairness keys (`send --fairness-key`) by weight within a
        /// priority, so that no key's backlog delays the others (`--fair false`: first in,
        /// first out again)
        #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
        fair: Option<bool>,
    },
    /// Set a fairness key's weight on a fair queue: its share of claims while other keys have
    /// messages waiting is its weight over the sum of theirs (every key starts at 1)
    Weight {
        /// Queue name
        name: String,
        /// Fairness key (`""`: messages sent without one)
        key: String,
        /// Weight, 1 to 10000
        weight: u32,
    },
    /// A fair queue's keys with the most messages ready: weight, ready, oldest ready age
    Keys {
        /// Queue name
        name: String,
        /// At most this many keys
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print the keys as a JSON array
        #[arg(long)]
        json: bool,
    },
    /// Delete a queue with all its messages and dead letters
    Delete {
        /// Queue name
        name: String,
        /// Confirm the deletion
        #[arg(long)]
        yes: bool,
    },
}

/// Run `sqlmq queue ...`.
pub async fn run<B: Backend>(settings: &Settings, command: QueueCommand) -> Result<()> {
    match command {
        QueueCommand::Create {
            name,
            max_attempts,
            backoff,
            dedup_window,
            max_in_flight,
            rate_limit,
            concurrency_limit,
            rate_limit_per_key,
            fair,
        } => {
            let client = settings.connect::<B>().await?;
            // Start from the existing configuration so that options not given are kept rather
            // than reset to the defaults.
            let existing = client
                .queue_configs()
                .await?
                .into_iter()
                .find(|(n, _)| *n == name)
                .map(|(_, config)| config);
            let created = existing.is_none();
            let mut config = existing.unwrap_or_default();
            if let Some(n) = max_attempts {
                config = config.max_attempts(n);
            }
            if let Some(b) = backoff {
                config = config.backoff(b);
            }
            if let Some(w) = dedup_window {
                config = config.dedup_window(w);
            }
            if let Some(n) = max_in_flight {
                config = config.max_in_flight((n > 0).then_some(n));
            }
            if let Some(RateChoice(rate)) = rate_limit {
                config = config.rate_limit(rate);
            }
            if let Some(n) = concurrency_limit {
                config = config.concurrency_limit((n > 0).then_some(n));
            }
            if let Some(RateChoice(rate)) = rate_limit_per_key {
                config = config.rate_limit_per_key(rate);
            }
            if let Some(fair) = fair {
                config = config.fair(fair);
            }
            client.create_queue(&name, config.clone()).await?;
            let verb = if created { "created" } else { "updated" };
            println!("{verb} queue {name}: {}", describe(&config));
        }
        QueueCommand::Weight { name, key, weight } => {
            let queue = open_queue::<B>(settings, &name).await?;
            queue.set_weight(&key, weight).await?;
            println!("queue {name}: fairness key {key:?} has weight {weight}");
        }
        QueueCommand::Keys { name, limit, json } => {
            let queue = open_queue::<B>(settings, &name).await?;
            let keys = queue.fairness_keys(limit).await?;
            if json {
                return print_json(&keys);
            }
            if keys.is_empty() {
                eprintln!("no fairness keys with messages ready or in flight, or a weight set");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = keys
                .iter()
                .map(|k| {
                    vec![
                        format!("{:?}", k.key),
                        k.weight.to_string(),
                        k.ready.to_string(),
                        k.in_flight.to_string(),
                        short_duration(Duration::from_millis(k.oldest_ready_ms)),
                        k.arrived.to_string(),
                        k.settled.to_string(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "KEY",
                    "WEIGHT",
                    "READY",
                    "IN-FLIGHT",
                    "OLDEST-READY",
                    "ARRIVED",
                    "SETTLED",
                ],
                &rows,
            );
        }
        QueueCommand::Delete { name, yes } => {
            confirm(
                yes,
                &format!("deleting queue {name} deletes all its messages and dead letters"),
            )?;
            let client = settings.connect::<B>().await?;
            client.delete_queue(&name).await?;
            println!("deleted queue {name}");
        }
    }
    Ok(())
}

/// A `--rate-limit` value: a limit, or none.
#[derive(Clone, Debug)]
pub struct RateChoice(pub(crate) Option<RateLimit>);

/// clap value parser for `--rate-limit`: `COUNT/DURATION` or `none`.
pub(crate) fn parse_rate_limit(text: &str) -> Result<RateChoice, String> {
    match text {
        "none" => Ok(RateChoice(None)),
        text => text
            .parse::<RateLimit>()
            .map(|r| RateChoice(Some(r)))
            .map_err(|e| e.to_string()),
    }
}

/// A queue's settings on one line.
fn describe(config: &QueueConfig) -> String {
    let backoff = match &config.backoff {
        Backoff::Exponential { base, max, jitter } => format!(
            "exponential {} to {} ±{:.0}%",
            humantime::format_duration(*base),
            humantime::format_duration(*max),
            jitter * 100.0
        ),
        Backoff::Ladder(steps) => {
            let steps: Vec<String> = steps
                .iter()
                .map(|s| humantime::format_duration(*s).to_string())
                .collect();
            format!("ladder {}", steps.join(","))
        }
    };
    let mut line = format!(
        "max attempts {}, backoff {backoff}, dedup window {}",
        config.max_attempts,
        humantime::format_duration(config.dedup_window)
    );
    if let Some(n) = config.max_in_flight {
        line.push_str(&format!(", at most {n} in flight"));
    }
    if let Some(rate) = config.rate_limit {
        line.push_str(&format!(", rate limit {rate}"));
    }
    if let Some(n) = config.concurrency_limit {
        line.push_str(&format!(", at most {n} per concurrency key"));
    }
    if let Some(rate) = config.rate_limit_per_key {
        line.push_str(&format!(", rate limit {rate} per concurrency key"));
    }
    if config.fair {
        line.push_str(", fair across fairness keys");
    }
    line
}
