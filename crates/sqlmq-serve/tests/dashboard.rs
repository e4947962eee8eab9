//! The dashboard in headless Chromium (Debian's `chromium` + `chromium-driver`, driven over
//! WebDriver): every page renders with real data, a redrive works end to end through its
//! confirmation dialog, a schedule is paused with its button, read-only access shows no
//! action, and a screenshot of every page is saved: into `target/screenshots/`, or into
//! `docs/guide/src/screenshots/` with `SQLMQ_UPDATE_SCREENSHOTS=1`.

mod common;

use std::time::Duration;

use common::webdriver::Browser;
use common::{TestServer, eventually, test_config, workspace_root};
use serde_json::{Value, json};

const FULL: &str = "dashboard-full";
const READ: &str = "dashboard-read";

/// Requests with the full token.
async fn call(s: &TestServer, method: reqwest::Method, path: &str, body: Value) -> Value {
    let r = s
        .http
        .request(method, s.url(path))
        .bearer_auth(FULL)
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, v) = common::split(r).await;
    assert!(status < 300, "{path}: {status} {v}");
    v
}

async fn post(s: &TestServer, path: &str, body: Value) -> Value {
    call(s, reqwest::Method::POST, path, body).await
}

async fn put(s: &TestServer, path: &str, body: Value) -> Value {
    call(s, reqwest::Method::PUT, path, body).await
}

async fn get(s: &TestServer, path: &str) -> Value {
    let r = s
        .http
        .get(s.url(path))
        .bearer_auth(FULL)
        .send()
        .await
        .unwrap();
    common::split(r).await.1
}

fn receipts(v: &Value) -> Vec<Value> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["receipt"].clone())
        .collect()
}

