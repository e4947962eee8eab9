//! `sqlmq batch create|add|seal|show`: batches of messages with callbacks, and workflows
//! (steps that run after the steps they depend on), as the library's `Batch`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use serde::{Deserialize, Serialize};
use sqlmq::flow::{Batch, BatchId, BatchStatus};
use sqlmq::{Backend, Message};

use super::send::bodies;
use crate::output::{print_json, print_table, timestamp};
use crate::settings::Settings;

/// `sqlmq batch ...`
#[derive(Subcommand, Debug)]
pub enum BatchCommand {
    /// Create a batch: members sent together (each BODY, or each stdin line, to QUEUE; or a
    /// workflow from --file), and callbacks sent once when it finishes
    Create(CreateArgs),
    /// Add members to an open batch (each BODY, or each stdin line)
    Add {
        /// Batch id
        #[arg(value_parser = parse_batch_id)]
        id: BatchId,
        /// Queue name
        queue: String,
        /// Message bodies; when none, one message per non-empty stdin line
        bodies: Vec<String>,
    },
    /// Seal an open batch: no more members; it finishes when its last member does
    Seal {
        /// Batch id
        #[arg(value_parser = parse_batch_id)]
        id: BatchId,
    },
    /// List batches and workflows with their progress: the unfinished ones first, then those
    /// finished most recently (kept 7 days)
    List {
        /// Only batches in this state
        #[arg(long, value_enum)]
        state: Option<StateArg>,
        /// Most batches to list (1 to 1000)
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Show a batch's progress and each member's state
    Show {
        /// Batch id
        #[arg(value_parser = parse_batch_id)]
        id: BatchId,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

/// A batch's state, as `--state` takes it.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum StateArg {
    Open,
    Sealed,
    Finished,
}

impl From<StateArg> for sqlmq::flow::BatchState {
    fn from(s: StateArg) -> Self {
        match s {
            StateArg::Open => sqlmq::flow::BatchState::Open,
            StateArg::Sealed => sqlmq::flow::BatchState::Sealed,
            StateArg::Finished => sqlmq::flow::BatchState::Finished,
        }
    }
}

/// Arguments of `sqlmq batch create`.
#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// Queue of the members (not with --file)
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    queue: Option<String>,
    /// Message bodies; when none, one member per non-empty stdin line
    bodies: Vec<String>,
    /// A workflow as JSON: {"steps": [{"name", "queue", "body", "after": [step names]}, ...]}
    /// (callbacks and "open" may be given there or with the options)
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Send BODY to QUEUE when every member was acked
    #[arg(long, value_name = "QUEUE=BODY", value_parser = parse_callback)]
    on_success: Option<(String, String)>,
    /// Send BODY to QUEUE when every member finished and one or more was not acked
    #[arg(long, value_name = "QUEUE=BODY", value_parser = parse_callback)]
    on_failure: Option<(String, String)>,
    /// Send BODY to QUEUE when every member finished, acked or not
    #[arg(long, value_name = "QUEUE=BODY", value_parser = parse_callback)]
    on_complete: Option<(String, String)>,
    /// Keep the batch open for `batch add` until `batch seal`
    #[arg(long)]
    open: bool,
    /// Print {"id", "members", "steps"} as JSON
    #[arg(long)]
    json: bool,
}

/// A workflow file.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct WorkflowFile {
    steps: Vec<StepFile>,
    #[serde(default)]
    on_success: Option<CallbackFile>,
    #[serde(default)]
    on_failure: Option<CallbackFile>,
    #[serde(default)]
    on_complete: Option<CallbackFile>,
    #[serde(default)]
    open: bool,
}

/// One step of a workflow file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct StepFile {
    name: String,
    queue: String,
    #[serde(default)]
    body: String,
    #[serde(default)]
    after: Vec<String>,
}

/// A callback of a workflow file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct CallbackFile {
    queue: String,
    #[serde(default)]
    body: String,
}

fn parse_batch_id(text: &str) -> Result<BatchId, String> {
    text.parse::<BatchId>().map_err(|e| e.to_string())
}

fn parse_callback(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((q, body)) if !q.is_empty() => Ok((q.to_owned(), body.to_owned())),
        _ => Err(format!("expected QUEUE=BODY, got {text:?}")),
    }
}

