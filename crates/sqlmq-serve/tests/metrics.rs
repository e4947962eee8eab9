//! `/metrics`: the database gauges equal the real counts after a refresh; the library's
//! counters appear through the recorder; an unreachable database is `sqlmq_up 0` and 503s.

mod common;

use std::time::Duration;

use common::{TestDb, TestServer, eventually, test_config};
use serde_json::json;

fn gauge(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn metrics(s: &TestServer) -> String {
    s.http
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_equal_the_real_counts_after_a_refresh() {
    let handle = sqlmq_serve::install_prometheus_recorder();
    let s = TestServer::with(test_config().prometheus(handle)).await;
    s.put("/v1/queues/q", json!({"max_attempts": 1})).await;
    s.send("q", &["a", "b", "c", "d", "e"]).await;
    s.post(
        "/v1/queues/q/messages",
        json!({"messages": [{"body": "later", "delay_ms": 600000}]}),
    )
    .await;
    let (_, got) = s
        .post("/v1/queues/q/receive", json!({"max": 2, "lease_ms": 60000}))
        .await;
    let r = got["messages"][1]["receipt"].clone();
    s.post("/v1/queues/q/nack", json!({"receipts": [r]})).await; // → dead
    s.put("/v1/topics/t", json!({"partitions": 2})).await;
    s.put("/v1/topics/t/groups/g", json!({"start": "earliest"}))
        .await;
    s.post(
        "/v1/topics/t/records",
        json!({"records": [{"body": "x", "partition": 1}, {"body": "y", "partition": 1}]}),
    )
    .await;

    // A fair queue: key k with 3 sent, one of them in flight.
    s.put("/v1/queues/f", json!({"fair": true})).await;
    s.post(
        "/v1/queues/f/messages",
        json!({"messages": [
            {"body": "1", "fairness_key": "k"},
            {"body": "2", "fairness_key": "k"},
            {"body": "3", "fairness_key": "k"}
        ]}),
    )
    .await;
    s.post("/v1/queues/f/receive", json!({"max": 1, "lease_ms": 60000}))
        .await;

    // The truth, from the library.
    let stats = s.client.queue("q").await.unwrap().stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.scheduled, stats.in_flight, stats.dead),
        (3, 1, 1, 1)
    );
    let text = eventually(
        Duration::from_secs(10),
        "gauges refreshed with every count",
        || async {
            let text = metrics(&s).await;
            let lag = gauge(
                &text,
                "sqlmq_group_lag_records{topic=\"t\",group=\"g\",partition=\"1\"}",
            );
            let ready = gauge(&text, "sqlmq_queue_messages{queue=\"q\",state=\"ready\"}");
            let fair = gauge(
                &text,
                "sqlmq_fairness_key_in_flight_messages{queue=\"f\",key=\"k\"}",
            );
            (lag == Some(2.0) && ready == Some(3.0) && fair == Some(1.0)).then_some(text)
        },
    )
    .await;
    for (state, n) in [
        ("ready", stats.ready),
        ("scheduled", stats.scheduled),
        ("blocked", stats.blocked),
        ("in_flight", stats.in_flight),
        ("dead", stats.dead),
    ] {
        let series = format!("sqlmq_queue_messages{{queue=\"q\",state=\"{state}\"}}");
        assert_eq!(gauge(&text, &series), Some(n as f64), "{series}\n{text}");
    }
    assert!(gauge(&text, "sqlmq_queue_oldest_ready_age_seconds{queue=\"q\"}").unwrap() >= 0.0);
    let lag = s
        .client
        .topic("t")
        .await
        .unwrap()
        .group("g")
        .await
        .unwrap()
        .lag()
        .await
        .unwrap();
    assert_eq!(
        gauge(
            &text,
            "sqlmq_group_lag_records{topic=\"t\",group=\"g\",partition=\"0\"}"
        ),
        Some(0.0)
    );
    assert_eq!(lag.unconsumed, 2);
    assert!(
        gauge(
            &text,
            "sqlmq_group_oldest_unconsumed_age_seconds{topic=\"t\",group=\"g\",partition=\"1\"}"
        )
        .is_some()
    );
    assert_eq!(gauge(&text, "sqlmq_topic_records{topic=\"t\"}"), Some(2.0));
    // The fair queue's key: its gauges, and counters whose rates are its arrival and
    // completion rates.
    for (name, n) in [
        ("sqlmq_fairness_key_ready_messages", 2.0),
        ("sqlmq_fairness_key_in_flight_messages", 1.0),
        ("sqlmq_fairness_key_weight", 1.0),
        ("sqlmq_fairness_key_arrived_total", 3.0),
        ("sqlmq_fairness_key_settled_total", 0.0),
    ] {
        let series = format!("{name}{{queue=\"f\",key=\"k\"}}");
        assert_eq!(gauge(&text, &series), Some(n), "{series}\n{text}");
    }
    assert!(
        text.contains("# TYPE sqlmq_fairness_key_arrived_total counter"),
        "{text}"
    );
    assert_eq!(gauge(&text, "sqlmq_processes_live"), Some(0.0));
    assert_eq!(gauge(&text, "sqlmq_up"), Some(1.0));
    // HELP says the figures are refreshed in the background; library counters are there too.
    assert!(
        text.contains("# HELP sqlmq_queue_messages ")
            && text.contains("a scrape never waits on the database")
    );
    assert!(
        gauge(&text, "sqlmq_messages_sent_total{queue=\"q\"}").is_some_and(|n| n >= 6.0),
        "{text}"
    );
    assert!(text.contains("sqlmq_http_requests_total{"), "{text}");
    // A deleted queue disappears from the next refresh.
    s.delete("/v1/queues/q").await;
    s.state.refresh_gauges().await;
    assert!(
        !metrics(&s)
            .await
            .contains("sqlmq_queue_messages{queue=\"q\"")
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_503_with_retry_after() {
    let db = TestDb::new().await;
    db.client().await; // migrated
    let proxy = sqlmq_testkit::Proxy::start(sqlmq_testkit::address_of(&db.url)).await;
    let through = proxy.url(&db.url);
    let client = sqlmq::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .connect(&through)
        .await
        .unwrap();
    let s = TestServer::on(db, client, test_config()).await;
    assert_eq!(s.get("/readyz").await.0, 200);
    // The database "goes away" for the server: connections closed, new ones refused.
    proxy.refuse(true);
    proxy.drop_all();
    let (status, body) = eventually(Duration::from_secs(30), "a 503", || async {
        let r = s.http.get(s.url("/v1/queues")).send().await.unwrap();
        if r.status() == 503 {
            assert_eq!(r.headers()["retry-after"], "2");
            Some(common::split(r).await)
        } else {
            None
        }
    })
    .await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "database_unavailable", "{body}");
    let r = s.http.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(s.get("/healthz").await.0, 200, "the process itself is up");
    s.state.refresh_gauges().await;
    let text = metrics(&s).await;
    assert_eq!(gauge(&text, "sqlmq_up"), Some(0.0), "{text}");
    // The dashboard's alerts say the database is unavailable, for how long, and why.
    let alerts = s.http.get(s.url("/alerts")).send().await.unwrap();
    let page = alerts.text().await.unwrap();
    assert!(page.contains("unavailable for"), "{page}");
    assert!(page.contains("retrying"), "{page}");
    s.finish().await;
}

/// A request waits for a pooled connection up to the client's connect timeout, then answers
/// 503 with `Retry-After` (never hangs, never a 500); once a connection is free it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_finds_the_pool_busy_is_503_with_retry_after() {
    let db = TestDb::new().await;
    db.client().await; // migrated
    let client = sqlmq::Client::builder()
        .max_connections(2)
        .connect_timeout(Duration::from_secs(1))
        .connect(&db.url)
        .await
        .unwrap();
    let s = TestServer::on(db, client.clone(), test_config()).await;
    assert_eq!(s.get("/v1/queues").await.0, 200);
    // Every pooled connection taken (as by long transactions of other requests).
    let held = [
        client.pool().acquire().await.unwrap(),
        client.pool().acquire().await.unwrap(),
    ];
    let started = std::time::Instant::now();
    let r = s.http.get(s.url("/v1/queues")).send().await.unwrap();
    let waited = started.elapsed();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "2");
    let (_, body) = common::split(r).await;
    assert_eq!(body["error"]["code"], "database_unavailable", "{body}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "waited {waited:?} for the pool"
    );
    drop(held);
    assert_eq!(s.get("/v1/queues").await.0, 200);
    s.finish().await;
}

