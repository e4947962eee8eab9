//! Batch handlers on the worker: whole claims per call, one transaction committing a batch's
//! effects with its acks, the handler's outcome for every message it did not settle itself,
//! a lost lease failing the whole commit, panics, and leases kept while a batch runs long.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlmq::source::SourceName;
use sqlmq::worker::{BatchContext, WorkerReport};
use sqlmq::{Client, Delivery, Error, Message, Outcome, QueueConfig, Worker};
use sqlmq_testkit::{TestBackend, TestDb, Value, check_invariants, eventually_async};
use tokio_util::sync::CancellationToken;

async fn setup<B: TestBackend>(n: u32) -> (TestDb<B>, Client<B>, sqlmq::Queue<B>) {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let config =
        QueueConfig::default().backoff(sqlmq::queue::Backoff::Ladder(vec![Duration::ZERO]));
    let q = client.create_queue("jobs", config).await.unwrap();
    db.exec("CREATE TABLE effects (n INT NOT NULL)", &[]).await;
    let messages = (0..n).map(|i| Message::new(i.to_string())).collect();
    q.send_batch(messages).await.unwrap();
    (db, client, q)
}

/// A worker running in the background.
struct Running {
    stop: CancellationToken,
    run: tokio::task::JoinHandle<sqlmq::Result<WorkerReport>>,
}

impl Running {
    /// Wait until the queue has nothing pending, then stop the worker: its report.
    async fn report_once_settled<B: TestBackend>(self, q: &sqlmq::Queue<B>) -> WorkerReport {
        eventually_async(Duration::from_secs(30), "every message settled", || async {
            (q.stats().await.unwrap().pending() == 0).then_some(())
        })
        .await;
        self.stop.cancel();
        self.run.await.unwrap().unwrap()
    }
}

/// A worker of the queue `jobs` running `handler` a claim at a time, in the background; claims
/// of up to 8 by one claim loop.
fn spawn<B: TestBackend, H: sqlmq::worker::BatchHandler<B>>(
    client: &Client<B>,
    handler: H,
    tune: impl FnOnce(sqlmq::worker::WorkerBuilder<B>) -> sqlmq::worker::WorkerBuilder<B>,
) -> Running {
    let builder = Worker::builder(client)
        .source_batch(SourceName::queue("jobs"), handler)
        .concurrency(8)
        .max_batch(8)
        .claimers(1)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(20));
    let stop = CancellationToken::new();
    let run = tokio::spawn(tune(builder).run(stop.clone()));
    Running { stop, run }
}

fn number(d: &Delivery) -> i64 {
    std::str::from_utf8(&d.body).unwrap().parse().unwrap()
}

/// Write one effect row per delivery in the batch transaction.
async fn write_effects<B: TestBackend>(
    tx: &mut sqlmq::worker::JobTransaction<B>,
    batch: &[Delivery],
) {
    for d in batch {
        B::execute(
            &mut **tx,
            "INSERT INTO effects VALUES (?)",
            &[Value::from(number(d))],
        )
        .await;
    }
}

/// The effect rows, sorted.
async fn effects<B: TestBackend>(db: &TestDb<B>) -> Vec<i64> {
    let mut rows: Vec<i64> = db
        .query("SELECT n FROM effects", &[])
        .await
        .iter()
        .map(|row| row[0].int())
        .collect();
    rows.sort_unstable();
    rows
}

