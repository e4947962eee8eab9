//! `sqlmq schedule create|list|describe|pause|resume|delete`: recurring schedules, fired by
//! every running worker, `sqlmq consume`, `sqlmq subscribe` and `sqlmq serve` of the database.

use std::time::{Duration, SystemTime};

use anyhow::Result;
use clap::Subcommand;
use serde::Serialize;
use sqlmq::Backend;
use sqlmq::schedule::{CatchUp, Schedule, ScheduleConfig, ScheduleTarget, Timing};

use super::{UsageError, confirm, parse_duration, parse_header};
use crate::output::{JsonBody, json_time, print_json, print_table, timestamp};
use crate::settings::Settings;

/// `sqlmq schedule ...`
#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule, or replace an existing one's settings (what it fired is kept; so is
    /// its next fire time when the timing is the same)
    Create(Box<CreateArgs>),
    /// List schedules with their next and last fire times
    List {
        /// Print a JSON array
        #[arg(long)]
        json: bool,
    },
    /// Show one schedule
    Describe {
        /// Schedule name
        name: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Stop a schedule firing until `resume`
    Pause {
        /// Schedule name
        name: String,
    },
    /// Fire a paused schedule again, from its next fire time after now
    Resume {
        /// Schedule name
        name: String,
    },
    /// Delete a schedule (what it sent stays)
    Delete {
        /// Schedule name
        name: String,
        /// Confirm the deletion
        #[arg(long)]
        yes: bool,
    },
}

/// Arguments of `sqlmq schedule create`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("timing").required(true).args(["cron", "every"])))]
#[command(group(clap::ArgGroup::new("target").required(true).args(["queue", "topic"])))]
pub struct CreateArgs {
    /// Schedule name: 1 to 128 characters of A-Z a-z 0-9 . _ -
    name: String,
    /// Cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first
    #[arg(long, value_name = "EXPR")]
    cron: Option<String>,
    /// IANA time zone the cron expression is read in [default: UTC]
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// Fire every DUR (at least 1s), at its multiples since the Unix epoch
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    every: Option<Duration>,
    /// Send a message to this queue
    #[arg(long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Publish a record to this topic
    #[arg(long, value_name = "TOPIC")]
    topic: Option<String>,
    /// Body of each message
    #[arg(long, value_name = "TEXT", default_value = "")]
    body: String,
    /// A header of each message (repeatable)
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_header)]
    header: Vec<(String, String)>,
    /// Ordering key (queue) or record key (topic) of each message
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Priority of each message (queue; lower first)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    priority: i16,
    /// Fire times missed while no process ran: skip them, fire the latest once, or fire
    /// them all (up to --catch-up-limit)
    #[arg(long, value_name = "POLICY", default_value = "skip", value_parser = ["skip", "one", "all"])]
    catch_up: String,
    /// Most missed fire times `--catch-up all` fires at once
    #[arg(long, value_name = "N", default_value_t = ScheduleConfig::DEFAULT_CATCH_UP_LIMIT)]
    catch_up_limit: u32,
}

/// A schedule for scripts.
#[derive(Serialize)]
struct ScheduleJson<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_zone: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    #[serde(flatten)]
    body: JsonBody,
    headers: &'a std::collections::BTreeMap<String, String>,
    key: Option<&'a str>,
    priority: i16,
    catch_up: String,
    catch_up_limit: u32,
    paused: bool,
    next_fire: Option<String>,
    last_fired: Option<String>,
    fired: u64,
    created_at: String,
    updated_at: String,
}

