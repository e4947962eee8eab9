//! One message in `consume`: run the command with the body on its stdin. The worker runtime
//! around it extends the lease while the command runs, acks on `Outcome::Done`, nacks with the
//! returned error text (the end of stderr and the exit status), and at the end of the shutdown
//! grace period drops the handler, which kills the command's whole process group. A message
//! cancelled while its command runs (`sqlmq cancel`), or whose deadline or run timeout comes,
//! sends the group SIGTERM, then SIGKILL when the grace period passes.

use sqlmq::telemetry::{TRACEPARENT, TRACESTATE};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlmq::worker::Handler;
use sqlmq::{Backend, Delivery, JobContext, Outcome};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Bytes of the command's stderr kept as the nack's error text (the end, where errors are).
pub const STDERR_TAIL_BYTES: usize = 4096;
/// How long to wait for the command's stdin/stderr pipes after it exited. A background
/// grandchild may hold them open; we do not wait for it.
const PIPE_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The handler `consume` registers: `sh -c EXEC` per message.
#[derive(Clone)]
pub struct CommandHandler {
    /// The shell command.
    pub exec: Arc<str>,
    /// Print one line per message.
    pub verbose: bool,
    /// How long a cancelled message's command may take to exit after SIGTERM.
    pub grace: Duration,
}

impl<B: Backend> Handler<Delivery, B> for CommandHandler {
    type Error = String;

    async fn handle(&self, delivery: Delivery, ctx: JobContext<B>) -> Result<Outcome, String> {
        let started = Instant::now();
        let (id, attempt) = (delivery.id, delivery.attempt);
        let result = run(&self.exec, &ctx, delivery, self.grace).await;
        if self.verbose {
            let what = match &result {
                Ok(_) => "exit 0".to_owned(),
                Err(e) => e.lines().last().unwrap_or_default().to_owned(),
            };
            eprintln!("{id} attempt {attempt}: {what} ({:?})", started.elapsed());
        }
        result
    }
}

/// Run the command to its end; Ok on exit 0, else the text to nack with.
async fn run<B: Backend>(
    exec: &str,
    ctx: &JobContext<B>,
    delivery: Delivery,
    grace: Duration,
) -> Result<Outcome, String> {
    let mut child = command(exec, ctx, &delivery)
        .spawn()
        .map_err(|e| format!("cannot start `sh -c {exec}`: {e}"))?;
    let guard = GroupGuard(child.id());
    let writer = feed_stdin(&mut child, delivery.body);
    let reader = collect_stderr(&mut child);
    let status = tokio::select! {
        status = child.wait() => status,
        () = ctx.cancelled() => {
            // Cancelled: ask the whole group to stop, and make it after the grace period.
            if let Some(pid) = child.id() {
                signal_group(pid, libc::SIGTERM);
            }
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    if let Some(pid) = child.id() {
                        signal_group(pid, libc::SIGKILL);
                    }
                    child.wait().await
                }
            }
        }
    };
    guard.disarm();
    let stderr = drain(reader).await.unwrap_or_default();
    let _ = drain(writer).await;
    match status {
        Ok(status) if status.success() => Ok(Outcome::Done),
        Ok(status) => Err(failure_text(&stderr, &describe(status))),
        Err(e) => Err(format!("cannot wait for the command: {e}")),
    }
}

/// Kills the command's process group if the handler is dropped before the command ended (the
/// runtime stopping it at the end of the grace period, or its timeout).
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill_group(pid);
        }
    }
}

/// `sh -c CMD` with the message on stdin and its facts in the environment. A topic record's
/// SQLMQ_QUEUE is `topic/group`; it also gets SQLMQ_TOPIC, SQLMQ_GROUP, SQLMQ_PARTITION and
/// SQLMQ_OFFSET, and a broadcast member's SQLMQ_MEMBER (and no SQLMQ_RECEIPT: no lease).
fn command<B: Backend>(exec: &str, ctx: &JobContext<B>, d: &Delivery) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(exec)
        .stdin(Stdio::piped())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .env("SQLMQ_QUEUE", ctx.source_name())
        .env("SQLMQ_MESSAGE_ID", d.id.to_string())
        .env("SQLMQ_RECEIPT", d.receipt().to_string())
        .env("SQLMQ_ATTEMPT", d.attempt.to_string())
        // Its own process group: a Ctrl-C at the terminal (SIGINT to the foreground group)
        // must not interrupt running commands, which get their grace period instead; and at
        // the end of that period the whole group (sh and its children) is killed.
        .process_group(0)
        // If the handler is dropped (grace period over), do not leak the child; `GroupGuard`
        // kills the rest of its process group.
        .kill_on_drop(true);
    match &d.ordering_key {
        Some(key) => cmd.env("SQLMQ_ORDERING_KEY", key),
        None => cmd.env_remove("SQLMQ_ORDERING_KEY"),
    };
    match &d.concurrency_key {
        Some(key) => cmd.env("SQLMQ_CONCURRENCY_KEY", key),
        None => cmd.env_remove("SQLMQ_CONCURRENCY_KEY"),
    };
    match ctx.group() {
        Some(group) => cmd
            .env("SQLMQ_TOPIC", group.topic().name())
            .env("SQLMQ_GROUP", group.name()),
        None => cmd.env_remove("SQLMQ_TOPIC").env_remove("SQLMQ_GROUP"),
    };
    match ctx.member() {
        // A broadcast record has no lease, so no receipt to ack or extend with.
        Some(member) => cmd.env("SQLMQ_MEMBER", member).env_remove("SQLMQ_RECEIPT"),
        None => cmd.env_remove("SQLMQ_MEMBER"),
    };
    match (d.partition, d.offset) {
        (Some(partition), Some(offset)) => cmd
            .env("SQLMQ_PARTITION", partition.to_string())
            .env("SQLMQ_OFFSET", offset.to_string()),
        _ => cmd.env_remove("SQLMQ_PARTITION").env_remove("SQLMQ_OFFSET"),
    };
    for (key, value) in &d.headers {
        cmd.env(header_var(key), value);
    }
    // W3C trace context for the command's own spans: the handler span's when spans are
    // exported, else the sender's, as the message carries it.
    let mut trace = sqlmq::telemetry::current();
    if trace.is_empty() {
        trace = [TRACEPARENT, TRACESTATE]
            .into_iter()
            .filter_map(|k| Some((k.to_owned(), d.headers.get(k)?.clone())))
            .collect();
    }
    cmd.env_remove("TRACEPARENT").env_remove("TRACESTATE");
    for (key, value) in trace {
        cmd.env(key.to_ascii_uppercase(), value);
    }
    cmd
}

