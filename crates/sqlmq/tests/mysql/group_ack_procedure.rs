//! The ack of one cluster-group receipt as one statement (`CALL sqlmq_ack_group_one`,
//! migration 11): in a transaction of its own and in the caller's (a job transaction), what it
//! records in the record's history against what the statements it replaces record, a receipt
//! that lost its lease, a rollback, the statements where the procedure is missing, and a
//! worker's job transactions on many slots at once.

use std::time::Duration;

use sqlmq::inspect::TraceState;
use sqlmq::topic::StartAt;
use sqlmq::worker::CancellationToken;
use sqlmq::{
    Delivery, Error, Group, GroupConfig, JobContext, MySql, Outcome, Record, Topic, TopicConfig,
    Worker,
};
use sqlmq_testkit::TestDb;

use crate::questions::{between, counted, statements};

const LEASE: Duration = Duration::from_secs(30);

/// A one-partition topic of `n` sequenced records and a cluster group reading it from the
/// start.
async fn topic_with_group(client: &sqlmq::Client<MySql>, n: usize) -> (Topic<MySql>, Group<MySql>) {
    let t = client
        .create_topic("t", TopicConfig::default().partitions(1))
        .await
        .unwrap();
    t.publish_batch((0..n).map(|i| Record::new(format!("r{i}"))).collect())
        .await
        .unwrap();
    t.sequence().await.unwrap();
    let g = t
        .create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    (t, g)
}