/// Realistic data: a busy queue with dead letters, a topic with groups in every state, a
/// live worker process.
async fn seed(s: &TestServer) -> (String, sqlmq::worker::CancellationToken) {
    put(
        s,
        "/v1/queues/emails",
        json!({"max_attempts": 1, "backoff": "10s,1m"}),
    )
    .await;
    put(
        s,
        "/v1/queues/thumbnails",
        json!({"max_in_flight": 2, "rate_limit": "100/1m"}),
    )
    .await;
    for round in 0..4 {
        let msgs: Vec<Value> = (0..5).map(|i| json!({"body": format!("{{\"to\":\"user{round}{i}@example.com\"}}"), "ordering_key": format!("user{i}")})).collect();
        post(s, "/v1/queues/emails/messages", json!({"messages": msgs})).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    post(
        s,
        "/v1/queues/emails/messages",
        json!({"messages": [{"body": "weekly digest", "delay_ms": 3600000}]}),
    )
    .await;
    let got = post(
        s,
        "/v1/queues/emails/receive",
        json!({"max": 6, "lease_ms": 600000}),
    )
    .await;
    let r = receipts(&got);
    post(s, "/v1/queues/emails/ack", json!({"receipts": r[..2]})).await;
    post(
        s,
        "/v1/queues/emails/nack",
        json!({"receipts": r[2..4], "error": "SMTP 550: mailbox unavailable"}),
    )
    .await;

    put(
        s,
        "/v1/topics/orders",
        json!({"partitions": 3, "retention_ms": 604800000}),
    )
    .await;
    put(
        s,
        "/v1/topics/orders/groups/billing",
        json!({"start": "earliest", "max_attempts": 2, "consume_timeout_ms": 1}),
    )
    .await;
    put(
        s,
        "/v1/topics/orders/groups/audit",
        json!({"mode": "broadcast", "start": "earliest"}),
    )
    .await;
    put(
        s,
        "/v1/topics/orders/groups/shipping",
        json!({"start": "earliest"}),
    )
    .await;
    put(s, "/v1/topics/clicks", json!({})).await;
    let mut traced = String::new();
    for round in 0..4 {
        let recs: Vec<Value> = (0..6)
            .map(|i| json!({"key": format!("customer-{i}"), "body": format!("{{\"order\":{},\"paid\":true}}", round * 6 + i)}))
            .collect();
        let p = post(s, "/v1/topics/orders/records", json!({"records": recs})).await;
        if traced.is_empty() {
            traced = p["records"][0]["id"].as_str().unwrap().to_owned();
        }
        post(
            s,
            "/v1/topics/clicks/records",
            json!({"records": [{"body": "click"}, {"body": "click"}]}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // billing: some acked, one retrying, one dead, some in flight past the consume timeout.
    let got = eventually(Duration::from_secs(10), "billing records", || async {
        let v = post(
            s,
            "/v1/topics/orders/groups/billing/receive",
            json!({"max": 10, "lease_ms": 600000, "wait_ms": 1000}),
        )
        .await;
        (v["messages"].as_array()?.len() >= 6).then_some(v)
    })
    .await;
    let r = receipts(&got);
    post(
        s,
        "/v1/topics/orders/groups/billing/ack",
        json!({"receipts": r[..3]}),
    )
    .await;
    post(
        s,
        "/v1/topics/orders/groups/billing/nack",
        json!({"receipts": [r[3]], "error": "payment gateway timeout"}),
    )
    .await;
    post(
        s,
        "/v1/topics/orders/groups/billing/nack",
        json!({"receipts": [r[4]], "error": "card declined", "retry_in_ms": 0}),
    )
    .await;
    let again = eventually(Duration::from_secs(10), "the retried record", || async {
        let v = post(
            s,
            "/v1/topics/orders/groups/billing/receive",
            json!({"max": 1, "lease_ms": 600000, "wait_ms": 500}),
        )
        .await;
        v["messages"]
            .as_array()?
            .iter()
            .find(|m| m["attempt"] == 2)
            .cloned()
    })
    .await;
    post(
        s,
        "/v1/topics/orders/groups/billing/nack",
        json!({"receipts": [again["receipt"]], "error": "card declined again"}),
    )
    .await;
    post(
        s,
        "/v1/topics/orders/groups/audit/members/cache-1/poll",
        json!({"max": 10, "checkpoint": true}),
    )
    .await;
    post(
        s,
        "/v1/topics/orders/groups/shipping/receive",
        json!({"max": 4}),
    )
    .await;

    // Schedules: a nightly report and a heartbeat that fires during the test.
    put(
        s,
        "/v1/schedules/nightly-report",
        json!({"cron": "0 3 * * *", "time_zone": "Europe/Paris", "queue": "thumbnails", "body": "report"}),
    )
    .await;
    put(
        s,
        "/v1/schedules/heartbeat",
        json!({"every": "2s", "topic": "clicks"}),
    )
    .await;

    // A live worker process.
    let stop = sqlmq::worker::CancellationToken::new();
    let worker = sqlmq::Worker::builder(&s.client)
        .queue_raw("thumbnails", |_d: sqlmq::Delivery, _ctx| async {
            Ok::<_, String>(sqlmq::Outcome::Done)
        })
        .run(stop.clone());
    tokio::spawn(worker);
    (traced, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_renders_redrive_works_read_only_has_no_actions() {
    let s = TestServer::with(test_config().token(FULL).read_token(READ)).await;
    let (traced, worker) = seed(&s).await;
    // Let the refresher collect a few samples for the charts and the alerts.
    s.state.refresh_gauges().await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Every run takes the screenshots; they replace the committed ones in docs/ only when
    // asked, so that running the tests does not dirty the work tree.
    let shots = if std::env::var_os("SQLMQ_UPDATE_SCREENSHOTS").is_some() {
        workspace_root().join("docs/guide/src/screenshots")
    } else {
        workspace_root().join("target/screenshots")
    };
    let b = Browser::start().await;

    // Signing in with the full token.
    b.goto(&s.url("/")).await;
    assert!(
        b.source().await.contains("Sign in"),
        "redirected to the login page"
    );
    b.type_into("input[name=token]", FULL).await;
    b.click(&b.find("form[action='/login'] button").await).await;
    eventually(Duration::from_secs(5), "the overview", || async {
        b.source().await.contains("<h1>Overview</h1>").then_some(())
    })
    .await;

    // Overview: every kind of object, with its figures.
    let html = b.source().await;
    for needle in [
        "emails",
        "thumbnails",
        "orders",
        "clicks",
        "billing",
        "audit",
        "shipping",
        "live processes",
        "Rates, last hour",
    ] {
        assert!(html.contains(needle), "overview lacks {needle}");
    }
    assert_eq!(b.find_all("#queues tr").await.len(), 3, "header + 2 queues");
    assert_eq!(b.find_all("#topics tr").await.len(), 3, "header + 2 topics");
    assert!(
        b.find_all("svg polyline").await.len() >= 3,
        "the rates chart has its series"
    );
    b.screenshot(&shots.join("overview.png")).await;

    // Alerts (before the redrives below clear the dead letters).
    s.state.refresh_gauges().await;
    b.goto(&s.url("/alerts")).await;
    let alerts = b.source().await;
    assert!(
        alerts.contains("consume timeout"),
        "the billing records held past 1 ms are reported"
    );
    assert!(alerts.contains("dead letters rising"));
    // InnoDB's history list length, with the figure where the server tells the runtime user
    // (MariaDB); short, so no alert of its own.
    assert!(alerts.contains("InnoDB history list length above 100000 for 5 minutes"));
    if s.client.server().flavor == sqlmq::admin::Flavor::MariaDb {
        let length = b.text("#history-list-length").await;
        assert!(length.trim().parse::<u64>().is_ok(), "{length:?}");
    }
    assert!(!alerts.contains(", above 100000 for 5 minutes"));
    b.screenshot(&shots.join("alerts.png")).await;

    // Queue page: counts by state, dead letters with their history.
    b.goto(&s.url("/queues/emails")).await;
    let stats = get(&s, "/v1/queues/emails").await;
    assert_eq!(stats["dead"], 2);
    assert!(b.text("#count-dead").await.starts_with('2'));
    assert!(
        b.text("#count-ready")
            .await
            .starts_with(&stats["ready"].to_string())
    );
    assert!(b.text("#count-scheduled").await.starts_with('1'));
    assert_eq!(b.find_all("#dead tr").await.len(), 3);
    assert!(
        b.text("#dead")
            .await
            .contains("SMTP 550: mailbox unavailable")
    );
    assert!(b.find_all("svg polyline").await.len() >= 4);
    // Find by ordering key among the dead letters.
    b.type_into("input[name=key]", "user2").await;
    b.click(&b.find("form[method=get] button").await).await;
    eventually(Duration::from_secs(5), "the search result", || async {
        b.source()
            .await
            .contains("Dead letters matching")
            .then_some(())
    })
    .await;
    // The key's search also finds its messages waiting or in flight.
    assert!(b.text("#found").await.contains("user2"));

    // Messages by state: the ready page, then the scheduled tab.
    b.goto(&s.url("/queues/emails")).await;
    let ready = stats["ready"].as_u64().unwrap() as usize;
    assert_eq!(b.find_all("#messages tr").await.len(), 1 + ready.min(50));
    b.click(&b.find("#states a[href$='state=scheduled']").await)
        .await;
    eventually(Duration::from_secs(5), "the scheduled page", || async {
        b.source().await.contains("weekly digest").then_some(())
    })
    .await;
    assert_eq!(
        b.find_all("#messages tr").await.len(),
        2,
        "header + 1 delayed"
    );
    // Find an in-flight message by id: any state is searched.
    let held = get(&s, "/v1/queues/emails/messages?state=in_flight").await;
    let held_id = held["messages"][0]["id"].as_str().unwrap().to_owned();
    b.goto(&s.url("/queues/emails")).await;
    b.type_into("input[name=id]", &held_id).await;
    b.click(&b.find("form[method=get] button").await).await;
    eventually(Duration::from_secs(5), "the search result", || async {
        b.source().await.contains("id=\"found\"").then_some(())
    })
    .await;
    let found = b.text("#found").await;
    assert!(
        found.contains(&held_id) && found.contains("in_flight"),
        "{found}"
    );
    b.screenshot(&shots.join("queue-find.png")).await;
    // The settings line shows a queue's limits, and none for a queue without.
    assert!(!b.text("#settings").await.contains("in flight"));
    b.goto(&s.url("/queues/thumbnails")).await;
    let settings = b.text("#settings").await;
    assert!(
        settings.contains("at most 2 in flight · rate limit 100/1m"),
        "{settings}"
    );
    // A fair queue's page lists its keys with their share, and sets a weight.
    put(&s, "/v1/queues/reports", json!({"fair": true})).await;
    for (key, n) in [("bigco", 30), ("acme", 3)] {
        let msgs: Vec<Value> = (0..n)
            .map(|i| json!({"body": format!("report {i}"), "fairness_key": key}))
            .collect();
        post(&s, "/v1/queues/reports/messages", json!({"messages": msgs})).await;
    }
    b.goto(&s.url("/queues/reports")).await;
    assert!(
        b.text("#settings")
            .await
            .contains("fair across fairness keys")
    );
    let keys = b.text("#fair-keys").await;
    assert!(keys.contains("bigco") && keys.contains("50%"), "{keys}");
    b.type_into("#set-weight input[name=key]", "acme").await;
    b.script("document.querySelector('#set-weight input[name=weight]').value = '3'")
        .await;
    let button = b.find("#set-weight button").await;
    b.click(&button).await;
    eventually(
        Duration::from_secs(5),
        "the weight's flash message",
        || async {
            let html = b.source().await;
            html.contains("has weight 3").then_some(())
        },
    )
    .await;
    let keys = b.text("#fair-keys").await;
    assert!(keys.contains("75%"), "acme's share with weight 3: {keys}");
    b.screenshot(&shots.join("queue-fair.png")).await;
    b.goto(&s.url("/queues/emails")).await;
    b.screenshot(&shots.join("queue.png")).await;

    // Redrive all, through its confirmation dialog.
    // Redriven keyed messages go back behind their key's head (ready or blocked).
    let waiting = |v: &Value| v["ready"].as_u64().unwrap() + v["blocked"].as_u64().unwrap();
    let waiting_before = waiting(&stats);
    let button = b
        .find("form[action='/ui/queues/emails/dead/redrive'] input[name=all] ~ button")
        .await;
    b.click(&button).await;
    let question = b.accept_confirm().await;
    assert!(question.contains("2 dead letters"), "{question}");
    eventually(Duration::from_secs(5), "the flash message", || async {
        let html = b.source().await;
        html.contains("Redrove 2 dead letter(s) into emails.")
            .then_some(())
    })
    .await;
    let after = get(&s, "/v1/queues/emails").await;
    assert_eq!(after["dead"], 0, "{after}");
    assert_eq!(waiting(&after), waiting_before + 2, "{after}");
    assert!(b.text("#count-dead").await.starts_with('0'));

    // Topic page: partitions, groups with lag, records, ranking.
    b.goto(&s.url("/topics/orders")).await;
    assert_eq!(b.find_all("#partitions tr").await.len(), 4);
    let groups = b.text("#groups").await;
    assert!(groups.contains("billing") && groups.contains("audit") && groups.contains("shipping"));
    let in_partition_0 = count_rows(&s, 0).await;
    assert!(in_partition_0 > 0);
    assert_eq!(b.find_all("#records tr").await.len(), 1 + in_partition_0);
    assert!(b.text("#topics").await.contains("clicks"));
    b.screenshot(&shots.join("topic.png")).await;
    // Records by key.
    b.goto(&s.url("/topics/orders?key=customer-1")).await;
    assert_eq!(
        b.find_all("#records tr").await.len(),
        5,
        "header + 4 records of customer-1"
    );

    // Trace.
    b.goto(&s.url(&format!("/topics/orders/records/{traced}")))
        .await;
    let trace = b.text("#trace").await;
    assert!(
        trace.contains("billing") && trace.contains("audit") && trace.contains("shipping"),
        "{trace}"
    );
    b.screenshot(&shots.join("trace.png")).await;

    // Group page: lag, retries, dead letters; redrive one.
    b.goto(&s.url("/topics/orders/groups/billing")).await;
    assert!(b.text("#dead").await.contains("card declined again"));
    assert_eq!(b.find_all("#retries tr").await.len(), 2, "header + 1 retry");
    assert!(b.text("#lag-dead").await.starts_with('1'));
    b.screenshot(&shots.join("group.png")).await;
    let redrive_one = b.find("#dead form button").await;
    b.click(&redrive_one).await;
    eventually(Duration::from_secs(5), "the group redrive", || async {
        b.source()
            .await
            .contains("Redrove 1 dead letter(s).")
            .then_some(())
    })
    .await;
    assert_eq!(get(&s, "/v1/topics/orders/groups/billing").await["dead"], 0);

    // Processes.
    b.goto(&s.url("/processes")).await;
    assert!(
        b.text("#processes")
            .await
            .contains(&std::process::id().to_string())
    );
    b.screenshot(&shots.join("processes.png")).await;

    // Schedules: timing, target, fire times; pause one with its button.
    eventually(
        Duration::from_secs(10),
        "the heartbeat's first fire",
        || async {
            let v = get(&s, "/v1/schedules/heartbeat").await;
            (v["fired"].as_u64()? > 0).then_some(())
        },
    )
    .await;
    b.goto(&s.url("/schedules")).await;
    let table = b.text("#schedules").await;
    for needle in [
        "nightly-report",
        "0 3 * * * (Europe/Paris)",
        "queue thumbnails",
        "heartbeat",
        "every 2s",
        "topic clicks",
    ] {
        assert!(
            table.contains(needle),
            "the schedules page lacks {needle}: {table}"
        );
    }
    assert_eq!(
        b.find_all("#schedules tr").await.len(),
        3,
        "header + 2 schedules"
    );
    b.screenshot(&shots.join("schedules.png")).await;
    b.click(
        &b.find("form[action='/ui/schedules/heartbeat/pause'] button")
            .await,
    )
    .await;
    eventually(
        Duration::from_secs(5),
        "the pause's flash message",
        || async {
            b.source()
                .await
                .contains("Schedule heartbeat paused.")
                .then_some(())
        },
    )
    .await;
    assert_eq!(get(&s, "/v1/schedules/heartbeat").await["paused"], true);
    assert_eq!(
        b.find_all("form[action='/ui/schedules/heartbeat/resume']")
            .await
            .len(),
        1,
        "a paused schedule offers to resume"
    );

    // The auto-refresh pause toggle keeps its state across reloads.
    b.click(&b.find("#refresh").await).await;
    b.goto(&s.url("/processes")).await;
    assert_eq!(b.text("#refresh").await, "Resume auto-refresh");

    // Read-only: sign in with the read token; pages render, no action anywhere.
    b.click(&b.find("#sign-out").await).await;
    eventually(Duration::from_secs(5), "the login page", || async {
        b.source().await.contains("Sign in").then_some(())
    })
    .await;
    b.type_into("input[name=token]", READ).await;
    b.click(&b.find("form[action='/login'] button").await).await;
    eventually(Duration::from_secs(5), "the overview", || async {
        b.source().await.contains("<h1>Overview</h1>").then_some(())
    })
    .await;
    for page in [
        "/",
        "/queues/emails",
        "/topics/orders",
        "/topics/orders/groups/billing",
        "/processes",
        "/schedules",
        "/alerts",
        &format!("/topics/orders/records/{traced}"),
    ] {
        b.goto(&s.url(page)).await;
        assert!(
            b.find_all("#read-only").await.len() == 1,
            "{page}: read-only badge"
        );
        let actions = b
            .find_all("form[method=post]:not([action='/logout'])")
            .await;
        assert!(
            actions.is_empty(),
            "{page} shows an action in read-only mode"
        );
        assert!(b.find_all("h1").await.len() == 1, "{page} rendered");
    }
    b.goto(&s.url("/queues/emails")).await;
    b.screenshot(&shots.join("queue-read-only.png")).await;

    b.quit().await;
    worker.cancel();
    s.finish().await;
}

/// Rows the topic page lists for partition 0 (its default query).
async fn count_rows(s: &TestServer, partition: u32) -> usize {
    let v = get(
        s,
        &format!("/v1/topics/orders/records?partition={partition}&limit=50"),
    )
    .await;
    v["records"].as_array().unwrap().len()
}

/// A workflow's page in the browser: its graph with a box per step coloured by state, its
/// progress and callbacks, found with the overview's lookup form; sealing an open batch with
/// its button (full access only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_batch_page_shows_its_graph_and_seals_an_open_batch() {
    let s = TestServer::with(test_config().token(FULL).read_token(READ)).await;
    put(&s, "/v1/queues/media", json!({"max_attempts": 1})).await;
    put(&s, "/v1/queues/notify", json!({})).await;
    // extract → 4 thumbnails and 3 transcodes → pack → publish.
    let mut members =
        vec![json!({"queue": "media", "step": "extract frames", "body": "video-42.mp4"})];
    for i in 1..=4 {
        members.push(json!({"queue": "media", "step": format!("thumbnail {i}"), "body": "t", "after": ["extract frames"]}));
    }
    for p in ["480p", "720p", "1080p"] {
        members.push(json!({"queue": "media", "step": format!("transcode {p}"), "body": p, "after": ["extract frames"]}));
    }
    let all: Vec<String> = (1..=4)
        .map(|i| format!("thumbnail {i}"))
        .chain(["480p", "720p", "1080p"].map(|p| format!("transcode {p}")))
        .collect();
    members.push(json!({"queue": "media", "step": "pack", "body": "zip", "after": all}));
    members.push(json!({"queue": "media", "step": "publish", "body": "cdn", "after": ["pack"]}));
    let created = post(
        &s,
        "/v1/batches",
        json!({"members": members,
               "on_success": {"queue": "notify", "body": "video ready"},
               "on_failure": {"queue": "notify", "body": "video failed"}}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    // extract acked with a result; two thumbnails acked, one dead, the rest in flight.
    let got = post(
        &s,
        "/v1/queues/media/receive",
        json!({"max": 10, "wait_ms": 1000}),
    )
    .await;
    let r = receipts(&got)[0].as_str().unwrap().to_owned();
    post(
        &s,
        "/v1/queues/media/ack",
        json!({"receipts": [r], "results": {r: "{\"frames\":1800}"}}),
    )
    .await;
    let got = eventually(
        Duration::from_secs(10),
        "the thumbnails and transcodes",
        || async {
            let v = post(
                &s,
                "/v1/queues/media/receive",
                json!({"max": 10, "wait_ms": 1000, "lease_ms": 600000}),
            )
            .await;
            (v["messages"].as_array()?.len() == 7).then_some(v)
        },
    )
    .await;
    let step_of = |m: &Value| {
        created["steps"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, v)| **v == m["id"])
            .unwrap()
            .0
            .clone()
    };
    let by_step = |name: &str| {
        got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| step_of(m) == name)
            .unwrap()["receipt"]
            .clone()
    };
    post(&s, "/v1/queues/media/ack", json!({"receipts": [by_step("thumbnail 1"), by_step("thumbnail 2"), by_step("transcode 480p")]})).await;
    post(
        &s,
        "/v1/queues/media/nack",
        json!({"receipts": [by_step("thumbnail 3")], "error": "corrupt frame"}),
    )
    .await;
    // An open batch, to seal from its page.
    let open = post(
        &s,
        "/v1/batches",
        json!({"members": [{"queue": "notify", "body": "x"}], "open": true}),
    )
    .await;
    let open = open["id"].as_str().unwrap().to_owned();

    let shots = if std::env::var_os("SQLMQ_UPDATE_SCREENSHOTS").is_some() {
        workspace_root().join("docs/guide/src/screenshots")
    } else {
        workspace_root().join("target/screenshots")
    };
    let b = Browser::start().await;
    let sign_in = |token: &'static str| {
        let b = &b;
        let s = &s;
        async move {
            b.goto(&s.url("/login")).await;
            b.type_into("input[name=token]", token).await;
            b.click(&b.find("form[action='/login'] button").await).await;
            eventually(Duration::from_secs(5), "the overview", || async {
                b.source().await.contains("<h1>Overview</h1>").then_some(())
            })
            .await;
        }
    };
    sign_in(FULL).await;
    // Looked up by id from the overview.
    b.type_into("#batch-lookup input[name=id]", &id).await;
    b.click(&b.find("#batch-lookup button").await).await;
    eventually(Duration::from_secs(5), "the batch page", || async {
        b.source().await.contains("id=\"workflow\"").then_some(())
    })
    .await;
    assert_eq!(
        b.find_all("#workflow g.step").await.len(),
        10,
        "a box per step"
    );
    assert_eq!(
        b.find_all("#workflow path.edge").await.len(),
        7 + 7 + 1,
        "an arrow per dependency"
    );
    for (state, n) in [
        ("succeeded", 4),
        ("dead", 1),
        ("pending", 3),
        ("held", 1),
        ("waiting", 1),
    ] {
        assert_eq!(
            b.find_all(&format!("#workflow g.step[data-state='{state}']"))
                .await
                .len(),
            n,
            "{state} steps"
        );
    }
    assert!(b.text("#count-succeeded").await.starts_with('4'));
    assert!(b.text("#callbacks").await.contains("on failure"));
    assert!(
        b.text("#members").await.contains("{\"frames\":1800}"),
        "extract's result"
    );
    assert!(
        b.find_all("#actions").await.is_empty(),
        "a sealed batch has no seal button"
    );
    b.screenshot(&shots.join("batch.png")).await;

    // The batches page: found without their ids, unfinished first, each a link to its page.
    b.goto(&s.url("/batches")).await;
    let rows = b.find_all("#batches tr td:first-child a").await;
    assert_eq!(rows.len(), 2, "the workflow and the open batch");
    let listed = b.text("#batches").await;
    let (at_open, at_workflow) = (listed.find(&open).unwrap(), listed.find(&id).unwrap());
    assert!(at_open < at_workflow, "the open batch is newer: {listed}");
    assert_eq!(
        b.find_all("#batches .progress").await.len(),
        2,
        "a bar each"
    );
    b.screenshot(&shots.join("batches.png")).await;
    b.click(&b.find(&format!("#batches a[href='/batches/{id}']")).await)
        .await;
    eventually(
        Duration::from_secs(5),
        "the batch page from the list",
        || async { b.source().await.contains("id=\"workflow\"").then_some(()) },
    )
    .await;

    // The open batch: sealed with its button, after the confirmation.
    b.goto(&s.url(&format!("/batches/{open}"))).await;
    assert_eq!(b.text("#batch-state").await, "open");
    b.click(
        &b.find(&format!("form[action='/ui/batches/{open}/seal'] button"))
            .await,
    )
    .await;
    b.accept_confirm().await;
    eventually(
        Duration::from_secs(5),
        "the seal's flash message",
        || async { b.source().await.contains("sealed.").then_some(()) },
    )
    .await;
    assert_eq!(
        get(&s, &format!("/v1/batches/{open}")).await["state"],
        "sealed"
    );

    // Read-only: the page renders without any action.
    let open2 = post(&s, "/v1/batches", json!({"members": [], "open": true})).await;
    b.click(&b.find("#sign-out").await).await;
    sign_in(READ).await;
    for page in [
        format!("/batches/{id}"),
        format!("/batches/{}", open2["id"].as_str().unwrap()),
    ] {
        b.goto(&s.url(&page)).await;
        assert_eq!(b.find_all("#read-only").await.len(), 1, "{page}");
        assert!(
            b.find_all("form[method=post]:not([action='/logout'])")
                .await
                .is_empty(),
            "{page} shows an action"
        );
    }
    b.quit().await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_timeline_and_the_events_its_waiting_for() {
    let s = TestServer::with(test_config().token(FULL).read_token(READ)).await;
    put(&s, "/v1/queues/orders", json!({})).await;
    let sent = post(
        &s,
        "/v1/queues/orders/messages",
        json!({"messages": [{"body": "order-42"}, {"body": "order-43"}]}),
    )
    .await;
    let id = sent["messages"][0]["id"].as_str().unwrap().to_owned();
    // Both runs: a step recorded, a sleep over, then a wait for their shipment.
    let mut waiting = Vec::new();
    for n in 0..2 {
        let got = eventually(Duration::from_secs(10), "a run to drive", || async {
            let v = post(
                &s,
                "/v1/queues/orders/receive",
                json!({"max": 1, "wait_ms": 1000}),
            )
            .await;
            v["messages"].as_array()?.first().cloned()
        })
        .await;
        let (m, r) = (
            got["id"].as_str().unwrap().to_owned(),
            got["receipt"].as_str().unwrap().to_owned(),
        );
        let run = format!("/v1/queues/orders/runs/{r}");
        put(
            &s,
            &format!("{run}/steps/charge"),
            json!({"result": {"charge": format!("ch_{n}")}}),
        )
        .await;
        let slept = post(
            &s,
            &format!("{run}/sleep"),
            json!({"name": "settle", "duration_ms": 0}),
        )
        .await;
        assert_eq!(slept["state"], "awake");
        let waited = post(
            &s,
            &format!("{run}/wait"),
            json!({"event": "shipped", "timeout_ms": 86_400_000}),
        )
        .await;
        assert_eq!(waited["state"], "suspended");
        waiting.push(m);
    }

    let shots = if std::env::var_os("SQLMQ_UPDATE_SCREENSHOTS").is_some() {
        workspace_root().join("docs/guide/src/screenshots")
    } else {
        workspace_root().join("target/screenshots")
    };
    let b = Browser::start().await;
    b.goto(&s.url("/login")).await;
    b.type_into("input[name=token]", READ).await;
    b.click(&b.find("form[action='/login'] button").await).await;
    eventually(Duration::from_secs(5), "the overview", || async {
        b.source().await.contains("<h1>Overview</h1>").then_some(())
    })
    .await;
    // From the queue's scheduled messages to the run's page.
    b.goto(&s.url("/queues/orders?state=scheduled")).await;
    b.click(
        &b.find(&format!("#messages a[href='/queues/orders/messages/{id}']"))
            .await,
    )
    .await;
    eventually(Duration::from_secs(5), "the run's page", || async {
        b.source().await.contains("id=\"timeline\"").then_some(())
    })
    .await;
    assert_eq!(
        b.find_all("#timeline li.done").await.len(),
        2,
        "the step and the sleep"
    );
    assert_eq!(
        b.find_all("#timeline li.waiting").await.len(),
        1,
        "the wait"
    );
    let timeline = b.text("#timeline").await;
    assert!(
        timeline.contains("charge") && timeline.contains("settle"),
        "{timeline}"
    );
    assert!(
        timeline.contains("shipped") && timeline.contains("deadline"),
        "{timeline}"
    );
    assert_eq!(b.text("#state").await, "scheduled");
    b.screenshot(&shots.join("run.png")).await;

    // The events page: the event with both runs, each a link to its page.
    b.click(&b.find("header a[href='/events']").await).await;
    eventually(Duration::from_secs(5), "the events page", || async {
        b.source().await.contains("id=\"events\"").then_some(())
    })
    .await;
    let events = b.text("#events").await;
    assert!(events.contains("shipped"), "{events}");
    for m in &waiting {
        assert_eq!(
            b.find_all(&format!("#events a[href='/queues/orders/messages/{m}']"))
                .await
                .len(),
            1,
            "{events}"
        );
    }
    b.screenshot(&shots.join("events.png")).await;

    // The emit wakes both: the page lists no event any more.
    let emitted = post(
        &s,
        "/v1/events/shipped",
        json!({"payload": {"carrier": "DHL"}}),
    )
    .await;
    assert_eq!(emitted["woken"], 2);
    b.goto(&s.url("/events")).await;
    assert!(b.text("#events").await.contains("No run waits"));
    b.quit().await;
    s.finish().await;
}
