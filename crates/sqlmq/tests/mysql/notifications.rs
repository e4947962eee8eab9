//! Notifications from the binary log, on a private `mariadbd` started with `--log-bin
//! --binlog-format=ROW`: a send through another client wakes a waiting long poll and an idle
//! worker whose probes are far too slow to find it in time, a delayed message when it comes
//! due, a cancel of a running message its handler; across a log rotation, a follower
//! killed on the server, and the server killed and restarted under it. An idle worker costs at
//! most one statement a second, counted by the server. Without the binary log, or without the
//! grant, notifications say why they are off and waiting still works.

use std::time::Duration;

use sqlmq::client::NotificationStatus;
use sqlmq::worker::CancellationToken;
use sqlmq::{Client, Message, MySql, QueueConfig, Worker};
use sqlmq_testkit::{PrivateServer, Recorder, TestDb, eventually_async};

use crate::questions::{between, statements};

const LEASE: Duration = Duration::from_secs(30);
/// Far longer than any wait below: only a notification answers in time.
const SLOW_PROBE: Duration = Duration::from_secs(60);
const BINLOG: [&str; 3] = ["--log-bin=binlog", "--binlog-format=ROW", "--server-id=1"];

/// A private server writing a row-format binary log, with database `app` migrated.
async fn binlog_server() -> PrivateServer {
    let mut server = PrivateServer::install();
    let options: Vec<String> = BINLOG.iter().map(|o| (*o).to_owned()).collect();
    server.start_with(&[&options[..], &["--skip-grant-tables".to_owned()]].concat());
    server.wait_ready().await;
    PrivateServer::create_database(&server.url("mysql"), "app").await;
    let admin = Client::<MySql>::open(&server.url("app")).await.unwrap();
    admin.migrate().await.unwrap();
    admin
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    server
}

/// A client whose own probes are too slow to matter.
async fn slow_client(url: &str) -> Client<MySql> {
    let client = Client::<MySql>::open(url).await.unwrap();
    client.set_probe_interval(SLOW_PROBE, SLOW_PROBE);
    client
}

async fn live(client: &Client<MySql>) {
    eventually_async(Duration::from_secs(30), "notifications live", || async {
        client.notifications().is_live().then_some(())
    })
    .await;
}

/// `waiting` long-polls `q`; once the poll is seated `meanwhile` runs, then `sender` sends
/// `body`, due after `delay`; the poll must be answered with it long before any probe would
/// run. Returns the time from the send to the answer.
async fn answered(
    waiting: &Client<MySql>,
    sender: &Client<MySql>,
    (body, delay): (&str, Duration),
    meanwhile: impl std::future::Future<Output = ()>,
) -> Duration {
    let message = Message::new(body.to_owned()).delay(delay);
    let q = waiting.queue("q").await.unwrap();
    let poll = tokio::spawn(async move { q.receive_wait(1, LEASE, Duration::from_secs(50)).await });
    eventually_async(Duration::from_secs(10), "seated", || async {
        (waiting.long_polls() == 1).then_some(())
    })
    .await;
    meanwhile.await;
    let sent = std::time::Instant::now();
    sender
        .queue("q")
        .await
        .unwrap()
        .send(message)
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(30), poll)
        .await
        .unwrap_or_else(|_| panic!("{body}: not answered"))
        .unwrap()
        .unwrap();
    let took = sent.elapsed();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, body.as_bytes());
    waiting
        .queue("q")
        .await
        .unwrap()
        .ack(got[0].receipt())
        .await
        .unwrap();
    took
}

