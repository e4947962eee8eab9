//! `sqlmq subscribe --mode broadcast --exec`: every member runs the command for every record,
//! in offset order per partition, while publishers commit out of order; a member killed with
//! `kill -9` resumes from its checkpoint; a failing command holds back only its partition and a
//! record that keeps failing becomes that member's dead letter; SIGTERM lets the running
//! command finish. And one `consume` process serving several queues.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{TestDb, eventually, lines};
use rand::RngExt;
use serde_json::Value;

/// Appends `partition offset body` to `<member>.log`.
const RECORD: &str = r#"body=$(cat); printf '%s %s %s\n' "$SQLMQ_PARTITION" "$SQLMQ_OFFSET" "$body" >> "$SQLMQ_MEMBER.log""#;

/// One member's log: (partition, offset, body) in the order the commands ran.
fn log(db: &TestDb, member: &str) -> Vec<(u32, i64, String)> {
    lines(&db.path(&format!("{member}.log")))
        .iter()
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let p = parts.next().unwrap().parse().unwrap();
            let o = parts.next().unwrap().parse().unwrap();
            (p, o, parts.next().unwrap_or_default().to_owned())
        })
        .collect()
}

/// A broadcast member running [`RECORD`] (or `cmd`) on topic `t`, group `g`.
fn member(db: &TestDb, name: &str, cmd: &str, extra: &[&str]) -> common::Running {
    let mut args = vec![
        "subscribe",
        "t",
        "--group",
        "g",
        "--mode",
        "broadcast",
        "--member",
        name,
        "--exec",
        cmd,
        "--concurrency",
        "2",
    ];
    args.extend_from_slice(extra);
    db.spawn(&args)
}

/// Create topic `t` with `partitions` and its broadcast group `g` (from the earliest record).
fn setup(db: &TestDb, partitions: u32, config: sqlmq::GroupConfig) {
    let url = db.url.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = sqlmq::Client::connect(&url).await.unwrap();
        let topic = client
            .create_topic("t", sqlmq::TopicConfig::default().partitions(partitions))
            .await
            .unwrap();
        topic
            .create_group("g", config, sqlmq::topic::StartAt::Earliest)
            .await
            .unwrap();
    });
}

