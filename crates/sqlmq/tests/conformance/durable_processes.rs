//! Durable runs across real worker processes killed with `kill -9` at random moments: a
//! five-step workflow (each step a `step_in` writing its business row, a durable sleep after
//! the second, resumed on whichever process claims it) run by three processes, one of them
//! killed and restarted every third of a second or so. Every step's row is written exactly
//! once, so no completed step ran again after a crash; some runs resumed their sleep on another
//! process; every run finishes; nothing is left in flight, dead, or journaled.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::RngExt;
use sqlmq::{Client, Delivery, JobContext, Message, Outcome, QueueConfig, Worker};
use sqlmq_testkit::{TestBackend, TestDb, Value, check_invariants, child_test, eventually_async};
use tokio_util::sync::CancellationToken;

const RUNS: usize = 200;
const STEPS: i64 = 5;

/// The child's side: `SQLMQ_CHILD_DURABLE=<database>`: a worker running the workflow until
/// killed.
pub(crate) fn child_durable_worker<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_DURABLE") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = Client::<B>::open(&B::url_of(&database)).await.unwrap();
        Worker::builder(&client)
            .lease(Duration::from_secs(60))
            .heartbeat_interval(Duration::from_millis(200))
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .concurrency(4)
            .queue_raw("flows", |d: Delivery, ctx: JobContext<B>| async move {
                let run = d.id.to_string();
                for step in 1..=STEPS {
                    let run = run.clone();
                    let pause = rand::rng().random_range(10..50);
                    ctx.step_in(&format!("s{step}"), |conn| {
                        Box::pin(async move {
                            B::execute(
                                conn,
                                "INSERT INTO effects (run, step, pid) VALUES (?, ?, ?)",
                                &[
                                    Value::from(run),
                                    Value::from(step),
                                    Value::from(std::process::id()),
                                ],
                            )
                            .await;
                            // Widen the window a kill can land in.
                            tokio::time::sleep(Duration::from_millis(pause)).await;
                            Ok::<_, std::io::Error>(step)
                        })
                    })
                    .await?;
                    if step == 2 {
                        ctx.sleep(Duration::from_millis(500)).await?;
                    }
                }
                Ok::<_, sqlmq::Error>(Outcome::Done)
            })
            .run(CancellationToken::new())
            .await
            .unwrap();
    });
}

fn spawn_child<B: TestBackend>(db: &TestDb<B>) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test::<B>("durable_processes", "child_durable_worker"),
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_DURABLE", &db.name)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

pub(crate) async fn every_step_once_across_kill_9_and_every_run_finishes<B: TestBackend>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    db.exec(
        "CREATE TABLE effects (run VARCHAR(36) NOT NULL, step INT NOT NULL, pid INT NOT NULL)",
        &[],
    )
    .await;
    let q = client
        .create_queue("flows", QueueConfig::default().max_attempts(10_000))
        .await
        .unwrap();
    let messages: Vec<Message> = (0..RUNS).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(messages).await.unwrap();

    let mut children: Vec<Child> = (0..3).map(|_| spawn_child(&db)).collect();
    let started = Instant::now();
    let mut kills = 0;
    let all = RUNS as i64 * STEPS;
    while db.scalar("SELECT COUNT(*) FROM effects").await < all
        && started.elapsed() < Duration::from_secs(240)
    {
        let wait = rand::rng().random_range(150..500);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        if kills < 15 {
            let victim = rand::rng().random_range(0..children.len());
            children[victim].kill().unwrap(); // SIGKILL
            children[victim].wait().unwrap();
            children[victim] = spawn_child(&db);
            kills += 1;
        }
    }
    eventually_async(Duration::from_secs(120), "every run acked", || async {
        let s = q.stats().await.unwrap();
        (s.ready + s.scheduled + s.in_flight + s.dead == 0).then_some(())
    })
    .await;
    for child in &mut children {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert!(
        kills >= 5,
        "only {kills} kills landed before the runs finished"
    );
    let twice = db
        .query(
            "SELECT run, step, COUNT(*) FROM effects GROUP BY run, step HAVING COUNT(*) > 1",
            &[],
        )
        .await;
    assert!(twice.is_empty(), "steps that ran twice: {twice:?}");
    let per_run = db
        .query(
            "SELECT run, COUNT(*) FROM effects GROUP BY run HAVING COUNT(*) <> ?",
            &[Value::from(STEPS)],
        )
        .await;
    assert!(
        per_run.is_empty(),
        "runs without their five steps: {per_run:?}"
    );
    assert_eq!(
        db.scalar("SELECT COUNT(DISTINCT run) FROM effects").await,
        RUNS as i64
    );
    // Runs slept after their second step and resumed wherever the queue handed them out: on
    // another process for some of them.
    let moved = db
        .scalar(
            "SELECT COUNT(*) FROM effects a JOIN effects b ON b.run = a.run \
             WHERE a.step = 2 AND b.step = 3 AND a.pid <> b.pid",
        )
        .await;
    assert!(moved > 0, "no run resumed its sleep on another process");
    // Every run's ack forgot its journal.
    assert_eq!(db.count("run_steps").await, 0);
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [every_step_once_across_kill_9_and_every_run_finishes],
    sync: [child_durable_worker]
);
