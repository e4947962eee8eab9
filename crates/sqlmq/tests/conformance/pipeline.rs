//! Exactly-once pipelines: a worker consumes topic `in` through a cluster group and, in the
//! job transaction that acks each input, publishes its result to topic `out` — one input per
//! transaction, or a batch handler's whole claim per transaction. The pipeline process (this
//! test binary run again as a child) is killed with `kill -9` at random moments and restarted;
//! at the end `out` holds each input's result exactly once.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rand::RngExt;
use sqlmq::source::SourceName;
use sqlmq::topic::StartAt;
use sqlmq::worker::{BatchContext, JobTransaction};
use sqlmq::{Client, Delivery, GroupConfig, JobContext, Outcome, Record, TopicConfig, Worker};
use sqlmq_testkit::{TestBackend, TestDb, child_test, eventually_async};
use tokio_util::sync::CancellationToken;

/// Inputs published.
const INPUTS: usize = 1500;
/// Times the pipeline is killed mid-run.
const KILLS: usize = 5;

/// Set in the child's environment when it runs the batch handler.
const BATCH: &str = "SQLMQ_CHILD_PIPELINE_BATCH";

/// The child's side: `SQLMQ_CHILD_PIPELINE=<database>`: run the pipeline until killed (with a
/// batch handler when `SQLMQ_CHILD_PIPELINE_BATCH` is set).
pub(crate) fn child_pipeline<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_PIPELINE") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = Client::<B>::open(&B::url_of(&database)).await.unwrap();
        let out = client.topic("out").await.unwrap();
        let builder = Worker::builder(&client)
            .concurrency(4)
            .heartbeat_interval(Duration::from_millis(200))
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50));
        let builder = if std::env::var_os(BATCH).is_some() {
            let name = SourceName::group("in", "enrich");
            builder.source_batch(name, move |batch: Vec<Delivery>, ctx: BatchContext<B>| {
                let out = out.clone();
                async move {
                    let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
                    let records = batch
                        .into_iter()
                        .map(|d| {
                            let body = String::from_utf8(d.body).unwrap();
                            Record::new(format!("{body}!")).key(body)
                        })
                        .collect();
                    out.publish_batch_in(&mut tx, records)
                        .await
                        .map_err(|e| e.to_string())?;
                    commit_after_a_pause(tx).await
                }
            })
        } else {
            builder.topic_group_raw("in", "enrich", move |d: Delivery, ctx: JobContext<B>| {
                let out = out.clone();
                async move {
                    let body = String::from_utf8(d.body).unwrap();
                    let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
                    tx.publish(&out, Record::new(format!("{body}!")).key(body))
                        .await
                        .map_err(|e| e.to_string())?;
                    commit_after_a_pause(tx).await
                }
            })
        };
        builder.run(CancellationToken::new()).await.unwrap();
    });
}

/// Commit a job transaction after a few milliseconds: this widens the window between the
/// outputs' write and the commit, where a kill must leave neither the outputs nor the acks.
async fn commit_after_a_pause<B: TestBackend>(tx: JobTransaction<B>) -> Result<Outcome, String> {
    let pause = rand::rng().random_range(1..8);
    tokio::time::sleep(Duration::from_millis(pause)).await;
    tx.commit().await.map_err(|e| e.to_string())?;
    Ok(Outcome::Done)
}

fn spawn_pipeline<B: TestBackend>(db: &TestDb<B>, batch: bool) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", &child_test::<B>("pipeline", "child_pipeline")])
        .args(["--nocapture", "--test-threads=1"])
        .env("SQLMQ_CHILD_PIPELINE", &db.name)
        .stdout(Stdio::null());
    if batch {
        child.env(BATCH, "1");
    }
    child.spawn().unwrap()
}

pub(crate) async fn a_pipeline_killed_at_random_moments_leaves_one_result_per_input<
    B: TestBackend,
>() {
    killed_pipeline::<B>(false).await;
}

pub(crate) async fn a_batch_pipeline_killed_at_random_moments_leaves_one_result_per_input<
    B: TestBackend,
>() {
    killed_pipeline::<B>(true).await;
}

/// Run the pipeline (a batch handler's when `batch`), killing it [`KILLS`] times, then check
/// the results.
async fn killed_pipeline<B: TestBackend>(batch: bool) {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let input = client
        .create_topic("in", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let out = client
        .create_topic("out", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let group = input
        .create_group("enrich", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let check = out
        .create_group("check", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    let records = (0..INPUTS).map(|i| Record::new(format!("{i}"))).collect();
    input.publish_batch(records).await.unwrap();

    // Each run is killed at a random moment once it has made some progress, while inputs
    // remain (else the kill would prove nothing).
    let mut left = INPUTS as u64;
    for kill in 0..KILLS {
        let mut child = spawn_pipeline(&db, batch);
        let before = left;
        eventually_async(
            Duration::from_secs(60),
            "the pipeline makes progress",
            || async {
                let now = group.lag().await.unwrap().unconsumed;
                (now + 30 <= before).then_some(())
            },
        )
        .await;
        let after = rand::rng().random_range(0..100);
        tokio::time::sleep(Duration::from_millis(after)).await;
        child.kill().unwrap();
        child.wait().unwrap();
        left = group.lag().await.unwrap().unconsumed;
        assert!(
            left > 0,
            "kill {kill} came after the last input: make the run longer"
        );
    }
    // The last run finishes the inputs.
    let mut child = spawn_pipeline(&db, batch);
    eventually_async(
        Duration::from_secs(60),
        "the pipeline consumes every input",
        || async { (group.lag().await.unwrap().unconsumed == 0).then_some(()) },
    )
    .await;
    child.kill().unwrap();
    child.wait().unwrap();

    out.sequence().await.unwrap();
    let mut reader = check.reader("checker").await.unwrap();
    let mut results: BTreeMap<String, usize> = BTreeMap::new();
    loop {
        let batch = reader.poll(1000).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for r in batch {
            *results
                .entry(String::from_utf8(r.body).unwrap())
                .or_default() += 1;
        }
    }
    let repeated: Vec<_> = results.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated.is_empty(), "results published twice: {repeated:?}");
    let expect: Vec<String> = {
        let mut e: Vec<String> = (0..INPUTS).map(|i| format!("{i}!")).collect();
        e.sort();
        e
    };
    assert_eq!(
        results.keys().cloned().collect::<Vec<_>>(),
        expect,
        "one result per input"
    );
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [a_pipeline_killed_at_random_moments_leaves_one_result_per_input, a_batch_pipeline_killed_at_random_moments_leaves_one_result_per_input],
    sync: [child_pipeline]
);