/// Publish `n` records per publisher from 8 publishers at once, each holding its transaction
/// open a random while: the commits land out of the order in which offsets were asked for.
fn publish_out_of_order(db: &TestDb, round: u32, per_publisher: usize) {
    let url = db.url.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let client = sqlmq::Client::connect(&url).await.unwrap();
        let topic = client.topic("t").await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|p| {
                let (client, topic) = (client.clone(), topic.clone());
                tokio::spawn(async move {
                    for i in 0..per_publisher {
                        let mut tx = client.begin().await.unwrap();
                        let record = sqlmq::Record::new(format!("{round}-{p}-{i}"));
                        topic.publish_in(&mut tx, record).await.unwrap();
                        let hold = rand::rng().random_range(0..15);
                        tokio::time::sleep(Duration::from_millis(hold)).await;
                        tx.commit().await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// Per partition, the offsets in the order they ran.
fn by_partition(log: &[(u32, i64, String)]) -> BTreeMap<u32, Vec<i64>> {
    let mut out: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
    for (p, o, _) in log {
        out.entry(*p).or_default().push(*o);
    }
    out
}

/// Guarantee: 3 broadcast members over 2 partitions each run the command once for every
/// committed record, in offset order per partition, while 8 publishers commit out of order; a
/// member killed with `kill -9` and restarted resumes from its checkpoint, missing nothing and
/// repeating at most the record per partition that followed its last checkpoint.
#[test]
fn every_member_runs_every_record_in_order_and_a_killed_member_resumes_from_its_checkpoint() {
    let db = TestDb::new();
    setup(&db, 2, sqlmq::GroupConfig::broadcast());
    let m1 = member(&db, "m1", RECORD, &[]);
    let m2 = member(&db, "m2", RECORD, &[]);
    let m3 = member(&db, "m3", RECORD, &[]);
    publish_out_of_order(&db, 1, 25);
    // m2 is killed once it has run some records, then started again under its name.
    eventually(Duration::from_secs(30), "m2 runs some records", || {
        (log(&db, "m2").len() >= 40).then_some(())
    });
    m2.kill9();
    let before_kill = log(&db, "m2").len();
    publish_out_of_order(&db, 2, 5);
    let m2 = member(&db, "m2", RECORD, &[]);
    for m in ["m1", "m2", "m3"] {
        eventually(Duration::from_secs(60), "every member runs all 240", || {
            let seen: BTreeSet<(u32, i64)> = log(&db, m).iter().map(|x| (x.0, x.1)).collect();
            (seen.len() >= 240).then_some(())
        });
    }
    std::thread::sleep(Duration::from_millis(300));
    for running in [m1, m2, m3] {
        running.signal(libc::SIGTERM);
        let out = running.wait(Duration::from_secs(30));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let published: BTreeSet<(u32, i64)> = log(&db, "m1").iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(published.len(), 240);
    for m in ["m1", "m3"] {
        let log = log(&db, m);
        assert_eq!(log.len(), 240, "{m} ran each record once");
        for (p, offsets) in by_partition(&log) {
            let expect: Vec<i64> = (0..offsets.len() as i64).collect();
            assert_eq!(offsets, expect, "{m}, partition {p}: offset order");
        }
        let bodies: BTreeSet<&str> = log.iter().map(|x| x.2.as_str()).collect();
        assert_eq!(bodies.len(), 240, "{m}: every record");
    }
    let log2 = log(&db, "m2");
    let seen2: BTreeSet<(u32, i64)> = log2.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(seen2, published, "the killed member missed nothing");
    let repeats = log2.len() - 240;
    assert!(
        repeats <= 2,
        "m2 repeated {repeats} records (at most one per partition: the one after its last \
         checkpoint); killed after {before_kill}"
    );
    for (p, offsets) in by_partition(&log2) {
        // In order, except one step back per partition at the restart.
        let back_steps = offsets.windows(2).filter(|w| w[1] <= w[0]).count();
        assert!(back_steps <= 1, "m2, partition {p}: {offsets:?}");
    }
    // Lag: every member at the end, with a last-seen time.
    let lag = db.json(&["lag", "t", "--group", "g", "--json"]);
    let members = lag[0]["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{lag}");
    assert!(members.iter().all(|m| m["behind"] == 0), "{lag}");
}

/// Guarantee: a failing command is retried on the group's backoff and holds back only its own
/// partition (a later record of that partition never overtakes it); a record that always fails
/// becomes that member's dead letter after the group's max attempts, visible in `dlq` and
/// `trace`, while the member and the other members move on.
#[test]
fn a_failing_command_holds_back_its_partition_and_a_poison_record_becomes_one_members_dead_letter()
{
    let db = TestDb::new();
    let config =
        sqlmq::GroupConfig::broadcast()
            .max_attempts(3)
            .backoff(sqlmq::queue::Backoff::Ladder(vec![Duration::from_millis(
                300,
            )]));
    setup(&db, 2, config);
    for body in ["flaky", "poison", "after"] {
        db.ok(&["publish", "t", "--partition", "0", body]);
    }
    for i in 0..3 {
        db.ok(&["publish", "t", "--partition", "1", &format!("p1-{i}")]);
    }
    let poison_id = db
        .json(&["query", "t", "--partition", "0", "--offset", "1", "--json"])
        .as_array()
        .map(|a| a[0]["id"].as_str().unwrap().to_owned())
        .unwrap();
    // m1: "flaky" fails twice then passes; "poison" always fails. m2: everything passes.
    let picky = format!(
        r#"body=$(cat); if [ "$body" = flaky ] && [ $(wc -l < flaky.count 2>/dev/null || echo 0) -lt 2 ]; then echo x >> flaky.count; echo "not yet" >&2; exit 1; fi; if [ "$body" = poison ]; then echo "poisoned attempt $SQLMQ_ATTEMPT" >&2; exit 2; fi; {RECORD_INLINE}"#,
        RECORD_INLINE = r#"printf '%s %s %s\n' "$SQLMQ_PARTITION" "$SQLMQ_OFFSET" "$body" >> "$SQLMQ_MEMBER.log""#
    );
    let m1 = member(&db, "m1", &picky, &["-n", "6"]);
    let m2 = member(&db, "m2", RECORD, &["-n", "6"]);
    for running in [m1, m2] {
        let out = running.wait(Duration::from_secs(60));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(lines(&db.path("flaky.count")).len(), 2);
    let m1 = log(&db, "m1");
    let bodies: Vec<&str> = m1.iter().map(|x| x.2.as_str()).collect();
    let at = |b: &str| bodies.iter().position(|x| *x == b).unwrap();
    // Partition 1 went on while "flaky" waited out its backoff; "after" waited for it.
    assert!(at("p1-2") < at("flaky"), "{bodies:?}");
    assert!(at("flaky") < at("after"), "{bodies:?}");
    assert!(!bodies.contains(&"poison"));
    assert_eq!(log(&db, "m2").len(), 6, "m2 ran everything");

    let dead = db.json(&["dlq", "list", "t", "--group", "g", "--json"]);
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["member"], "m1");
    assert_eq!(dead[0]["id"], poison_id.as_str());
    assert_eq!(
        (dead[0]["partition"].clone(), dead[0]["offset"].clone()),
        (Value::from(0), Value::from(1))
    );
    assert_eq!(dead[0]["attempts"], 3);
    let last = dead[0]["errors"].as_array().unwrap().last().unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(last.contains("poisoned attempt 3"), "{last}");
    assert!(
        db.json(&[
            "dlq", "list", "t", "--group", "g", "--member", "m2", "--json"
        ])
        .as_array()
        .unwrap()
        .is_empty()
    );
    let trace = db.ok(&["trace", "t", &poison_id]);
    assert!(trace.contains("dead letter of m1"), "{trace}");
    db.fails(
        &["dlq", "redrive", "t", "--group", "g", "--all"],
        1,
        "broadcast group",
    );
    let purged = db.ok(&[
        "dlq", "purge", "t", "--group", "g", "--member", "m1", "--yes",
    ]);
    assert!(purged.contains("deleted 1"), "{purged}");
}

/// Guarantee: SIGTERM lets a member's running command finish, checkpoints and exits 0; the
/// restarted member does not run that record again.
#[test]
fn sigterm_lets_the_running_command_finish_and_checkpoints() {
    let db = TestDb::new();
    setup(&db, 1, sqlmq::GroupConfig::broadcast());
    db.ok(&["publish", "t", "slow"]);
    let slow = format!("touch started; sleep 1; {RECORD}");
    let m = member(&db, "m", &slow, &[]);
    eventually(Duration::from_secs(30), "the command starts", || {
        db.path("started").exists().then_some(())
    });
    m.signal(libc::SIGTERM);
    let out = m.wait(Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log(&db, "m").len(), 1, "the running command finished");
    db.ok(&["publish", "t", "next"]);
    let out = member(&db, "m", RECORD, &["-n", "1"]).wait(Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bodies: Vec<String> = log(&db, "m").into_iter().map(|x| x.2).collect();
    assert_eq!(
        bodies,
        ["slow", "next"],
        "resumed after the finished record"
    );
}

/// Guarantee: one `consume` process serves several queues; SQLMQ_QUEUE tells the command
/// which.
#[test]
fn one_consume_process_serves_several_queues() {
    let db = TestDb::new();
    for q in ["emails", "sms"] {
        db.ok(&["queue", "create", q]);
    }
    for i in 0..5 {
        db.ok(&["send", "emails", &format!("e{i}")]);
        db.ok(&["send", "sms", &format!("s{i}")]);
    }
    let out = db
        .spawn(&[
            "consume",
            "emails",
            "sms",
            "--exec",
            r#"printf '%s %s\n' "$SQLMQ_QUEUE" "$(cat)" >> seen"#,
            "--exit-when-empty",
        ])
        .wait(Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("emails, sms"), "{stderr}");
    let mut seen = lines(&db.path("seen"));
    seen.sort();
    let mut expect: Vec<String> = (0..5)
        .flat_map(|i| [format!("emails e{i}"), format!("sms s{i}")])
        .collect();
    expect.sort();
    assert_eq!(seen, expect);
    db.fails(
        &["consume", "emails", "emails", "--exec", "true"],
        2,
        "named twice",
    );
}
