//! `sqlmq subscribe`: join a topic's consumer group (creating it if missing) and print its
//! records as they arrive, or with `--exec` run a command per record on the worker runtime of
//! `consume`: for a cluster group, per record claimed by this process; for a broadcast group,
//! per record of every partition as member `--member`. With `--exec`, several `--group`s are
//! served by one process.

use std::io::Write;

use anyhow::Result;
use sqlmq::queue::{Backoff, Receipt};
use sqlmq::source::SourceName;
use sqlmq::topic::{GroupMode, StartAt};
use sqlmq::worker::CancellationToken;
use sqlmq::{Backend, Delivery, Error, Group, GroupConfig, Topic};

use super::consume::{self, Checkpoints, ExecOptions, ExecSource, StopWhen};
use super::queue::{RateChoice, parse_rate_limit};
use super::topic::view::{JsonRecord, record_line};
use super::{UsageError, parse_backoff, parse_duration, parse_start_at};
use crate::poll::PollDelay;
use crate::settings::{Patience, Settings};

/// Most records claimed or read at once when printing.
const PRINT_BATCH: u64 = 100;

/// Arguments of `sqlmq subscribe`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Topic name
    topic: String,
    /// Consumer group; created if missing (see --mode, --from). With --exec, repeat it to
    /// serve several groups of the topic from one process
    #[arg(long = "group", value_name = "G", required = true)]
    groups: Vec<String>,
    /// Mode of a group created now: `cluster` (each record to one member, acked, retried,
    /// dead-lettered) or `broadcast` (every member reads every record) [default: cluster]. An
    /// existing group keeps its mode; naming another one is an error
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    mode: Option<GroupMode>,
    /// Where a group created now starts: earliest, latest, an offset or an RFC 3339 time
    /// [default: latest, i.e. only records published from now on]. An existing group keeps
    /// its position (move it with `sqlmq reset`)
    #[arg(long, value_name = "WHEN", value_parser = parse_start_at, allow_negative_numbers = true)]
    from: Option<StartAt>,
    /// Failed attempts before a record becomes a dead letter of the group [default: 16 for a
    /// new group]; given for an existing group, it is updated
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// Wait between the group's attempts: a ladder (10s,1m) or exp:BASE:MAX [default: 10s, 30s,
    /// 1m, 2m ... 2h]; given for an existing group, it is updated
    #[arg(long, value_name = "SPEC", value_parser = parse_backoff)]
    backoff: Option<Backoff>,
    /// Cluster groups: at most COUNT deliveries in any window of DURATION, every member
    /// together (e.g. 50/1s; `none` removes it); given for an existing group, it is updated
    #[arg(long, value_name = "COUNT/DUR", value_parser = parse_rate_limit)]
    rate_limit: Option<RateChoice>,
    /// Broadcast member name: a restarted member resumes from its checkpoint [default: the
    /// host name]
    #[arg(long, value_name = "NAME")]
    member: Option<String>,
    /// Shell command run once per record (`sh -c CMD`), the body on stdin and SQLMQ_TOPIC,
    /// SQLMQ_GROUP, SQLMQ_PARTITION, SQLMQ_OFFSET, SQLMQ_MESSAGE_ID, SQLMQ_RECEIPT (cluster
    /// groups), SQLMQ_MEMBER (broadcast groups), SQLMQ_ATTEMPT, SQLMQ_ORDERING_KEY (the
    /// record's key) and `SQLMQ_HEADER_<KEY>` in the environment. Exit 0 acks (broadcast: the
    /// member passes the record); anything else fails the attempt with the end of its stderr,
    /// retried on the group's backoff (broadcast: in place, holding back only its partition)
    /// until the group's max attempts make it a dead letter (broadcast: this member's). Without
    /// --exec, records are printed (and acked once printed)
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// Broadcast members with --exec: checkpoint the position after every N records
    #[arg(long, value_name = "N", default_value_t = 1, requires = "exec")]
    checkpoint_every: u64,
    /// Broadcast members with --exec: checkpoint at least this often while records pass
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration, requires = "exec")]
    checkpoint_interval: std::time::Duration,
    /// Exit after N records (printed, or claimed and settled with --exec) [default: run until
    /// Ctrl-C]
    #[arg(short = 'n', long = "count", value_name = "N")]
    count: Option<u64>,
    /// Print each record as one line of JSON (id, partition, offset, key, headers, body)
    #[arg(long, conflicts_with = "exec")]
    json: bool,
    #[command(
        flatten,
        next_help_heading = "Worker options (--lease also applies to printing)"
    )]
    options: ExecOptions,
}

/// clap value parser for `--mode`.
fn parse_mode(text: &str) -> Result<GroupMode, String> {
    text.parse::<GroupMode>().map_err(|e| match e {
        Error::InvalidArgument(m) => m,
        e => e.to_string(),
    })
}

