//! The at-least-once and exclusive-lease guarantees: competing consumers — 8 tasks in this process and 3 more processes — drain
//! 20 000 messages; with leases long enough never to expire, every message must be delivered
//! exactly once: no duplicates, no losses.
//!
//! The other processes are this test binary run again with `SQLMQ_CHILD_CONSUMER` set: the
//! `child_consumer` test is a no-op unless that variable names a database to drain.

use std::collections::HashSet;
use std::time::Duration;

use sqlmq::{Client, Message, MessageId, QueueConfig};
use sqlmq_testkit::{TestBackend, TestDb, Value, child_test, eventually_async};

const MESSAGES: usize = 20_000;
const TASKS: usize = 8;
const PROCESSES: usize = 3;
const LEASE: Duration = Duration::from_secs(120);

/// Receive and ack until the queue stays empty, recording every delivery in `deliveries`
/// (no unique key: duplicates would show up as extra rows).
async fn drain<B: TestBackend>(client: Client<B>, who: String) -> usize {
    let q = client.queue("work").await.unwrap();
    let mut handled = 0;
    let mut empty_polls = 0;
    while empty_polls < 50 {
        let batch = q.receive(16, LEASE).await.unwrap();
        if batch.is_empty() {
            empty_polls += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        empty_polls = 0;
        let mut insert = String::from("INSERT INTO deliveries (id, consumer) VALUES ");
        insert.push_str(&vec!["(?, ?)"; batch.len()].join(","));
        let args: Vec<Value> = batch
            .iter()
            .flat_map(|d| [Value::from(d.id.to_string()), Value::from(who.as_str())])
            .collect();
        {
            // Released before the ack: on SQLite the pool is the process's one writer
            // connection, which the ack needs.
            let mut conn = client.pool().acquire().await.unwrap();
            B::execute(&mut conn, &insert, &args).await;
        }
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        let report = q.ack_batch(&receipts).await.unwrap();
        assert!(
            report.lost.is_empty(),
            "no lease can be lost with a {LEASE:?} lease"
        );
        handled += batch.len();
    }
    handled
}

pub(crate) fn child_consumer<B: TestBackend>() {
    let Ok(database) = std::env::var("SQLMQ_CHILD_CONSUMER") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = Client::<B>::open(&B::url_of(&database)).await.unwrap();
        let n = drain(client, format!("process-{}", std::process::id())).await;
        eprintln!("child {} handled {n}", std::process::id());
    });
}

pub(crate) async fn eight_tasks_and_three_processes_drain_20_000_without_duplicates_or_losses<
    B: TestBackend,
>() {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    let q = client
        .create_queue("work", QueueConfig::default())
        .await
        .unwrap();
    db.exec(
        "CREATE TABLE deliveries (id CHAR(36) NOT NULL, consumer VARCHAR(64) NOT NULL)",
        &[],
    )
    .await;
    db.exec("CREATE INDEX deliveries_id ON deliveries (id)", &[])
        .await;
    let batch: Vec<Message> = (0..MESSAGES)
        .map(|i| Message::new(format!("{i}")))
        .collect();
    let sent: HashSet<MessageId> = q
        .send_batch(batch)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();

    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    &child_test::<B>("competing_consumers", "child_consumer"),
                ])
                .arg("--nocapture")
                .env("SQLMQ_CHILD_CONSUMER", &db.name)
                .spawn()
                .unwrap()
        })
        .collect();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| tokio::spawn(drain(client.clone(), format!("task-{i}"))))
        .collect();
    let mut in_process = 0;
    for t in tasks {
        in_process += t.await.unwrap();
    }
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait().unwrap())
            .await
            .unwrap();
        assert!(status.success(), "child consumer failed: {status}");
    }

    let rows = db
        .query(
            "SELECT id, COUNT(*) AS n, COUNT(DISTINCT consumer) FROM deliveries GROUP BY id",
            &[],
        )
        .await;
    let duplicates: Vec<String> = rows
        .iter()
        .filter(|r| r[1].int() > 1)
        .map(|r| r[0].text())
        .collect();
    assert!(
        duplicates.is_empty(),
        "{} messages delivered twice, e.g. {:?}",
        duplicates.len(),
        &duplicates[..duplicates.len().min(3)]
    );
    let delivered: HashSet<MessageId> = rows.iter().map(|r| r[0].text().parse().unwrap()).collect();
    assert_eq!(delivered, sent, "every sent message delivered (no losses)");
    let consumers: i64 = db
        .scalar("SELECT COUNT(DISTINCT consumer) FROM deliveries")
        .await;
    assert!(
        in_process > 0 && in_process < MESSAGES,
        "the processes took a share ({in_process} handled here)"
    );
    assert!(
        consumers > TASKS as i64,
        "processes took part: {consumers} consumers delivered"
    );
    eventually_async(Duration::from_secs(5), "empty queue", || async {
        (db.count("messages").await == 0).then_some(())
    })
    .await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [eight_tasks_and_three_processes_drain_20_000_without_duplicates_or_losses],
    sync: [child_consumer]
);
