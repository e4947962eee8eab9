//! Least privilege: everyday use needs data statements on sqlmq's tables only; creating the
//! schema needs the migration user. The whole suite runs as a per-database user without DDL
//! rights (see `sqlmq-testkit`); this file checks the exact GRANTs the guide documents and the
//! error a runtime user gets from `migrate`.

use std::time::Duration;

use sqlmq::admin::GrantRole;
use sqlmq::topic::StartAt;
use sqlmq::{Client, Error, GroupConfig, Message, MySql, QueueConfig, Record, TopicConfig};
use sqlmq_testkit::{TestDb, admin};

const LEASE: Duration = Duration::from_secs(30);

/// A user of its own for this test, dropped at the end (also when the test fails).
struct User(String);

impl User {
    async fn create(db: &TestDb<MySql>) -> User {
        let name = format!("sqlmq_u_{:08x}", rand::random::<u32>());
        db.exec(&format!("CREATE USER '{name}'@'%' IDENTIFIED BY 'pw'"), &[])
            .await;
        User(name)
    }

    /// `url` as this user.
    fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        format!("{scheme}://{}:pw@{host}", self.0)
    }

    async fn grant(&self, db: &TestDb<MySql>, statements: &[String]) {
        for grant in statements {
            db.exec(grant, &[]).await;
        }
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // `admin` blocks on a runtime of its own: not on a thread that drives this test's.
        let sql = format!("DROP USER IF EXISTS '{}'@'%'", self.0);
        std::thread::spawn(move || admin(&sql)).join().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_as_a_user_without_ddl_rights_names_the_missing_privilege() {
    let db = TestDb::<MySql>::new().await;
    let runtime = Client::<MySql>::open(&db.url).await.unwrap();
    match runtime.migrate().await {
        Err(Error::PermissionDenied { needs, source }) => {
            let message = source.to_string();
            assert!(message.contains("CREATE command denied"), "{message}");
            assert!(
                needs.contains("migrate") && needs.contains("CREATE"),
                "{needs}"
            );
        }
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
    assert!(db.tables().await.is_empty(), "nothing half-created");
    // Once the migration user has done its job, the runtime user's `migrate` (which many
    // applications call at start-up) is a no-op that needs no DDL right.
    db.migrate().await;
    let report = runtime.migrate().await.unwrap();
    assert!(report.applied.is_empty());
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_grants_suffice_for_migrating_and_for_everyday_use() {
    let db = TestDb::<MySql>::new().await;
    let admin_client = Client::<MySql>::open(&db.admin_url).await.unwrap();

    // The migration user: exactly the printed grants, then `migrate` creates the schema.
    let migrator = User::create(&db).await;
    let grants = admin_client
        .grants(GrantRole::Migration, &migrator.0, "%")
        .await
        .unwrap();
    migrator.grant(&db, &grants).await;
    let report = Client::<MySql>::open(&migrator.url(&db.admin_url))
        .await
        .unwrap()
        .migrate()
        .await
        .unwrap();
    assert_eq!(report.from_version, 0);

    // The runtime user: data statements on sqlmq's tables, one GRANT per table, nothing else.
    let app = User::create(&db).await;
    let grants = admin_client
        .grants(GrantRole::Runtime, &app.0, "%")
        .await
        .unwrap();
    assert!(
        grants
            .iter()
            .all(|g| !g.contains("CREATE") && !g.contains(".*"))
    );
    app.grant(&db, &grants).await;
    let shown = db
        .query(&format!("SHOW GRANTS FOR '{}'@'%'", app.0), &[])
        .await
        .iter()
        .map(|row| row[0].text())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !shown.contains("CREATE") && !shown.contains("ALTER"),
        "{shown}"
    );
    // The library's own lone send, claim, lone ack and lone group ack call its procedures; the
    // SQL contract's ack is the application's.
    for procedure in [
        "sqlmq_send_plain",
        "sqlmq_claim_plain",
        "sqlmq_claim_timed",
        "sqlmq_claim_vt",
        "sqlmq_ack_plain",
        "sqlmq_ack_group_one",
        "sqlmq_ack",
    ] {
        assert!(shown.contains(&format!("`{procedure}`")), "{shown}");
    }

    let client = Client::<MySql>::builder()
        .housekeeping_interval(Duration::from_millis(20))
        .open::<MySql>(&app.url(&db.url))
        .await
        .unwrap();
    client.migrate().await.unwrap();
    everyday_use(&client).await;
    db.drop().await;
}

/// Queues (send, batches, delays, keys, idempotency, claim, ack, nack, dead letters, redrive,
/// stats, maintenance) and topics (publish, sequencing, cluster and broadcast groups,
/// checkpoints, lag, trace, retention).
async fn everyday_use(client: &Client<MySql>) {
    let q = client
        .create_queue("jobs", QueueConfig::default().max_attempts(1))
        .await
        .unwrap();
    q.send(Message::new("a").idempotency_key("k1"))
        .await
        .unwrap();
    q.send(Message::new("b").ordering_key("user-1"))
        .await
        .unwrap();
    q.send(Message::new("c").delay(Duration::from_millis(50)))
        .await
        .unwrap();
    q.send_batch(vec![Message::new("d"), Message::new("e")])
        .await
        .unwrap();
    // Another service's send (the guide, "Sending from SQL"): EXECUTE is among the grants.
    let (_, _, duplicate): (Vec<u8>, String, i64) =
        sqlx::query_as("CALL sqlmq_send('jobs', 'f', NULL, NULL, NULL, NULL, NULL, NULL)")
            .fetch_one(client.pool())
            .await
            .unwrap();
    assert_eq!(duplicate, 0);
    let mut seen = 0;
    let mut failed = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen < 6 {
        assert!(
            std::time::Instant::now() < deadline,
            "every message delivered"
        );
        for d in q.receive(10, LEASE).await.unwrap() {
            seen += 1;
            if failed.is_none() {
                failed = Some(d.id);
                q.nack(d.receipt(), None, "boom").await.unwrap();
            } else {
                q.ack(d.receipt()).await.unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dead = q.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(q.redrive(&[failed.unwrap()]).await.unwrap().len(), 1);
    let again = q.receive(10, LEASE).await.unwrap();
    assert_eq!(again.len(), 1);
    q.ack(again[0].receipt()).await.unwrap();
    q.stats().await.unwrap();
    q.maintain().await.unwrap();
    client.queue_stats().await.unwrap();

    let t = client
        .create_topic("events", TopicConfig::default().partitions(2))
        .await
        .unwrap();
    let g = t
        .create_group("billing", GroupConfig::default(), StartAt::Earliest)
        .await
        .unwrap();
    let b = t
        .create_group("cache", GroupConfig::broadcast(), StartAt::Earliest)
        .await
        .unwrap();
    for i in 0..10 {
        t.publish(Record::new(format!("r{i}")).key(format!("k{i}")))
            .await
            .unwrap();
    }
    t.sequence().await.unwrap();
    let mut acked = 0;
    while acked < 10 {
        let batch = g.receive(10, LEASE).await.unwrap();
        assert!(!batch.is_empty());
        let receipts: Vec<_> = batch.iter().map(|d| d.receipt()).collect();
        acked += g.ack_batch(&receipts).await.unwrap().acked;
    }
    let first = t.query_key("k1", 10).await.unwrap();
    assert_eq!(first.len(), 1);
    t.trace(first[0].id).await.unwrap();
    let mut reader = b.reader("m1").await.unwrap();
    assert_eq!(reader.poll(100).await.unwrap().len(), 10);
    reader.checkpoint().await.unwrap();
    assert_eq!(g.lag().await.unwrap().unconsumed, 0);
    t.apply_retention().await.unwrap();
    g.maintain().await.unwrap();
}