/// Run `sqlmq subscribe`.
pub async fn run<B: Backend>(settings: &Settings, args: Args) -> Result<()> {
    if args.count == Some(0) {
        return Err(UsageError("-n must be at least 1".into()).into());
    }
    if args.exec.is_none() && args.groups.len() > 1 {
        return Err(UsageError(
            "printing reads one group; with --exec one process serves several".into(),
        )
        .into());
    }
    if args.checkpoint_every == 0 || args.checkpoint_interval.is_zero() {
        return Err(UsageError(
            "--checkpoint-every and --checkpoint-interval must be positive".into(),
        )
        .into());
    }
    for (i, g) in args.groups.iter().enumerate() {
        if args.groups[..i].contains(g) {
            return Err(UsageError(format!("group {g} is named twice")).into());
        }
    }
    if args.exec.is_some() {
        args.options.validate()?;
    }
    // A long-running process: it waits out an unavailable database, at start as later.
    let client = settings
        .connect_with::<B>(
            settings.builder_with_pool(consume::EXEC_WORKER_CONNECTIONS),
            Patience::Unbounded,
        )
        .await?;
    let stop = sqlmq::worker::shutdown_on_signals();
    let outage = client.outage();
    let Some(topic) = outage.wait_out(&stop, || client.topic(&args.topic)).await? else {
        return Ok(());
    };
    let mut groups = Vec::new();
    for name in &args.groups {
        let Some(group) = join(&topic, name, &args, &stop).await? else {
            return Ok(());
        };
        groups.push(group);
    }
    let Some(exec) = &args.exec else {
        // A printing subscriber fires the database's schedules too, as a worker does.
        let (scheduler, until) = (client.clone(), stop.clone());
        tokio::spawn(async move { scheduler.run_schedules(until).await });
        let group = &groups[0];
        return match group.config().mode {
            GroupMode::Cluster => print_cluster(group, &args, &stop).await,
            GroupMode::Broadcast => print_broadcast(group, &args, &stop).await,
        };
    };
    let member = args.member.clone().unwrap_or_else(host_name);
    let sources: Vec<ExecSource> = groups
        .iter()
        .map(|g| match g.config().mode {
            GroupMode::Cluster => ExecSource::Source(SourceName::group(topic.name(), g.name())),
            GroupMode::Broadcast => ExecSource::Member {
                topic: topic.name().to_owned(),
                group: g.name().to_owned(),
                member: member.clone(),
            },
        })
        .collect();
    drop(client);
    let stop = StopWhen {
        max_messages: args.count,
        drained: false,
    };
    let checkpoints = Checkpoints {
        every: args.checkpoint_every,
        interval: args.checkpoint_interval,
    };
    consume::run_exec::<B>(
        settings,
        "subscribe",
        &sources,
        exec,
        &args.options,
        Some(checkpoints),
        stop,
    )
    .await
}