/// InnoDB's history list length on MariaDB: the gauge is there for the server's runtime user (a
/// status variable every user may read), and it counts the undo logs a transaction held open
/// keeps from purge; the alerts page shows the figure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_list_length_follows_a_transaction_held_open() {
    let s = TestServer::start().await;
    if s.client.server().flavor != sqlmq::admin::Flavor::MariaDb {
        // MySQL: it needs PROCESS, which tests/alerts.rs grants; here the runtime user has
        // only data statements, so the gauge is absent and the alerts page says why.
        s.state.refresh_gauges().await;
        assert!(
            !metrics(&s)
                .await
                .contains("sqlmq_innodb_history_list_length")
        );
        s.finish().await;
        return;
    }
    let before = eventually(Duration::from_secs(10), "the gauge", || async {
        gauge(&metrics(&s).await, "sqlmq_innodb_history_list_length")
    })
    .await;
    assert!(before >= 0.0 && before.fract() == 0.0, "{before}");
    assert!(
        metrics(&s)
            .await
            .contains("# TYPE sqlmq_innodb_history_list_length gauge")
    );

    // A read view held open: nothing committed after it can be purged.
    let updates = 300.0;
    let view = sqlmq_testkit::hold_undo(&s.db, updates as usize).await;
    let held = eventually(Duration::from_secs(10), "the held history", || async {
        gauge(&metrics(&s).await, "sqlmq_innodb_history_list_length").filter(|n| *n >= updates)
    })
    .await;
    let page = s
        .http
        .get(s.url("/alerts"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("InnoDB history list length above 100000"),
        "{page}"
    );
    assert!(page.contains("id=\"history-list-length\""), "{page}");
    assert!(
        !page.contains(", above 100000 for 5 minutes"),
        "no alert: {held} is short"
    );
    view.release().await;
    s.finish().await;
}