/// A plain send wakes the poll.
async fn a_send_wakes_the_long_poll(waiting: &Client<MySql>, sender: &Client<MySql>, body: &str) {
    answered(waiting, sender, (body, Duration::ZERO), async {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_log_wakes_long_polls_across_rotation_a_killed_follower_and_a_restart() {
    let mut server = binlog_server().await;
    let url = server.url("app");
    let waiting = slow_client(&url).await;
    let sender = Client::builder()
        .notifications(false)
        .open::<MySql>(&url)
        .await
        .unwrap();
    assert!(matches!(
        sender.notifications(),
        NotificationStatus::Disabled(_)
    ));
    assert_eq!(waiting.notifications(), NotificationStatus::NotStarted);
    // The first waiter starts the follower.
    let q = waiting.queue("q").await.unwrap();
    let first = tokio::spawn(async move { q.receive_wait(1, LEASE, Duration::from_secs(1)).await });
    live(&waiting).await;
    first.await.unwrap().unwrap();
    for i in 0..5 {
        a_send_wakes_the_long_poll(&waiting, &sender, &format!("plain {i}")).await;
    }

    // A delayed message: the follower reads when it comes due, and the poll is answered then,
    // not at the 60 s probe.
    let delayed = ("delayed", Duration::from_secs(2));
    let took = answered(&waiting, &sender, delayed, async {}).await;
    assert!(
        took >= Duration::from_millis(1900),
        "not before its time: {took:?}"
    );

    // A rotation: the stream carries on in the next file.
    server.admin("FLUSH BINARY LOGS").await;
    a_send_wakes_the_long_poll(&waiting, &sender, "after rotation").await;

    // The follower's connection killed on the server while a poll waits, and a message sent
    // while nobody follows the log (the follower behind by everything committed meanwhile):
    // it reconnects by itself, and once live again has the probers look for what it missed,
    // so the message is answered although the probes are a minute apart and the log's event
    // for it was never read.
    let kill = async {
        server
            .admin(
                "BEGIN NOT ATOMIC FOR t IN (SELECT id FROM information_schema.PROCESSLIST \
                 WHERE COMMAND = 'Binlog Dump') DO KILL CONNECTION t.id; END FOR; END",
            )
            .await;
        eventually_async(Duration::from_secs(10), "the loss seen", || async {
            (!waiting.notifications().is_live()).then_some(())
        })
        .await;
    };
    answered(
        &waiting,
        &sender,
        ("while nobody followed", Duration::ZERO),
        kill,
    )
    .await;
    // Live again — eventually: once in CI, under the whole suite's load, the status read
    // "reconnecting" just after the answer (the follower lost again right after it had gone
    // live, or the answer found another way); the next step checks the follower wakes polls.
    eventually_async(Duration::from_secs(10), "live again", || async {
        waiting.notifications().is_live().then_some(())
    })
    .await;
    a_send_wakes_the_long_poll(&waiting, &sender, "after a kill").await;

    // The server killed and restarted under the follower.
    server.kill9();
    server.start_with(
        &[
            &BINLOG.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>()[..],
            &["--skip-grant-tables".to_owned()],
        ]
        .concat(),
    );
    server.wait_ready().await;
    eventually_async(Duration::from_secs(60), "live again", || async {
        let status = waiting.notifications();
        // Live before the kill was noticed would not count: the stream must have been lost.
        status.is_live().then_some(())
    })
    .await;
    a_send_wakes_the_long_poll(&waiting, &sender, "after a restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_costs_at_most_one_statement_a_second_and_wakes_on_a_send() {
    let server = binlog_server().await;
    let url = server.url("app");
    let admin = Client::<MySql>::open(&url).await.unwrap();
    for name in ["q2", "q3"] {
        admin
            .create_queue(name, QueueConfig::default())
            .await
            .unwrap();
    }
    let client = Client::builder()
        .max_connections(4)
        .open::<MySql>(&url)
        .await
        .unwrap();
    let handled = Recorder::default();
    let stop = CancellationToken::new();
    let mut builder = Worker::builder(&client);
    for name in ["q", "q2", "q3"] {
        let recorder = handled.clone();
        builder = builder.queue_raw(
            name,
            move |d: sqlmq::Delivery, _ctx: sqlmq::JobContext<MySql>| {
                recorder.0.lock().unwrap().push(d.id);
                std::future::ready(Ok::<_, String>(sqlmq::Outcome::Done))
            },
        );
    }
    let worker = tokio::spawn(builder.run(stop.clone()));
    live(&client).await;
    // Settled: the prober's delay has climbed to its 3 s ceiling (10 ms doubling: 6 s), and
    // the pool's connections have prepared the heartbeat's statements.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let first = statements(&client).await;
    let reading = between(&first, &statements(&client).await);
    let before = statements(&client).await;
    // Long enough to average out the jitter of heartbeats (5 s ± 10 %) and probes (3 s ± 20 %):
    // about 24 statements are expected (0.8/s), 30 would fail.
    let window = Duration::from_secs(30);
    tokio::time::sleep(window).await;
    let counted = between(&before, &statements(&client).await).saturating_sub(reading);
    let rate = counted as f64 / window.as_secs_f64();
    eprintln!("an idle worker on three queues, notifications live: {rate:.2} statements/s");
    // Connections: the pool, and one replication connection beside it (the sending client
    // `admin` waits for nothing, so it follows nothing).
    let (dumps,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'",
    )
    .fetch_one(admin.pool())
    .await
    .unwrap();
    assert_eq!(
        dumps, 1,
        "one replication connection for the waiting process"
    );
    assert!(client.pool().size() <= 4);
    assert!(rate <= 1.0, "an idle worker ran {rate:.2} statements/s");
    // Still woken by a send from another client, in far less than the probe's 2 s.
    for name in ["q", "q2", "q3"] {
        admin
            .queue(name)
            .await
            .unwrap()
            .send(Message::new(name))
            .await
            .unwrap();
    }
    eventually_async(Duration::from_secs(10), "all three handled", || async {
        (handled.count() == 3).then_some(())
    })
    .await;
    stop.cancel();
    worker.await.unwrap().unwrap();
}

/// A cancel from another client reaches the running handler through the binary log: while
/// notifications are live the worker reads cancels only every 3 s on its own, and each of three
/// cancels reaches its handler in well under a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_from_another_client_reaches_the_running_handler_through_the_log() {
    let server = binlog_server().await;
    let url = server.url("app");
    let admin = Client::<MySql>::open(&url).await.unwrap();
    let q = admin.queue("q").await.unwrap();
    let client = Client::<MySql>::open(&url).await.unwrap();
    let started = Recorder::default();
    let fired = Recorder::default();
    let stop = CancellationToken::new();
    let (s, f) = (started.clone(), fired.clone());
    let worker = tokio::spawn(
        Worker::builder(&client)
            .queue_raw(
                "q",
                move |d: sqlmq::Delivery, ctx: sqlmq::JobContext<MySql>| {
                    let (started, fired) = (s.clone(), f.clone());
                    async move {
                        started.0.lock().unwrap().push(d.id);
                        // Runs until cancelled (at most a minute).
                        tokio::select! {
                            () = ctx.cancelled() => fired.0.lock().unwrap().push(d.id),
                            () = tokio::time::sleep(Duration::from_secs(60)) => {}
                        }
                        Ok::<_, String>(sqlmq::Outcome::Done)
                    }
                },
            )
            .concurrency(1)
            .run(stop.clone()),
    );
    live(&client).await;
    let mut took = Vec::new();
    for i in 0..3 {
        let id = q.send(Message::new(format!("{i}"))).await.unwrap().id;
        eventually_async(Duration::from_secs(30), "the handler running", || async {
            started.0.lock().unwrap().contains(&id).then_some(())
        })
        .await;
        // Past the handler's first poll: its token is registered with the watcher.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let cancelled = std::time::Instant::now();
        assert_eq!(
            q.cancel(id).await.unwrap(),
            sqlmq::queue::Cancelled::Running
        );
        eventually_async(Duration::from_secs(30), "the token fired", || async {
            fired.0.lock().unwrap().contains(&id).then_some(())
        })
        .await;
        took.push(cancelled.elapsed());
        eventually_async(Duration::from_secs(30), "the message gone", || async {
            q.message(id).await.unwrap().is_none().then_some(())
        })
        .await;
    }
    eprintln!("cancel to token through the binary log: {took:?}");
    for t in &took {
        assert!(*t < Duration::from_secs(1), "a cancel took {t:?}: {took:?}");
    }
    stop.cancel();
    let report = worker.await.unwrap().unwrap();
    assert_eq!(report.cancelled, 3, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_binary_log_notifications_say_why_and_long_polls_still_work() {
    // The shared server runs without a binary log.
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let client = db.client().await;
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let waiter = {
        let q = q.clone();
        tokio::spawn(async move { q.receive_wait(1, LEASE, Duration::from_secs(30)).await })
    };
    let status = eventually_async(Duration::from_secs(30), "a reason", || async {
        match client.notifications() {
            NotificationStatus::Off(why) => Some(why),
            _ => None,
        }
    })
    .await;
    assert!(
        status.contains("binary log") || status.contains("binlog"),
        "{status}"
    );
    db.client()
        .await
        .queue("q")
        .await
        .unwrap()
        .send(Message::new("polled"))
        .await
        .unwrap();
    let got = waiter.await.unwrap().unwrap();
    assert_eq!(got.len(), 1);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_the_replication_grant_is_told_which_grant_is_missing() {
    let mut server = PrivateServer::install();
    let options: Vec<String> = BINLOG.iter().map(|o| (*o).to_owned()).collect();
    server.start_with(&options);
    server.wait_ready().await;
    PrivateServer::create_database(&server.url("mysql"), "app").await;
    server
        .admin("CREATE USER 'app'@'%' IDENTIFIED BY 'pw'")
        .await;
    server.admin("GRANT ALL ON app.* TO 'app'@'%'").await;
    let url = format!("mysql://app:pw@127.0.0.1:{}/app", server.port());
    let client = Client::<MySql>::open(&url).await.unwrap();
    client.migrate().await.unwrap();
    let q = client
        .create_queue("q", QueueConfig::default())
        .await
        .unwrap();
    let waiter =
        tokio::spawn(async move { q.receive_wait(1, LEASE, Duration::from_secs(2)).await });
    let why = eventually_async(Duration::from_secs(30), "a reason", || async {
        match client.notifications() {
            NotificationStatus::Off(why) => Some(why),
            _ => None,
        }
    })
    .await;
    assert!(why.contains("GRANT REPLICATION SLAVE"), "{why}");
    waiter.await.unwrap().unwrap();
    // With the grant `sqlmq grants --notifications` prints, the same user follows the log.
    for grant in client
        .grants(sqlmq::admin::GrantRole::Notifications, "app", "%")
        .await
        .unwrap()
    {
        server.admin(&grant).await;
    }
    let again = Client::<MySql>::open(&url).await.unwrap();
    let q = again.queue("q").await.unwrap();
    let waiter =
        tokio::spawn(async move { q.receive_wait(1, LEASE, Duration::from_secs(1)).await });
    live(&again).await;
    waiter.await.unwrap().unwrap();
}