/// The group `name`, created if missing (at `--from`, default latest), its retry settings
/// updated if given; `None` when `stop` came while waiting for the database.
async fn join<B: Backend>(
    topic: &Topic<B>,
    name: &str,
    args: &Args,
    stop: &CancellationToken,
) -> Result<Option<Group<B>>> {
    let label = format!("{}/{}", topic.name(), name);
    let outage = topic.client().outage();
    let lookup = || async {
        match topic.group(name).await {
            Ok(group) => Ok(Some(group)),
            Err(Error::UnknownGroup { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let Some(found) = outage.wait_out(stop, lookup).await? else {
        return Ok(None);
    };
    let create = |config: GroupConfig, start: StartAt| {
        outage.wait_out(stop, move || {
            topic.create_group(name, config.clone(), start)
        })
    };
    match found {
        Some(group) => {
            let mode = group.config().mode;
            if let Some(wanted) = args.mode
                && wanted != mode
            {
                return Err(UsageError(format!(
                    "group {label} exists as a {mode} group, not {wanted}"
                ))
                .into());
            }
            if args.from.is_some() {
                eprintln!(
                    "group {label} exists: --from applies to new groups only, it keeps its \
                     position (move it with `sqlmq reset`)"
                );
            }
            if args.max_attempts.is_none() && args.backoff.is_none() && args.rate_limit.is_none() {
                return Ok(Some(group));
            }
            let config = retry_settings(group.config().clone(), args);
            Ok(create(config, StartAt::Latest).await?)
        }
        None => {
            let mode = args.mode.unwrap_or_default();
            let config = retry_settings(GroupConfig::default().mode(mode), args);
            let start = args.from.unwrap_or_default();
            let Some(group) = create(config, start).await? else {
                return Ok(None);
            };
            let from = match start {
                StartAt::Latest => "latest (records published from now on)".to_owned(),
                StartAt::Earliest => "earliest (every retained record)".to_owned(),
                StartAt::Offset(o) => format!("offset {o}"),
                StartAt::Time(t) => crate::output::timestamp(t),
            };
            eprintln!("created {mode} group {label}, starting at {from}");
            Ok(Some(group))
        }
    }
}

/// `config` with the retry settings of the command line.
fn retry_settings(mut config: GroupConfig, args: &Args) -> GroupConfig {
    if let Some(n) = args.max_attempts {
        config = config.max_attempts(n);
    }
    if let Some(b) = &args.backoff {
        config = config.backoff(b.clone());
    }
    if let Some(RateChoice(rate)) = &args.rate_limit {
        config = config.rate_limit(*rate);
    }
    config
}

/// How many to take next: at most [`PRINT_BATCH`], and never more than are still wanted.
fn next_batch(count: Option<u64>, printed: u64) -> usize {
    count
        .map_or(PRINT_BATCH, |n| n.saturating_sub(printed).min(PRINT_BATCH))
        .max(1) as usize
}

/// Print one record (a line of text or of JSON).
fn print_record(json: bool, line: impl FnOnce() -> String, value: JsonRecord) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, &value)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", line())?;
    }
    out.flush()?;
    Ok(())
}

/// Wait for the next poll; false when a signal came first.
async fn idle(delay: &mut PollDelay, stop: &CancellationToken) -> bool {
    tokio::select! {
        _ = stop.cancelled() => false,
        _ = tokio::time::sleep(delay.next_delay()) => true,
    }
}

/// Cluster group: claim, print, ack (at least once: a crash between printing and acking
/// prints the record again elsewhere). Waits out an unavailable database.
async fn print_cluster<B: Backend>(
    group: &Group<B>,
    args: &Args,
    stop: &CancellationToken,
) -> Result<()> {
    let outage = group.topic().client().outage();
    let mut delay = PollDelay::default();
    let mut printed = 0u64;
    while args.count.is_none_or(|n| printed < n) && !stop.is_cancelled() {
        let want = next_batch(args.count, printed);
        let receive = || group.receive(want, args.options.lease);
        let Some(batch) = outage.wait_out(stop, receive).await? else {
            break;
        };
        if batch.is_empty() {
            if !idle(&mut delay, stop).await {
                break;
            }
            continue;
        }
        delay.reset();
        for d in &batch {
            let line = || {
                record_line(
                    d.partition,
                    d.offset,
                    d.id,
                    d.ordering_key.as_deref(),
                    &d.body,
                )
            };
            print_record(args.json, line, JsonRecord::from(d))?;
        }
        printed += batch.len() as u64;
        let receipts: Vec<Receipt> = batch.iter().map(Delivery::receipt).collect();
        let Some(report) = outage.wait_out(stop, || group.ack_batch(&receipts)).await? else {
            break;
        };
        if !report.lost.is_empty() {
            eprintln!(
                "warning: {} record(s) printed too late to be acked (their lease ended): they \
                 will be delivered again",
                report.lost.len()
            );
        }
    }
    eprintln!(
        "sqlmq subscribe {}/{}: {printed} record(s)",
        group.topic().name(),
        group.name()
    );
    Ok(())
}

/// Broadcast group: read as member `--member`, print, checkpoint after every batch. Waits
/// out an unavailable database.
async fn print_broadcast<B: Backend>(
    group: &Group<B>,
    args: &Args,
    stop: &CancellationToken,
) -> Result<()> {
    let outage = group.topic().client().outage();
    let member = args.member.clone().unwrap_or_else(host_name);
    let Some(reader) = outage.wait_out(stop, || group.reader(&member)).await? else {
        return Ok(());
    };
    // Behind a lock so that each retry of a poll or a checkpoint can borrow it anew.
    let reader = tokio::sync::Mutex::new(reader);
    let mut delay = PollDelay::default();
    let mut printed = 0u64;
    while args.count.is_none_or(|n| printed < n) && !stop.is_cancelled() {
        let want = next_batch(args.count, printed);
        let poll = || async { reader.lock().await.poll(want).await };
        let Some(batch) = outage.wait_out(stop, poll).await? else {
            break;
        };
        if batch.is_empty() {
            if !idle(&mut delay, stop).await {
                break;
            }
            continue;
        }
        delay.reset();
        for r in &batch {
            let line = || {
                record_line(
                    Some(r.partition),
                    Some(r.offset),
                    r.id,
                    r.key.as_deref(),
                    &r.body,
                )
            };
            print_record(args.json, line, JsonRecord::from(r))?;
        }
        printed += batch.len() as u64;
        let checkpoint = || async { reader.lock().await.checkpoint().await };
        if outage.wait_out(stop, checkpoint).await?.is_none() {
            break;
        }
    }
    eprintln!(
        "sqlmq subscribe {}/{} (member {member}): {printed} record(s)",
        group.topic().name(),
        group.name()
    );
    Ok(())
}

/// This host's name as a valid member name (other characters than A-Z a-z 0-9 . _ - as `-`).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name: String = String::from_utf8_lossy(&buf[..end])
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(sqlmq::Client::MAX_NAME_LEN)
        .collect();
    if rc != 0 || name.is_empty() {
        "sqlmq-cli".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_never_exceed_what_is_wanted() {
        assert_eq!(next_batch(None, 5000), 100);
        assert_eq!(next_batch(Some(3), 1), 2);
        assert_eq!(next_batch(Some(1000), 0), 100);
        assert!(sqlmq::admin::validate_name("member", &host_name()).is_ok());
    }
}
