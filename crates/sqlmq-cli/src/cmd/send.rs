//! `sqlmq send`: one message from the argument or stdin, or with `--batch` one message per
//! stdin line, all sent atomically.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;
use sqlmq::Message;
use sqlmq::queue::Sent;
use tokio::io::AsyncReadExt;

use super::{parse_duration, parse_header};
use crate::output::print_json;
use crate::settings::Settings;
use sqlmq::Backend;

/// Arguments of `sqlmq send`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queue name
    queue: String,
    /// Message body; when absent, all of stdin is one message
    #[arg(conflicts_with = "batch")]
    body: Option<String>,
    /// Do not deliver before this delay (e.g. 30s)
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    delay: Option<Duration>,
    /// Priority, -32768 to 32767: lower values are delivered first [default: 0]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    priority: Option<i16>,
    /// Ordering key: strict FIFO among messages with the same key
    #[arg(long = "key", value_name = "ORDERING_KEY")]
    ordering_key: Option<String>,
    /// Concurrency key: on a queue with `--concurrency-limit N`, at most N messages of this key
    /// run at once
    #[arg(long, value_name = "KEY", conflicts_with = "ordering_key")]
    concurrency_key: Option<String>,
    /// Fairness key (a tenant): on a fair queue (`queue create --fair`) each key gets its
    /// weight's share of deliveries, whatever the others have waiting
    #[arg(long, value_name = "KEY")]
    fairness_key: Option<String>,
    /// Idempotency key: sending the same key again is a no-op that returns the first id
    #[arg(long = "id", value_name = "IDEMPOTENCY_KEY", conflicts_with_all = ["batch", "replace"])]
    idempotency_key: Option<String>,
    /// Replace the waiting message of this key (its body, headers and due time), or, once it
    /// was claimed, send anew under the key
    #[arg(long, value_name = "KEY", conflicts_with = "batch")]
    replace: Option<String>,
    /// With --replace: deliver once, after the key has had no send for this long (e.g. 5s)
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "replace",
        conflicts_with = "delay")]
    debounce: Option<Duration>,
    /// Header KEY=VALUE (repeatable)
    #[arg(long = "header", value_name = "KEY=VALUE", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// Deadline: never delivered after this time (RFC 3339, or a duration from now such as 10m);
    /// a worker stops a handler still running then, and the message becomes a dead letter
    #[arg(long, value_name = "TIME", value_parser = super::parse_deadline)]
    deadline: Option<std::time::SystemTime>,
    /// Each attempt may run this long (e.g. 30s); past it a worker stops the handler and the
    /// message becomes a dead letter, never retried
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    run_timeout: Option<Duration>,
    /// Deliver only after this message was acked (repeatable; any queue)
    #[arg(long = "depends-on", value_name = "ID", value_parser = super::parse_message_id)]
    depends_on: Vec<sqlmq::MessageId>,
    /// Send every non-empty line of stdin as one message, all in one transaction
    #[arg(long)]
    batch: bool,
    /// Print [{"id", "duplicate", "replaced"}] as JSON
    #[arg(long)]
    json: bool,
}

impl Args {
    /// A message with this body and the options of the command line.
    fn message(&self, body: Vec<u8>) -> Message {
        let mut m = Message::new(body);
        if let Some(d) = self.delay {
            m = m.delay(d);
        }
        if let Some(p) = self.priority {
            m = m.priority(p);
        }
        if let Some(k) = &self.ordering_key {
            m = m.ordering_key(k);
        }
        if let Some(k) = &self.concurrency_key {
            m = m.concurrency_key(k);
        }
        if let Some(k) = &self.idempotency_key {
            m = m.idempotency_key(k);
        }
        if let Some(k) = &self.fairness_key {
            m = m.fairness_key(k);
        }
        if let Some(k) = &self.replace {
            m = match self.debounce {
                Some(quiet) => m.debounce(k, quiet),
                None => m.replacing(k),
            };
        }
        if let Some(at) = self.deadline {
            m = m.deadline(at);
        }
        if let Some(t) = self.run_timeout {
            m = m.run_timeout(t);
        }
        for (k, v) in &self.headers {
            m = m.header(k, v);
        }
        m.depends_on(self.depends_on.iter().copied())
    }
}