/// `SQLMQ_HEADER_<KEY>`, the key uppercased and every other character than A-Z 0-9 as `_`.
pub fn header_var(key: &str) -> String {
    let key: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("SQLMQ_HEADER_{key}")
}

/// Write the body to the command's stdin and close it. A command that does not read its
/// stdin makes the write fail with a broken pipe, which is not an error.
fn feed_stdin(child: &mut Child, body: Vec<u8>) -> JoinHandle<()> {
    let stdin = child.stdin.take();
    tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&body).await;
        }
    })
}

/// Read the command's stderr to its end, keeping the last [`STDERR_TAIL_BYTES`].
fn collect_stderr(child: &mut Child) -> JoinHandle<String> {
    let stderr = child.stderr.take();
    tokio::spawn(async move {
        match stderr {
            Some(stderr) => tail(stderr, STDERR_TAIL_BYTES).await,
            None => String::new(),
        }
    })
}

/// Read `reader` to its end and return its last `keep` bytes as text.
async fn tail(mut reader: impl AsyncRead + Unpin, keep: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = reader.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > keep {
            kept.drain(..kept.len() - keep);
        }
    }
    // The cut may have split a character: drop the partial one.
    let start = kept
        .iter()
        .position(|b| (b & 0xC0) != 0x80)
        .unwrap_or(kept.len());
    String::from_utf8_lossy(&kept[start..]).trim().to_owned()
}

/// Wait a bounded time for a pipe task; abandon it after [`PIPE_DRAIN_TIMEOUT`].
async fn drain<T>(task: JoinHandle<T>) -> Option<T> {
    let abort = task.abort_handle();
    match tokio::time::timeout(PIPE_DRAIN_TIMEOUT, task).await {
        Ok(result) => result.ok(),
        Err(_) => {
            abort.abort();
            None
        }
    }
}

/// SIGKILL the command's process group (sh and everything it started).
fn kill_group(pid: u32) {
    signal_group(pid, libc::SIGKILL);
}

/// Send `signal` to the command's process group.
fn signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory effects. The group id is the child's pid (it was spawned
    // with process_group(0)) and the child is not reaped yet (the guard is disarmed once it is,
    // and `Child::id` is None once it was), so the id is not reused.
    unsafe {
        libc::kill(-(pid as libc::pid_t), signal);
    }
}

/// `exit status N` or `killed by signal N`.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// The nack's error text: the end of stderr, then how the command ended.
fn failure_text(stderr: &str, ended: &str) -> String {
    if stderr.is_empty() {
        ended.to_owned()
    } else {
        format!("{stderr}\n{ended}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names() {
        assert_eq!(header_var("trace-id"), "SQLMQ_HEADER_TRACE_ID");
        assert_eq!(header_var("Content.Type"), "SQLMQ_HEADER_CONTENT_TYPE");
        assert_eq!(header_var("é"), "SQLMQ_HEADER__");
    }

    #[tokio::test]
    async fn stderr_tail_keeps_the_end_on_a_character_boundary() {
        let mut input = "x".repeat(5000).into_bytes();
        input.extend_from_slice("é".repeat(10).as_bytes());
        input.extend_from_slice(b"the error\n");
        let text = tail(&input[..], 25).await;
        assert!(text.ends_with("the error"), "{text}");
        assert!(!text.contains('\u{FFFD}'), "{text}");
        assert!(text.len() <= 25);
    }

    #[test]
    fn failure_texts() {
        assert_eq!(failure_text("", "exit status 1"), "exit status 1");
        assert_eq!(failure_text("boom", "exit status 2"), "boom\nexit status 2");
    }
}
