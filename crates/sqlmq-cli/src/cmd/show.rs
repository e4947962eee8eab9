//! `sqlmq show`: one message of a queue in whatever state it is, read without a lease.

use anyhow::{Result, bail};
use sqlmq::{Backend, MessageId};

use super::peek::JsonQueued;
use super::{open_queue, parse_message_id};
use crate::output::{print_json, timestamp};
use crate::settings::Settings;

/// Arguments of `sqlmq show`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Message id
    #[arg(value_parser = parse_message_id)]
    id: MessageId,
    /// Print it as JSON
    #[arg(long)]
    json: bool,
}

/// Run `sqlmq show`: fails (exit 1) when the queue has no such message.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let queue = open_queue::<B>(settings, &args.queue).await?;
    let Some(m) = queue.message(args.id).await? else {
        if let Some(result) = queue.client().result(args.id).await? {
            if args.json {
                let body = crate::output::JsonBody::new(&result);
                return print_json(
                    &serde_json::json!({ "id": args.id, "state": "acked", "result": body }),
                );
            }
            println!("id:          {}", args.id);
            println!("state:       acked");
            println!("result:      {}", String::from_utf8_lossy(&result));
            return Ok(());
        }
        bail!(
            "queue {} has no message {} (never sent there, or acked, cancelled or purged)",
            args.queue,
            args.id
        );
    };
    let journal = queue.client().journal(m.id).await?;
    let progress = queue.progress(m.id).await?;
    if args.json {
        let mut out = serde_json::to_value(JsonQueued::from(&m))?;
        if !journal.steps.is_empty() {
            out["journal"] = serde_json::to_value(&journal)?;
        }
        if let Some(p) = &progress {
            out["progress"] = p.value.clone();
        }
        return print_json(&out);
    }
    println!("id:          {}", m.id);
    println!("state:       {}", m.state);
    println!("priority:    {}", m.priority);
    println!("attempts:    {}", m.attempts);
    println!("enqueued:    {}", timestamp(m.enqueued_at));
    let times = [
        ("due:", m.run_at),
        ("claimed:", m.claimed_at),
        ("lease until:", m.lease_until),
        ("died:", m.died_at),
        ("deadline:", m.deadline),
    ];
    for (label, t) in times {
        if let Some(t) = t {
            println!("{label:<12} {}", timestamp(t));
        }
    }
    if let Some(t) = m.run_timeout {
        println!("run timeout: {}", humantime::format_duration(t));
    }
    if let Some(owner) = &m.owner {
        println!("owner:       {owner}");
    }
    if let Some(p) = &progress {
        println!("progress:    {} (at {})", p.value, timestamp(p.updated_at));
    }
    if let Some(key) = &m.ordering_key {
        println!("key:         {key}");
    }
    if let Some(key) = &m.concurrency_key {
        println!("concurrency: {key}");
    }
    for (k, v) in &m.headers {
        println!("header:      {k}={v}");
    }
    for e in &m.errors {
        println!(
            "error:       attempt {} at {}: {}",
            e.attempt, e.at, e.error
        );
    }
    for s in &journal.steps {
        let wake = s.wake_at.map(|t| format!(" until {}", timestamp(t)));
        println!(
            "{:<12} {} {:?}: {}{} (recorded {}, {} bytes)",
            format!("{}:", s.kind),
            s.seq,
            s.name,
            s.state,
            wake.unwrap_or_default(),
            timestamp(s.recorded_at),
            s.result_bytes
        );
    }
    for event in &journal.waiting_for {
        println!("waits for:   event {event:?}");
    }
    println!("body:        {}", String::from_utf8_lossy(&m.body));
    Ok(())
}