/// SQLite has no undo history: no gauge, a refresh that succeeds, and the alerts page says the
/// figure does not apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_the_history_list_length_is_absent_and_nothing_fails() {
    let db = sqlmq_testkit::TestDb::<sqlmq::Sqlite>::new().await;
    let client = db.client().await;
    assert_eq!(client.history_list_length().await.unwrap(), None);
    let server = sqlmq_serve::Server::bind(client, test_config())
        .await
        .expect("bind");
    let base = format!("http://{}", server.local_addr());
    let state = server.state().clone();
    let stop = sqlmq::worker::CancellationToken::new();
    let task = tokio::spawn(server.run(stop.clone()));
    state.refresh_gauges().await;
    let http = reqwest::Client::new();
    let get = |path: &str| {
        let r = http.get(format!("{base}{path}")).send();
        async move { r.await.unwrap().text().await.unwrap() }
    };
    let text = get("/metrics").await;
    assert_eq!(gauge(&text, "sqlmq_up"), Some(1.0), "{text}");
    assert!(!text.contains("sqlmq_innodb_history_list_length"), "{text}");
    let page = get("/alerts").await;
    assert!(
        page.contains("not applicable (no InnoDB: SQLite)"),
        "{page}"
    );
    assert!(page.contains("No active alerts."), "{page}");
    stop.cancel();
    task.await.unwrap().unwrap();
    db.drop().await;
}
