//! What waiting long polls cost the server: one probe per tick for all of a client's waiters,
//! whatever their number. Counted with the server's own per-session `Questions` counters on
//! every connection of the waiting client's pool (exact even while other tests use the
//! server), never timed.

use std::time::Duration;

use sqlmq::{Client, Message, MySql, QueueConfig};
use sqlmq_testkit::{TestDb, eventually_async};

use crate::questions::{between, statements};

const LEASE: Duration = Duration::from_secs(60);
const QUEUES: usize = 10;
/// Over which statements are counted.
const WINDOW: Duration = Duration::from_secs(3);

/// Statements per second on `client`'s connections over [`WINDOW`], less the readings' own.
async fn rate(client: &Client<MySql>) -> f64 {
    let first = statements(client).await;
    let reading = between(&first, &statements(client).await);
    let before = statements(client).await;
    tokio::time::sleep(WINDOW).await;
    let after = statements(client).await;
    between(&before, &after).saturating_sub(reading) as f64 / WINDOW.as_secs_f64()
}

/// Start `per_queue` long polls on each of the queues and wait until all are seated.
async fn wait_on_all(client: &Client<MySql>, per_queue: usize) -> Vec<tokio::task::JoinHandle<()>> {
    let all = client.long_polls() + QUEUES * per_queue;
    let mut tasks = Vec::new();
    for i in 0..QUEUES {
        let q = client.queue(&format!("q{i}")).await.unwrap();
        for _ in 0..per_queue {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                q.receive_wait(1, LEASE, Duration::from_secs(120))
                    .await
                    .unwrap();
            }));
        }
    }
    eventually_async(
        Duration::from_secs(60),
        "every long poll seated",
        || async { (client.long_polls() == all).then_some(()) },
    )
    .await;
    tasks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_long_polls_cost_what_ten_do_one_probe_per_tick() {
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let client = Client::builder()
        .max_connections(4)
        .open::<MySql>(&db.url)
        .await
        .unwrap();
    // A probe every 100 ms at most: 10/s, whatever the number of waiters (the default 60 ms
    // would be 16.7/s, too close to the bounds below on a loaded machine).
    client.set_probe_interval(Duration::from_millis(10), Duration::from_millis(100));
    for i in 0..QUEUES {
        client
            .create_queue(&format!("q{i}"), QueueConfig::default())
            .await
            .unwrap();
    }
    let few = wait_on_all(&client, 1).await;
    // Let the probe's delay climb to its ceiling first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let with_ten = rate(&client).await;
    let before = statements(&client).await;
    let arrival = std::time::Instant::now();
    let many = wait_on_all(&client, 99).await;
    let (arriving, took) = (
        between(&before, &statements(&client).await),
        arrival.elapsed(),
    );
    // Newcomers behind others do not claim: arriving costs the probes of the time it took
    // (plus the readings), not a claim per poll.
    assert!(
        (arriving as f64) < 20.0 + 15.0 * took.as_secs_f64(),
        "990 long polls arriving in {took:?} cost {arriving} statements"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let with_a_thousand = rate(&client).await;
    assert!(
        with_ten <= 20.0 && with_a_thousand <= 20.0,
        "statements/s: 10 waiters {with_ten:.1}, 1000 waiters {with_a_thousand:.1}"
    );
    assert!(
        with_a_thousand <= with_ten + 3.0,
        "flat in the number of waiters: {with_ten:.1} vs {with_a_thousand:.1}"
    );
    assert!(with_ten > 0.0, "the probe runs while anything waits");
    // Still answered: a send from another client reaches the first waiter of its queue.
    let sender = db.client().await;
    for i in 0..QUEUES {
        let q = sender.queue(&format!("q{i}")).await.unwrap();
        q.send(Message::new("wake")).await.unwrap();
    }
    for task in few {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the oldest waiter of each queue is answered")
            .unwrap();
    }
    // The answered waiters called the next in line, who look, find nothing and sit back down:
    // while one looks it is out of its line, so the count settles rather than holds at once.
    eventually_async(Duration::from_secs(10), "the others still wait", || async {
        (client.long_polls() == QUEUES * 99).then_some(())
    })
    .await;
    for task in &many {
        task.abort();
    }
    eventually_async(Duration::from_secs(10), "seats freed", || async {
        (client.long_polls() == 0).then_some(())
    })
    .await;
    // (That the prober stops with the last seat is the unit test
    // `the_prober_stops_when_the_last_line_empties`; counted here, a loaded CI host once showed
    // 27.7 statements/s on this pool after every seat had left, which the probe, at most 10/s,
    // cannot account for: not yet explained, so not asserted.)
    db.drop().await;
}
