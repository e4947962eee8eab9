//! The worker runtime across real processes (this test binary run again as a child):
//!
//! - `kill -9` of a worker process holding claims while another lives: the survivor takes its
//!   messages well before their leases would have expired, and every message is handled;
//! - SIGTERM during a run: in-flight handlers finish, nothing claimed is stranded, the process
//!   exits 0 within its grace period.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlmq::{Client, Delivery, JobContext, Message, MessageId, Outcome, QueueConfig, Worker};
use sqlmq_testkit::{
    Recorder, TestBackend, TestDb, Value, check_invariants, child_test, eventually_async,
};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(60);
const HEARTBEAT: Duration = Duration::from_millis(200);

/// The child's side: `SQLMQ_CHILD_WORKER=<database>` and `SQLMQ_CHILD_MODE=hold|graceful`.
pub(crate) fn child_worker<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_WORKER") else {
        return;
    };
    let mode = std::env::var("SQLMQ_CHILD_MODE").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = Client::<B>::open(&B::url_of(&database)).await.unwrap();
        let builder = Worker::builder(&client)
            .lease(LEASE)
            .heartbeat_interval(HEARTBEAT)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .shutdown_grace(Duration::from_secs(10));
        let report = match mode.as_str() {
            // Claims everything and never finishes: only a kill -9 ends it.
            "hold" => {
                builder
                    .concurrency(100)
                    .queue_raw("work", |_d: Delivery, _ctx: JobContext<B>| async {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        Ok::<_, String>(Outcome::Done)
                    })
                    .run(CancellationToken::new())
                    .await
            }
            // One-second handlers that record their completion in the same transaction as
            // their ack, until SIGTERM.
            "graceful" => {
                builder
                    .concurrency(4)
                    .queue_raw("work", |d: Delivery, ctx: JobContext<B>| async move {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
                        B::execute(
                            &mut *tx,
                            "INSERT INTO done (id) VALUES (?)",
                            &[Value::from(d.id.to_string())],
                        )
                        .await;
                        tx.commit().await.map_err(|e| e.to_string())?;
                        Ok::<_, String>(Outcome::Done)
                    })
                    .run(sqlmq::worker::shutdown_on_signals())
                    .await
            }
            other => panic!("unknown mode {other}"),
        };
        println!("{}", serde_json::to_string(&report.unwrap()).unwrap());
    });
}

fn spawn_child<B: TestBackend>(db: &TestDb<B>, mode: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test::<B>("worker_processes", "child_worker"),
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_WORKER", &db.name)
        .env("SQLMQ_CHILD_MODE", mode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

pub(crate) async fn a_killed_workers_claims_go_to_the_survivor_before_their_leases_expire<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("work", QueueConfig::default())
        .await
        .unwrap();
    let batch: Vec<Message> = (0..40).map(|i| Message::new(format!("{i}"))).collect();
    let sent: HashSet<MessageId> = q
        .send_batch(batch)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();

    let mut child = spawn_child(&db, "hold");
    eventually_async(
        Duration::from_secs(20),
        "the child holding every message",
        || async { (q.stats().await.unwrap().in_flight == 40).then_some(()) },
    )
    .await;
    child.kill().unwrap(); // SIGKILL: no deregistration, no release
    child.wait().unwrap();
    let killed_at = Instant::now();

    let handled = Recorder::default();
    let token = CancellationToken::new();
    let survivor = tokio::spawn(
        Worker::builder(&client)
            .lease(LEASE)
            .heartbeat_interval(HEARTBEAT)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .queue_raw("work", handled.clone())
            .run(token.clone()),
    );
    eventually_async(
        Duration::from_secs(30),
        "the survivor handling all 40",
        || async { (handled.count() >= 40).then_some(()) },
    )
    .await;
    let took = killed_at.elapsed();
    token.cancel();
    let report = survivor.await.unwrap().unwrap();
    assert!(
        took < LEASE / 4,
        "took {took:?}: the claims must come back long before their {LEASE:?} leases end"
    );
    assert_eq!(handled.ids(), sent, "every message handled");
    assert_eq!(report.acked, 40);
    let history = q.receive(1, Duration::from_secs(1)).await.unwrap();
    assert!(history.is_empty());
    assert!(
        client.processes().await.unwrap().is_empty(),
        "the dead process was pruned, the survivor deregistered"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn sigterm_lets_in_flight_handlers_finish_and_strands_nothing<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("work", QueueConfig::default())
        .await
        .unwrap();
    db.exec("CREATE TABLE done (id CHAR(36) NOT NULL)", &[])
        .await;
    let batch: Vec<Message> = (0..10).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(batch).await.unwrap();

    let child = spawn_child(&db, "graceful");
    eventually_async(Duration::from_secs(20), "four handlers running", || async {
        (q.stats().await.unwrap().in_flight == 4).then_some(())
    })
    .await;
    let signalled_at = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let took = signalled_at.elapsed();
    assert!(output.status.success(), "exit status {}", output.status);
    assert!(
        took < Duration::from_secs(10),
        "exited {took:?} after SIGTERM (grace 10 s)"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let report: serde_json::Value = stdout
        .lines()
        .find_map(|l| l.find('{').and_then(|i| serde_json::from_str(&l[i..]).ok()))
        .unwrap_or_else(|| panic!("no report in {stdout:?}"));

    let done: i64 = db.scalar("SELECT COUNT(*) FROM done").await;
    let stats = q.stats().await.unwrap();
    // The in-flight handlers (and possibly a few more claimed just before the signal was seen)
    // finished and were acked; nothing is left in flight; the rest is untouched.
    assert!(done >= 4, "{done} finished");
    assert_eq!(report["acked"].as_i64(), Some(done), "{report}");
    assert_eq!(report["released"].as_i64(), Some(0), "{report}");
    assert_eq!(stats.in_flight, 0, "{stats:?}");
    assert_eq!(stats.ready as i64, 10 - done, "{stats:?}");
    assert!(client.processes().await.unwrap().is_empty(), "deregistered");
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [a_killed_workers_claims_go_to_the_survivor_before_their_leases_expire, sigterm_lets_in_flight_handlers_finish_and_strands_nothing],
    sync: [child_worker]
);
