//! `sqlmq event emit|list` and the journal in `sqlmq show`: a run suspended waiting for an
//! event (through the library's `Run`, as a receive loop would) is listed with its event,
//! `show` prints its journal, and the emit wakes it once.

mod common;

use std::time::Duration;

use common::TestDb;

#[test]
fn an_emit_wakes_the_run_that_show_and_list_say_waits() {
    let db = TestDb::new();
    db.ok(&["queue", "create", "orders"]);
    let id = db.ok(&["send", "orders", "order-9"]).trim().to_owned();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = sqlmq::Client::connect(&db.url).await.unwrap();
        let q = client.queue("orders").await.unwrap();
        let d = q
            .receive(1, Duration::from_secs(60))
            .await
            .unwrap()
            .remove(0);
        let run = q.run(d.receipt());
        run.record_step("charge", br#""ch_9""#).await.unwrap();
        let waited = run
            .wait_for_event("order-9-shipped", Duration::from_secs(3600))
            .await
            .unwrap();
        assert_eq!(waited, sqlmq::flow::Resumed::Suspended);
    });

    let listed = db.ok(&["event", "list"]);
    assert!(
        listed.contains("order-9-shipped") && listed.contains("EVENT"),
        "{listed}"
    );
    let shown = db.ok(&["show", "orders", &id]);
    assert!(shown.contains("step:        0 \"charge\": done"), "{shown}");
    assert!(
        shown.contains("event:       1 \"order-9-shipped\": waiting until"),
        "{shown}"
    );
    assert!(
        shown.contains("waits for:   event \"order-9-shipped\""),
        "{shown}"
    );
    let json = db.json(&["show", "orders", &id, "--json"]);
    assert_eq!(json["journal"]["steps"][1]["kind"], "event", "{json}");
    assert_eq!(
        json["journal"]["waiting_for"][0], "order-9-shipped",
        "{json}"
    );

    let emitted = db.ok(&["event", "emit", "order-9-shipped", r#"{"carrier":"DHL"}"#]);
    assert_eq!(
        emitted.trim(),
        "emitted order-9-shipped: 1 waiting runs woken"
    );
    let again = db.json(&["event", "emit", "order-9-shipped", "late", "--json"]);
    assert_eq!(
        (again["kept"].as_bool(), again["woken"].as_u64()),
        (Some(false), Some(0))
    );
    assert_eq!(db.json(&["event", "list", "--json"]), serde_json::json!([]));
    // Woken: back in line, ready to be received at once.
    assert_eq!(db.stats("orders").ready, 1);
    db.fails(&["event", "emit", ""], 1, "event name");
}