/// Run `sqlmq send`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    let bodies = bodies(args.body.as_deref(), args.batch).await?;
    if bodies.is_empty() {
        eprintln!("stdin held no lines: nothing sent");
        return Ok(());
    }
    let client = settings.connect::<B>().await?;
    let queue = client.queue(&args.queue).await?;
    let limit = client.max_payload_bytes();
    let messages: Vec<Message> = bodies.iter().map(|b| args.message(b.clone())).collect();
    let count = messages.len();
    let sent = queue.send_batch(messages).await.map_err(|e| {
        let rejected = format!("the batch of {count} messages was rejected and nothing was sent");
        batch_error(e, args.batch.then_some(&bodies[..]), limit, &rejected)
    })?;
    print_sent(&sent, args.json)
}

/// The bodies to send or publish: `body`, else all of stdin, or with `batch` its non-empty
/// lines (also used by `publish`).
pub async fn bodies(body: Option<&str>, batch: bool) -> Result<Vec<Vec<u8>>> {
    Ok(match body {
        Some(body) => vec![body.as_bytes().to_vec()],
        None if batch => lines(&read_stdin().await?),
        None => vec![read_stdin().await?],
    })
}

/// Explain a rejected batch read from stdin (`lines`; `None` for a single body): the library
/// rejects the whole batch, so name the line that is too large, and say what `rejected` it.
pub fn batch_error(
    e: sqlmq::Error,
    lines: Option<&[Vec<u8>]>,
    limit: usize,
    rejected: &str,
) -> anyhow::Error {
    match (e, lines) {
        (e @ sqlmq::Error::PayloadTooLarge { .. }, Some(lines)) => {
            let line = lines
                .iter()
                .position(|b| b.len() > limit)
                .map_or(0, |i| i + 1);
            anyhow::Error::new(e).context(format!("line {line} of stdin is too large: {rejected}"))
        }
        (e @ sqlmq::Error::InvalidArgument(_), Some(_)) => {
            anyhow::Error::new(e).context(rejected.to_owned())
        }
        (e, _) => e.into(),
    }
}

/// All of stdin.
async fn read_stdin() -> Result<Vec<u8>> {
    if std::io::stdin().is_terminal() {
        eprintln!("reading the message from stdin (end with Ctrl-D)");
    }
    let mut input = Vec::new();
    tokio::io::stdin()
        .read_to_end(&mut input)
        .await
        .context("cannot read stdin")?;
    Ok(input)
}

/// The non-empty lines of `input`, without their `\n`.
fn lines(input: &[u8]) -> Vec<Vec<u8>> {
    input
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// One id per line (`(duplicate)` when the idempotency key was known, `(replaced)` when it
/// replaced its key's waiting message), or JSON.
fn print_sent(sent: &[Sent], json: bool) -> Result<()> {
    if json {
        #[derive(Serialize)]
        struct Row {
            id: String,
            duplicate: bool,
            replaced: bool,
        }
        let rows: Vec<Row> = sent
            .iter()
            .map(|s| Row {
                id: s.id.to_string(),
                duplicate: s.duplicate,
                replaced: s.replaced,
            })
            .collect();
        return print_json(&rows);
    }
    for s in sent {
        if s.duplicate {
            println!("{} (duplicate)", s.id);
        } else if s.replaced {
            println!("{} (replaced)", s.id);
        } else {
            println!("{}", s.id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_skip_empty_ones_and_keep_other_bytes() {
        assert_eq!(
            lines(b"a\n\nb\r\n\xff\n"),
            vec![b"a".to_vec(), b"b\r".to_vec(), vec![0xff]]
        );
        assert!(lines(b"").is_empty());
        assert!(lines(b"\n\n").is_empty());
    }
}
