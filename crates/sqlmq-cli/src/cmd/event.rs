//! `sqlmq event emit|list`: events for durable runs — emit one (waking the runs that wait for
//! it), list those suspended runs wait for.

use anyhow::{Context, Result};
use clap::Subcommand;
use serde::Serialize;
use sqlmq::Backend;

use crate::output::{json_time, print_json, print_table, timestamp};
use crate::settings::Settings;

/// `sqlmq event ...`
#[derive(Subcommand, Debug)]
pub enum EventCommand {
    /// Emit an event: kept for the flow retention (the first emit of a name wins) and every run
    /// waiting for it woken
    Emit {
        /// Event name (1 to 255 bytes)
        name: String,
        /// Payload: JSON (text that is not JSON is sent as a JSON string); none: null
        payload: Option<String>,
        /// Print what the emit did as JSON
        #[arg(long)]
        json: bool,
    },
    /// List the events suspended runs wait for, the longest awaited first
    List {
        /// Most events to list
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print a JSON array
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct JsonAwaited {
    name: String,
    runs: u64,
    since: String,
}

/// The payload as JSON: the text itself when it parses, else the text as a JSON string.
fn payload_of(text: Option<&str>) -> serde_json::Value {
    match text {
        None => serde_json::Value::Null,
        Some(t) => serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.into())),
    }
}

/// Run `sqlmq event ...`.
pub async fn run<B: Backend>(settings: &Settings, command: EventCommand) -> Result<()> {
    let client = settings.connect::<B>().await?;
    match command {
        EventCommand::Emit {
            name,
            payload,
            json,
        } => {
            let payload = payload_of(payload.as_deref());
            let emitted = client
                .emit_event(&name, &payload)
                .await
                .with_context(|| format!("emitting event {name:?}"))?;
            if json {
                return print_json(&emitted);
            }
            if emitted.kept {
                println!("emitted {name}: {} waiting runs woken", emitted.woken);
            } else {
                println!("{name} was emitted already: the first emit stands, nothing changed");
            }
            Ok(())
        }
        EventCommand::List { limit, json } => {
            let events = client.awaited_events(limit).await?;
            if json {
                let out: Vec<JsonAwaited> = events
                    .into_iter()
                    .map(|e| JsonAwaited {
                        since: json_time(e.since),
                        name: e.name,
                        runs: e.runs,
                    })
                    .collect();
                return print_json(&out);
            }
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|e| vec![e.name.clone(), e.runs.to_string(), timestamp(e.since)])
                .collect();
            print_table(&["EVENT", "RUNS", "WAITING SINCE"], &rows);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::payload_of;

    #[test]
    fn payloads_are_json_or_json_strings() {
        assert_eq!(payload_of(None), serde_json::Value::Null);
        assert_eq!(payload_of(Some(r#"{"a":1}"#)), serde_json::json!({"a": 1}));
        assert_eq!(payload_of(Some("DHL 123")), serde_json::json!("DHL 123"));
    }
}