impl<'a> ScheduleJson<'a> {
    fn new(s: &'a Schedule) -> ScheduleJson<'a> {
        let c = &s.config;
        let (cron, time_zone, every) = match &c.timing {
            Timing::Cron { expr, zone } => (Some(expr.as_str()), Some(zone.as_str()), None),
            Timing::Every(d) => (None, None, Some(d.as_millis() as u64)),
        };
        let (queue, topic) = match &c.target {
            ScheduleTarget::Queue(q) => (Some(q.as_str()), None),
            ScheduleTarget::Topic(t) => (None, Some(t.as_str())),
        };
        ScheduleJson {
            name: &s.name,
            cron,
            time_zone,
            every_ms: every,
            queue,
            topic,
            body: JsonBody::new(&c.body),
            headers: &c.headers,
            key: c.key.as_deref(),
            priority: c.priority,
            catch_up: c.catch_up.to_string(),
            catch_up_limit: c.catch_up_limit,
            paused: s.paused,
            next_fire: s.next_fire.map(json_time),
            last_fired: s.last_fired.map(json_time),
            fired: s.fired,
            created_at: json_time(s.created_at),
            updated_at: json_time(s.updated_at),
        }
    }
}

fn when(t: Option<SystemTime>) -> String {
    t.map(timestamp).unwrap_or_else(|| "-".into())
}

/// Run `sqlmq schedule ...`.
pub async fn run<B: Backend>(settings: &Settings, command: ScheduleCommand) -> Result<()> {
    match command {
        ScheduleCommand::Create(args) => {
            let CreateArgs {
                name,
                cron,
                tz,
                every,
                queue,
                topic,
                body,
                header,
                key,
                priority,
                catch_up,
                catch_up_limit,
            } = *args;
            if tz.is_some() && cron.is_none() {
                return Err(UsageError("--tz is the time zone of --cron".into()).into());
            }
            let timing = match (cron, every) {
                (Some(expr), None) => Timing::cron(expr, tz.unwrap_or_else(|| "UTC".into())),
                (None, Some(d)) => Timing::Every(d),
                _ => return Err(UsageError("give one of --cron and --every".into()).into()),
            };
            let target = match (queue, topic) {
                (Some(q), None) => ScheduleTarget::Queue(q),
                (None, Some(t)) => ScheduleTarget::Topic(t),
                _ => return Err(UsageError("give one of --queue and --topic".into()).into()),
            };
            let mut config = ScheduleConfig::new(timing, target)
                .body(body)
                .priority(priority)
                .catch_up(catch_up.parse::<CatchUp>()?)
                .catch_up_limit(catch_up_limit);
            if let Some(k) = key {
                config = config.key(k);
            }
            for (k, v) in header {
                config = config.header(k, v);
            }
            let client = settings.connect::<B>().await?;
            let s = client.create_schedule(&name, config).await?;
            println!(
                "schedule {name}: {} → {}, next fire {}",
                s.config.timing,
                s.config.target,
                when(s.next_fire)
            );
        }
        ScheduleCommand::List { json } => {
            let client = settings.connect::<B>().await?;
            let all = client.schedules().await?;
            if json {
                return print_json(&all.iter().map(ScheduleJson::new).collect::<Vec<_>>());
            }
            if all.is_empty() {
                eprintln!(
                    "no schedules (create one: sqlmq schedule create NAME --every 1m --queue Q)"
                );
                return Ok(());
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|s| {
                    vec![
                        s.name.clone(),
                        s.config.timing.to_string(),
                        s.config.target.to_string(),
                        if s.paused { "paused" } else { "active" }.into(),
                        if s.paused {
                            "-".into()
                        } else {
                            when(s.next_fire)
                        },
                        when(s.last_fired),
                        s.fired.to_string(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "NAME",
                    "TIMING",
                    "TARGET",
                    "STATE",
                    "NEXT FIRE",
                    "LAST FIRED",
                    "FIRED",
                ],
                &rows,
            );
        }
        ScheduleCommand::Describe { name, json } => {
            let client = settings.connect::<B>().await?;
            let s = client.schedule(&name).await?;
            if json {
                return print_json(&ScheduleJson::new(&s));
            }
            let c = &s.config;
            println!("schedule    {}", s.name);
            println!("timing      {}", c.timing);
            println!("target      {}", c.target);
            println!("state       {}", if s.paused { "paused" } else { "active" });
            println!("next fire   {}", when(s.next_fire));
            println!("last fired  {}", when(s.last_fired));
            println!("fired       {}", s.fired);
            println!("catch-up    {} (limit {})", c.catch_up, c.catch_up_limit);
            println!("priority    {}", c.priority);
            println!("key         {}", c.key.as_deref().unwrap_or("-"));
            for (k, v) in &c.headers {
                println!("header      {k}={v}");
            }
            println!("body        {}", String::from_utf8_lossy(&c.body));
        }
        ScheduleCommand::Pause { name } => {
            let client = settings.connect::<B>().await?;
            client.pause_schedule(&name).await?;
            println!("paused schedule {name}");
        }
        ScheduleCommand::Resume { name } => {
            let client = settings.connect::<B>().await?;
            let s = client.resume_schedule(&name).await?;
            println!("resumed schedule {name}: next fire {}", when(s.next_fire));
        }
        ScheduleCommand::Delete { name, yes } => {
            confirm(yes, &format!("deleting schedule {name}"))?;
            let client = settings.connect::<B>().await?;
            client.delete_schedule(&name).await?;
            println!("deleted schedule {name}");
        }
    }
    Ok(())
}