/// Run `sqlmq batch ...`.
pub async fn run<B: Backend>(settings: &Settings, command: BatchCommand) -> Result<()> {
    match command {
        BatchCommand::Create(args) => create::<B>(settings, args).await,
        BatchCommand::Add { id, queue, bodies } => {
            let messages = messages(&bodies).await?;
            let client = settings.connect::<B>().await?;
            let sent = client.add_to_batch(id, &queue, messages).await?;
            println!("added {} member(s) to batch {id}", sent.len());
            Ok(())
        }
        BatchCommand::Seal { id } => {
            let client = settings.connect::<B>().await?;
            client.seal_batch(id).await?;
            println!("sealed batch {id}");
            Ok(())
        }
        BatchCommand::List { state, limit, json } => {
            let client = settings.connect::<B>().await?;
            let batches = client.batches(state.map(Into::into), limit).await?;
            if json {
                return print_json(&batches);
            }
            let rows: Vec<Vec<String>> = batches
                .iter()
                .map(|b| {
                    vec![
                        b.id.to_string(),
                        label(&b.state),
                        format!("{}/{}", b.succeeded + b.dead + b.cancelled, b.members),
                        b.succeeded.to_string(),
                        b.dead.to_string(),
                        b.cancelled.to_string(),
                        timestamp(b.created_at),
                        b.finished_at.map(timestamp).unwrap_or_default(),
                    ]
                })
                .collect();
            if rows.is_empty() {
                println!("no batches");
            } else {
                print_table(
                    &[
                        "BATCH",
                        "STATE",
                        "FINISHED",
                        "SUCCEEDED",
                        "DEAD",
                        "CANCELLED",
                        "CREATED",
                        "ENDED",
                    ],
                    &rows,
                );
            }
            Ok(())
        }
        BatchCommand::Show { id, json } => {
            let client = settings.connect::<B>().await?;
            let status = client.batch(id).await?;
            if json {
                return print_json(&status);
            }
            print_status(&status);
            Ok(())
        }
    }
}

/// Messages of `bodies`, or of stdin's lines when there are none.
async fn messages(given: &[String]) -> Result<Vec<Message>> {
    let lines = if given.is_empty() {
        bodies(None, true).await?
    } else {
        given.iter().map(|b| b.as_bytes().to_vec()).collect()
    };
    if lines.is_empty() {
        bail!("no members: give bodies as arguments or one per stdin line");
    }
    Ok(lines.into_iter().map(Message::new).collect())
}

async fn create<B: Backend>(settings: &Settings, args: CreateArgs) -> Result<()> {
    let mut batch = Batch::new();
    let mut callbacks = [
        (sqlmq::flow::Role::OnSuccess, args.on_success.clone()),
        (sqlmq::flow::Role::OnFailure, args.on_failure.clone()),
        (sqlmq::flow::Role::OnComplete, args.on_complete.clone()),
    ];
    let mut open = args.open;
    match (&args.file, &args.queue) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let file: WorkflowFile = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a workflow", path.display()))?;
            if file.steps.is_empty() {
                bail!("{} has no steps", path.display());
            }
            for s in &file.steps {
                let after: Vec<&str> = s.after.iter().map(String::as_str).collect();
                batch = batch.step(&s.name, &s.queue, Message::new(s.body.clone()), &after);
            }
            let from_file = [file.on_success, file.on_failure, file.on_complete];
            for ((_, slot), cb) in callbacks.iter_mut().zip(from_file) {
                if slot.is_none() {
                    *slot = cb.map(|c| (c.queue, c.body));
                }
            }
            open |= file.open;
        }
        (None, Some(queue)) => {
            for m in messages(&args.bodies).await? {
                batch = batch.add(queue, m);
            }
        }
        (None, None) => bail!("give a QUEUE and bodies, or --file"),
    }
    for (role, cb) in callbacks {
        if let Some((queue, body)) = cb {
            let m = Message::new(body);
            batch = match role {
                sqlmq::flow::Role::OnSuccess => batch.on_success(queue, m),
                sqlmq::flow::Role::OnFailure => batch.on_failure(queue, m),
                _ => batch.on_complete(queue, m),
            };
        }
    }
    if open {
        batch = batch.open();
    }
    let client = settings.connect::<B>().await?;
    let created = client.create_batch(batch).await?;
    if args.json {
        return print_json(&created);
    }
    println!(
        "created batch {} with {} member(s){}",
        created.id,
        created.members.len(),
        if open { ", open" } else { "" }
    );
    for (step, id) in &created.steps {
        println!("  {step}: {id}");
    }
    Ok(())
}

/// A batch's progress, then a table of its messages.
fn print_status(s: &BatchStatus) {
    println!("batch:     {}", s.id);
    println!("state:     {}", label(&s.state));
    println!(
        "members:   {} ({} pending, {} succeeded, {} dead, {} cancelled)",
        s.members, s.pending, s.succeeded, s.dead, s.cancelled
    );
    println!("created:   {}", timestamp(s.created_at));
    if let Some(t) = s.finished_at {
        println!("finished:  {}", timestamp(t));
    }
    let names: BTreeMap<sqlmq::MessageId, String> = s
        .steps
        .iter()
        .map(|x| (x.id, x.step.clone().unwrap_or_else(|| x.id.to_string())))
        .collect();
    let rows: Vec<Vec<String>> = s
        .steps
        .iter()
        .map(|x| {
            vec![
                x.step.clone().unwrap_or_else(|| x.id.to_string()),
                x.queue.clone(),
                label(&x.role),
                label(&x.state),
                x.depends_on
                    .iter()
                    .map(|d| names.get(d).cloned().unwrap_or_else(|| d.to_string()))
                    .collect::<Vec<_>>()
                    .join(","),
                if x.has_result { "yes" } else { "" }.to_owned(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        println!();
        print_table(
            &["STEP/ID", "QUEUE", "ROLE", "STATE", "AFTER", "RESULT"],
            &rows,
        );
    }
}

/// A serde enum's snake_case name.
fn label<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}