pub(crate) async fn a_batch_handler_commits_a_whole_claims_effects_with_its_acks<B: TestBackend>() {
    const N: u32 = 40;
    let (db, client, q) = setup::<B>(N).await;
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&sizes);
    let handler = move |batch: Vec<Delivery>, ctx: BatchContext<B>| {
        let s = Arc::clone(&s);
        async move {
            assert_eq!(batch.len(), ctx.jobs().len());
            for (d, job) in batch.iter().zip(ctx.jobs()) {
                assert_eq!((d.id, d.attempt), (job.id(), job.attempt()));
            }
            s.lock().unwrap().push(batch.len());
            let mut tx = ctx.begin().await?;
            write_effects(&mut tx, &batch).await;
            tx.commit().await?;
            Ok::<_, Error>(Outcome::Done)
        }
    };
    let report = spawn(&client, handler, |b| b).report_once_settled(&q).await;
    assert_eq!(report.acked, N as u64, "{report:?}");
    assert_eq!(effects(&db).await, (0..N as i64).collect::<Vec<_>>());
    let sizes = sizes.lock().unwrap().clone();
    assert_eq!(sizes.iter().sum::<usize>(), N as usize);
    assert!(sizes.iter().all(|&n| (1..=8).contains(&n)), "{sizes:?}");
    assert!(
        sizes.len() < N as usize,
        "claims were handed over whole, not one by one: {sizes:?}"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_batch_outcome_settles_each_message_the_handler_left<B: TestBackend>() {
    const N: u32 = 12;
    let (db, client, q) = setup::<B>(N).await;
    // On a first attempt, the handler settles the batch's first message itself (its own job
    // transaction), then fails: the others are retried, that one stays acked.
    let (own, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (o, f) = (Arc::clone(&own), Arc::clone(&failed));
    let handler = move |batch: Vec<Delivery>, ctx: BatchContext<B>| {
        let (o, f) = (Arc::clone(&o), Arc::clone(&f));
        async move {
            if batch.iter().any(|d| d.attempt > 1) {
                return Ok(Outcome::Done);
            }
            let mut tx = ctx.jobs()[0].begin().await.map_err(|e| e.to_string())?;
            write_effects(&mut tx, &batch[..1]).await;
            tx.commit().await.map_err(|e| e.to_string())?;
            o.fetch_add(1, Ordering::Relaxed);
            f.fetch_add(batch.len() - 1, Ordering::Relaxed);
            Err::<Outcome, _>("the rest of the batch failed".to_owned())
        }
    };
    let report = spawn(&client, handler, |b| b).report_once_settled(&q).await;
    let own = own.load(Ordering::Relaxed) as u64;
    assert!(own >= 1);
    assert_eq!(report.acked, N as u64, "{report:?}");
    let failed = failed.load(Ordering::Relaxed) as u64;
    assert!(failed >= 1);
    assert_eq!(report.retried, failed, "{report:?}");
    assert_eq!(
        effects(&db).await.len() as u64,
        own,
        "one effect per message settled by its own transaction"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_batch_with_a_lost_lease_commits_nothing<B: TestBackend>() {
    const N: u32 = 8;
    let (db, client, q) = setup::<B>(N).await;
    let commit_errors = Arc::new(Mutex::new(Vec::new()));
    let (e, queue) = (Arc::clone(&commit_errors), q.clone());
    let handler = move |batch: Vec<Delivery>, ctx: BatchContext<B>| {
        let (e, queue) = (Arc::clone(&e), queue.clone());
        async move {
            if batch.iter().any(|d| d.attempt > 1) || batch.len() < 2 {
                return Ok(Outcome::Done);
            }
            // Another hand takes the last message back: its lease is gone.
            let last = batch.last().unwrap().receipt();
            queue
                .nack(last, Some(Duration::ZERO), "taken back")
                .await
                .unwrap();
            let mut tx = ctx.begin().await?;
            write_effects(&mut tx, &batch).await;
            let committed = tx.commit().await;
            e.lock().unwrap().push(format!("{committed:?}"));
            committed.map(|()| Outcome::Done)
        }
    };
    let report = spawn(&client, handler, |b| b).report_once_settled(&q).await;
    let errors = commit_errors.lock().unwrap().clone();
    assert!(!errors.is_empty(), "a batch of several was claimed");
    assert!(
        errors.iter().all(|e| e.starts_with("Err(LeaseLost")),
        "{errors:?}"
    );
    assert!(
        effects(&db).await.is_empty(),
        "no batch whose lease was lost wrote anything"
    );
    assert_eq!(report.acked, N as u64, "{report:?}");
    assert_eq!(
        report.lease_lost,
        errors.len() as u64,
        "the taken message of each failed batch: {report:?}"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_panicking_batch_handler_retries_its_batch<B: TestBackend>() {
    const N: u32 = 6;
    let (db, client, q) = setup::<B>(N).await;
    let handler = move |batch: Vec<Delivery>, _ctx: BatchContext<B>| async move {
        if batch[0].attempt == 1 {
            panic!("batch of {} exploded", batch.len());
        }
        Ok::<_, String>(Outcome::Done)
    };
    let report = spawn(&client, handler, |b| b).report_once_settled(&q).await;
    assert_eq!(
        (report.acked, report.retried),
        (N as u64, N as u64),
        "{report:?}"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_batch_handler_longer_than_its_lease_keeps_every_message<B: TestBackend>() {
    const N: u32 = 5;
    let (db, client, q) = setup::<B>(N).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let handler = move |batch: Vec<Delivery>, _ctx: BatchContext<B>| {
        let c = Arc::clone(&c);
        async move {
            c.fetch_add(batch.len(), Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(3500)).await;
            Ok::<_, String>(Outcome::Done)
        }
    };
    let lease = Duration::from_secs(1);
    let worker = spawn(&client, handler, |b| b.lease(lease));
    // Another consumer, after the first lease would have ended several times over.
    let other = Client::<B>::open(&db.url).await.unwrap();
    let theirs = other.queue("jobs").await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let stolen = theirs.receive(N as usize, lease).await.unwrap();
    assert!(
        stolen.is_empty(),
        "the batch's leases were extended: {stolen:?}"
    );
    let report = worker.report_once_settled(&q).await;
    assert_eq!(
        calls.load(Ordering::Relaxed),
        N as usize,
        "each message handled once"
    );
    assert_eq!(
        (report.acked, report.lease_lost),
        (N as u64, 0),
        "{report:?}"
    );
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [a_batch_handler_commits_a_whole_claims_effects_with_its_acks, a_batch_outcome_settles_each_message_the_handler_left, a_batch_with_a_lost_lease_commits_nothing, a_panicking_batch_handler_retries_its_batch, a_batch_handler_longer_than_its_lease_keeps_every_message]
);