async fn one(g: &Group<MySql>, lease: Duration) -> Delivery {
    let mut got = g.receive(1, lease).await.unwrap();
    assert_eq!(got.len(), 1);
    got.pop().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_group_ack_is_one_statement_and_records_what_the_statements_record() {
    let (db, client, _q) = counted().await;
    let (t, g) = topic_with_group(&client, 4).await;
    // Once for the statements to be prepared.
    let warm = one(&g, LEASE).await;
    g.ack(warm.receipt()).await.unwrap();

    let by_call = one(&g, LEASE).await;
    let before = statements(&client).await;
    let reading = between(&before, &statements(&client).await);
    let before = statements(&client).await;
    g.ack(by_call.receipt()).await.unwrap();
    let call = between(&before, &statements(&client).await) - reading;
    // START TRANSACTION, the CALL, COMMIT.
    assert_eq!(call, 3, "statements of a lone group ack");

    db.exec("DROP PROCEDURE sqlmq_ack_group_one", &[]).await;
    let by_statements = one(&g, LEASE).await;
    g.ack(by_statements.receipt()).await.unwrap();
    let by_statements_too = one(&g, LEASE).await;
    let before = statements(&client).await;
    g.ack(by_statements_too.receipt()).await.unwrap();
    let without = between(&before, &statements(&client).await) - reading;
    // START TRANSACTION, the lease locked, deleted, the history written, COMMIT.
    assert_eq!(
        without, 5,
        "statements of a lone group ack without the procedure"
    );
    assert_eq!(db.count("group_leases").await, 0);

    // The same history either way: acked, one event with the member, both times and the
    // outcome.
    let mut seen = Vec::new();
    for d in [&by_call, &by_statements] {
        let trace = t.trace(d.id).await.unwrap().unwrap();
        let group = trace
            .groups
            .iter()
            .find(|x| x.group == "g")
            .unwrap()
            .clone();
        assert!(matches!(group.state, TraceState::Acked { .. }), "{group:?}");
        assert_eq!(group.attempts, 1, "{group:?}");
        let [event] = &group.events[..] else {
            panic!("one event: {group:?}")
        };
        assert_eq!((event.attempt, event.outcome.as_str()), (1, "acked"));
        assert_eq!(event.error, None);
        for time in [&event.delivered_at, &event.at] {
            humantime::parse_rfc3339(time).unwrap_or_else(|e| panic!("{time}: {e}"));
        }
        assert!(event.delivered_at <= event.at, "{event:?}");
        seen.push(event.member.clone());
    }
    assert!(seen[0].is_some());
    assert_eq!(seen[0], seen[1], "the same member recorded either way");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_group_ack_procedure_refuses_a_lost_lease_and_rolls_back_with_the_callers_transaction()
{
    let (db, client, _q) = counted().await;
    let (t, g) = topic_with_group(&client, 2).await;

    // A lease that ended: nothing written, the ack reports it lost.
    let late = one(&g, Duration::from_millis(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let err = g.ack(late.receipt()).await.unwrap_err();
    assert!(
        matches!(err, Error::LeaseLost { id, .. } if id == late.id),
        "{err}"
    );
    assert_eq!(
        db.count("group_leases").await,
        1,
        "still leased, until released"
    );
    assert_eq!(db.count("group_history").await, 0);

    // In the caller's transaction: rolled back with it, then committed with it.
    let d = one(&g, LEASE).await;
    let mut tx = client.begin().await.unwrap();
    g.ack_in(&mut tx, d.receipt()).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(
        db.count("group_leases").await,
        2,
        "the rolled-back ack left the lease"
    );
    let mut tx = client.begin().await.unwrap();
    g.ack_in(&mut tx, d.receipt()).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(db.count("group_leases").await, 1);
    let trace = t.trace(d.id).await.unwrap().unwrap();
    assert!(matches!(trace.groups[0].state, TraceState::Acked { .. }));
    // A second ack of the same receipt: its lease is gone.
    let mut tx = client.begin().await.unwrap();
    assert!(matches!(
        g.ack_in(&mut tx, d.receipt()).await,
        Err(Error::LeaseLost { .. })
    ));
    tx.rollback().await.unwrap();
    db.drop().await;
}

/// A worker's job transactions on many slots at once, each acking while the others hold
/// leases: none may wait for another's lease, so none deadlocks. (A first version of the
/// procedure deleted the lease without forcing the primary key; the optimizer took the expiry
/// index for the procedure's parameters, locked the group's other leases on the way, and two
/// acks deadlocked: the pipeline's job transaction failed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn job_transactions_of_many_slots_at_once_do_not_deadlock() {
    const CONSUMERS: usize = 16;
    const RECORDS: usize = 3000;
    let db = TestDb::<MySql>::new().await;
    db.migrate().await;
    let client = sqlmq::Client::builder()
        .max_connections(CONSUMERS as u32 + 2)
        .open::<MySql>(&db.url)
        .await
        .unwrap();
    let t = client
        .create_topic("t", TopicConfig::default().partitions(8))
        .await
        .unwrap();
    for chunk in 0..RECORDS / 1000 {
        t.publish_batch(
            (0..1000)
                .map(|i| Record::new(format!("r{chunk}.{i}")).key(format!("k{i}")))
                .collect(),
        )
        .await
        .unwrap();
    }
    t.sequence().await.unwrap();
    t.create_group("g", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    db.exec(
        "CREATE TABLE effects (id CHAR(36) NOT NULL PRIMARY KEY)",
        &[],
    )
    .await;
    // Job transactions, as a pipeline's: the handler's write and the ack commit together.
    let handler = |d: Delivery, ctx: JobContext<MySql>| async move {
        let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
        sqlx::query("INSERT INTO effects (id) VALUES (?)")
            .bind(d.id.to_string())
            .execute(&mut *tx)
            .await
            .map_err(|e| e.to_string())?;
        tx.commit().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(Outcome::Done)
    };
    let report = Worker::builder(&client)
        .topic_group_raw("t", "g", handler)
        .concurrency(CONSUMERS)
        .stop_when_drained()
        .run(CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(report.acked, RECORDS as u64, "{report:?}");
    assert_eq!(report.retried, 0, "no job transaction failed: {report:?}");
    let effects: i64 = db.scalar("SELECT COUNT(*) FROM effects").await;
    assert_eq!(effects, RECORDS as i64);
    assert_eq!(db.count("group_leases").await, 0);
    client.pool().close().await;
    db.drop().await;
}
