//! Batches, dependencies and results (`Batch`, `Message::depends_on`, `ack_with_result`):
//! every callback sent exactly once, by the end that finishes its batch, never before; a step
//! runs only after its dependencies were acked and reads their results; a dead dependency
//! holds its dependants until redriven, a cancelled one cancels them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlmq::flow::{BATCH_HEADER, Batch, BatchState, StepState};
use sqlmq::topic::StartAt;
use sqlmq::worker::CancellationToken;
use sqlmq::{
    Client, Delivery, Error, GroupConfig, JobContext, Message, MessageId, Outcome, QueueConfig,
    Record, TopicConfig, Worker,
};
use sqlmq_testkit::{TestBackend, TestDb, check_invariants, eventually_async};

const LEASE: Duration = Duration::from_secs(30);

async fn setup<B: TestBackend>(queues: &[(&str, QueueConfig)]) -> (TestDb<B>, Client<B>) {
    let db = TestDb::<B>::new().await;
    let client = db.client().await;
    for (name, config) in queues {
        client.create_queue(name, config.clone()).await.unwrap();
    }
    (db, client)
}

/// A worker on queue "q" of `client` acking every message but those whose body is "poison"
/// (failed), after `pause`; counts what it handled.
fn worker<B: TestBackend>(
    client: &Client<B>,
    handled: &Arc<Mutex<Vec<MessageId>>>,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<sqlmq::Result<sqlmq::worker::WorkerReport>> {
    let handled = handled.clone();
    let run = Worker::builder(client)
        .queue_raw("q", move |d: Delivery, _ctx: JobContext<B>| {
            let handled = handled.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                if d.body == b"poison" {
                    return Err("poisoned".to_owned());
                }
                handled.lock().unwrap().push(d.id);
                Ok(Outcome::Done)
            }
        })
        .concurrency(8)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .run(stop.clone());
    tokio::spawn(run)
}

/// Every message of queue `name`, received and acked until `quiet` passes without one.
async fn drain<B: TestBackend>(client: &Client<B>, name: &str, quiet: Duration) -> Vec<Delivery> {
    let q = client.queue(name).await.unwrap();
    let mut got = Vec::new();
    let mut last = tokio::time::Instant::now();
    while last.elapsed() < quiet {
        let batch = q.receive(10, LEASE).await.unwrap();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        last = tokio::time::Instant::now();
        for d in batch {
            q.ack(d.receipt()).await.unwrap();
            got.push(d);
        }
    }
    got
}

pub(crate) async fn batches_are_listed_unfinished_first_then_the_latest_finished<B: TestBackend>() {
    let (db, client) = setup::<B>(&[("q", QueueConfig::default())]).await;
    // Two finished (the second later), one sealed with a member pending, two open.
    let mut finished = Vec::new();
    for _ in 0..2 {
        let b = Batch::new().add("q", Message::new("x"));
        finished.push(client.create_batch(b).await.unwrap().id);
        let got = drain(&client, "q", Duration::from_millis(200)).await;
        assert_eq!(got.len(), 1);
    }
    let sealed = client
        .create_batch(Batch::new().add("q", Message::new("pending")))
        .await
        .unwrap()
        .id;
    let open: Vec<_> = [0, 1].iter().map(|_| Batch::new().open()).collect();
    let mut opened = Vec::new();
    for b in open {
        opened.push(client.create_batch(b).await.unwrap().id);
    }
    let ids = |list: &[sqlmq::flow::BatchStatus]| list.iter().map(|b| b.id).collect::<Vec<_>>();
    let all = client.batches(None, 100).await.unwrap();
    assert_eq!(
        ids(&all),
        vec![opened[1], opened[0], sealed, finished[1], finished[0]],
        "open (newest first), sealed, then finished (latest end first)"
    );
    assert!(all.iter().all(|b| b.steps.is_empty()));
    let s = &all[2];
    assert_eq!(
        (s.state, s.members, s.pending, s.succeeded),
        (BatchState::Sealed, 1, 1, 0)
    );
    let f = &all[3];
    assert_eq!(
        (f.state, f.members, f.succeeded),
        (BatchState::Finished, 1, 1)
    );
    assert!(f.finished_at.is_some());
    assert_eq!(
        ids(&client.batches(None, 3).await.unwrap()),
        vec![opened[1], opened[0], sealed]
    );
    let done = client.batches(Some(BatchState::Finished), 1).await.unwrap();
    assert_eq!(ids(&done), vec![finished[1]]);
    let only_open = client.batches(Some(BatchState::Open), 10).await.unwrap();
    assert_eq!(ids(&only_open), vec![opened[1], opened[0]]);
    for bad in [0, 1001] {
        assert!(matches!(
            client.batches(None, bad).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    db.drop().await;
}

pub(crate) async fn on_success_is_sent_once_after_the_last_ack_across_clients<B: TestBackend>() {
    let (db, client) = setup::<B>(&[
        ("q", QueueConfig::default()),
        ("done", QueueConfig::default()),
    ])
    .await;
    const MEMBERS: usize = 300;
    let mut batch = Batch::new().on_success("done", Message::new("all thumbnails made"));
    for i in 0..MEMBERS {
        batch = batch.add("q", Message::new(format!("photo-{i}")));
    }
    let created = client.create_batch(batch).await.unwrap();
    assert_eq!(created.members.len(), MEMBERS);
    let status = client.batch(created.id).await.unwrap();
    assert_eq!(
        (status.state, status.members, status.pending),
        (BatchState::Sealed, MEMBERS as u64, MEMBERS as u64)
    );

    // Three clients handle the members; a fourth watches for the callback and checks, when
    // it arrives, that every member was acked before it.
    let handled = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let mut clients = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let c = db.client().await;
        runs.push(worker(&c, &handled, &stop));
        clients.push(c);
    }
    let done = client.queue("done").await.unwrap();
    let callback = loop {
        let got = done.receive(10, LEASE).await.unwrap();
        if let Some(d) = got.into_iter().next() {
            let status = client.batch(created.id).await.unwrap();
            assert_eq!(status.state, BatchState::Finished, "{status:?}");
            assert_eq!(
                (status.succeeded, status.pending),
                (MEMBERS as u64, 0),
                "sent before the last ack"
            );
            break d;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(callback.body, b"all thumbnails made");
    assert_eq!(
        callback.headers.get(BATCH_HEADER),
        Some(&created.id.to_string())
    );
    done.ack(callback.receipt()).await.unwrap();
    assert!(
        drain(&client, "done", Duration::from_millis(500))
            .await
            .is_empty(),
        "sent twice"
    );
    stop.cancel();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    let mut ids = handled.lock().unwrap().clone();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), MEMBERS);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_poison_member_sends_on_failure_and_on_complete_once<B: TestBackend>() {
    let (db, client) = setup::<B>(&[
        ("q", QueueConfig::default().max_attempts(1)),
        ("ok", QueueConfig::default()),
        ("fail", QueueConfig::default()),
        ("all", QueueConfig::default()),
    ])
    .await;
    let mut batch = Batch::new()
        .on_success("ok", Message::new("ok"))
        .on_failure("fail", Message::new("fail"))
        .on_complete("all", Message::new("all"));
    for i in 0..30 {
        let body = if i == 17 {
            "poison".to_owned()
        } else {
            format!("m{i}")
        };
        batch = batch.add("q", Message::new(body));
    }
    let created = client.create_batch(batch).await.unwrap();
    let handled = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let runs = [
        worker(&client, &handled, &stop),
        worker(&db.client().await, &handled, &stop),
    ];
    eventually_async(Duration::from_secs(30), "the batch finishes", || async {
        (client.batch(created.id).await.unwrap().state == BatchState::Finished).then_some(())
    })
    .await;
    stop.cancel();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    let status = client.batch(created.id).await.unwrap();
    assert_eq!(
        (
            status.succeeded,
            status.dead,
            status.cancelled,
            status.pending
        ),
        (29, 1, 0, 0)
    );
    let quiet = Duration::from_millis(300);
    assert!(
        drain(&client, "ok", quiet).await.is_empty(),
        "on_success sent though a member died"
    );
    assert_eq!(drain(&client, "fail", quiet).await.len(), 1);
    assert_eq!(drain(&client, "all", quiet).await.len(), 1);
    let by_role: HashMap<_, _> = status.steps.iter().map(|s| (s.role, s.state)).collect();
    assert_eq!(by_role[&sqlmq::flow::Role::OnSuccess], StepState::Cancelled);
    // A dead member redriven after the batch finished runs as a plain message: the counts and
    // the callbacks stay as they were.
    let q = client.queue("q").await.unwrap();
    assert_eq!(q.redrive_all().await.unwrap(), 1);
    let d = q.receive(1, LEASE).await.unwrap().remove(0);
    q.ack(d.receipt()).await.unwrap();
    let after = client.batch(created.id).await.unwrap();
    assert_eq!((after.succeeded, after.dead), (29, 1));
    assert!(drain(&client, "all", quiet).await.is_empty());
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn members_added_while_running_are_waited_for<B: TestBackend>() {
    let (db, client) = setup::<B>(&[
        ("q", QueueConfig::default()),
        ("done", QueueConfig::default()),
    ])
    .await;
    let mut batch = Batch::new()
        .open()
        .on_complete("done", Message::new("done"));
    for i in 0..5 {
        batch = batch.add("q", Message::new(format!("gen0-{i}")));
    }
    let created = client.create_batch(batch).await.unwrap();
    let id = created.id;
    // Each first-generation member fans out two more into its own batch, in the transaction
    // of its ack.
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let seen = acked.clone();
    let run = tokio::spawn(
        Worker::builder(&client)
            .queue_raw("q", move |d: Delivery, ctx: JobContext<B>| {
                let seen = seen.clone();
                async move {
                    let client = ctx.queue().unwrap().client().clone();
                    // The add and the ack commit together.
                    let mut tx = ctx.begin().await.map_err(|e| e.to_string())?;
                    if d.body.starts_with(b"gen0") {
                        let more = vec![Message::new("gen1"), Message::new("gen1")];
                        client
                            .add_to_batch_in(&mut tx, id, "q", more)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    tx.commit().await.map_err(|e| e.to_string())?;
                    seen.lock().unwrap().push(d.id);
                    Ok::<_, String>(Outcome::Done)
                }
            })
            .concurrency(4)
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .run(stop.clone()),
    );
    eventually_async(Duration::from_secs(30), "the members fan out", || async {
        (client.batch(id).await.unwrap().members == 15).then_some(())
    })
    .await;
    let done = client.queue("done").await.unwrap();
    assert!(
        done.receive(1, LEASE).await.unwrap().is_empty(),
        "finished while open"
    );
    client.seal_batch(id).await.unwrap();
    assert!(matches!(
        client.add_to_batch(id, "q", vec![Message::new("late")]).await,
        Err(Error::BatchSealed(b)) if b == id
    ));
    eventually_async(Duration::from_secs(30), "the batch finishes", || async {
        (client.batch(id).await.unwrap().state == BatchState::Finished).then_some(())
    })
    .await;
    stop.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(acked.lock().unwrap().len(), 15);
    let status = client.batch(id).await.unwrap();
    assert_eq!((status.members, status.succeeded), (15, 15));
    assert_eq!(
        drain(&client, "done", Duration::from_millis(300))
            .await
            .len(),
        1
    );
    assert!(matches!(
        client.seal_batch(sqlmq::flow::BatchId::new()).await,
        Err(Error::BatchNotFound(_))
    ));
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_diamond_runs_each_step_after_its_dependencies_and_reads_their_results<
    B: TestBackend,
>() {
    let (db, client) = setup::<B>(&[
        ("jobs", QueueConfig::default()),
        ("other", QueueConfig::default()),
    ])
    .await;
    const DIAMONDS: usize = 6;
    let mut batches = Vec::new();
    for n in 0..DIAMONDS {
        // b runs on another queue: dependencies cross queues.
        let batch = Batch::new()
            .step("a", "jobs", Message::new(format!("{n}/a")), &[])
            .step("b", "other", Message::new(format!("{n}/b")), &["a"])
            .step("c", "jobs", Message::new(format!("{n}/c")), &["a"])
            .step("d", "jobs", Message::new(format!("{n}/d")), &["b", "c"]);
        batches.push(client.create_batch(batch).await.unwrap());
    }
    let stats = client.queue("jobs").await.unwrap().stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.waiting),
        (DIAMONDS as u64, 2 * DIAMONDS as u64)
    );
    // Four consumers on separate clients. Each step sleeps before its ack, so a step delivered
    // before its dependencies' acks committed would find one of their results missing: the
    // results are written in the transactions of those acks.
    let inputs = Arc::new(Mutex::new(HashMap::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (c, inputs) = (db.client().await, inputs.clone());
        tasks.push(tokio::spawn(async move {
            let queues = [
                c.queue("jobs").await.unwrap(),
                c.queue("other").await.unwrap(),
            ];
            let mut idle = 0;
            while idle < 100 {
                let q = &queues[(i + idle) % 2];
                let Some(d) = q.receive(1, LEASE).await.unwrap().pop() else {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                idle = 0;
                let step = String::from_utf8(d.body.clone()).unwrap();
                let deps = c.dependency_results(d.id).await.unwrap();
                inputs.lock().unwrap().insert(step.clone(), deps);
                tokio::time::sleep(Duration::from_millis(20)).await;
                q.ack_with_result(d.receipt(), format!("result of {step}"))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let inputs = std::mem::take(&mut *inputs.lock().unwrap());
    for (n, b) in batches.iter().enumerate() {
        let s = |x: &str| format!("{n}/{x}");
        let read = |step: &str| -> Vec<(Option<String>, Option<String>)> {
            let mut got: Vec<_> = inputs[&s(step)]
                .iter()
                .map(|r| {
                    let result = r.result.clone().map(|b| String::from_utf8(b).unwrap());
                    (r.step.clone(), result)
                })
                .collect();
            got.sort();
            got
        };
        let result = |x: &str| Some(format!("result of {}", s(x)));
        assert!(read("a").is_empty());
        assert_eq!(read("b"), [(Some("a".into()), result("a"))]);
        assert_eq!(read("c"), [(Some("a".into()), result("a"))]);
        assert_eq!(
            read("d"),
            [
                (Some("b".into()), result("b")),
                (Some("c".into()), result("c"))
            ]
        );
        let status = client.batch(b.id).await.unwrap();
        assert_eq!((status.state, status.succeeded), (BatchState::Finished, 4));
        let d = status.steps.iter().find(|x| x.step.as_deref() == Some("d"));
        assert_eq!(d.unwrap().depends_on.len(), 2);
        let kept = client.result(b.steps["d"]).await.unwrap();
        assert_eq!(kept, result("d").map(String::into_bytes));
    }
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_dead_dependency_holds_and_a_cancelled_one_cancels_its_dependants<
    B: TestBackend,
>() {
    let (db, client) = setup::<B>(&[
        ("q", QueueConfig::default().max_attempts(1)),
        ("end", QueueConfig::default()),
    ])
    .await;
    let q = client.queue("q").await.unwrap();
    let batch = Batch::new()
        .step("b", "q", Message::new("b"), &[])
        .step("d", "q", Message::new("d"), &["b"])
        .step("x", "q", Message::new("x"), &[])
        .step("y", "q", Message::new("y"), &["x"])
        .step("z", "q", Message::new("z"), &["y"])
        .on_success("end", Message::new("success"))
        .on_failure("end", Message::new("failure"));
    let created = client.create_batch(batch).await.unwrap();
    let state = |status: &sqlmq::flow::BatchStatus, step: &str| {
        status
            .steps
            .iter()
            .find(|s| s.step.as_deref() == Some(step))
            .unwrap()
            .state
    };
    // b dies: d is held.
    let mut first = q.receive(10, LEASE).await.unwrap();
    first.sort_by(|a, b| a.body.cmp(&b.body));
    assert_eq!(
        first.iter().map(|d| d.body.as_slice()).collect::<Vec<_>>(),
        [b"b", b"x"]
    );
    q.nack(first[0].receipt(), None, "boom").await.unwrap();
    let status = client.batch(created.id).await.unwrap();
    assert_eq!(
        (state(&status, "b"), state(&status, "d")),
        (StepState::Dead, StepState::Held)
    );
    assert!(
        q.receive(10, LEASE).await.unwrap().is_empty(),
        "a held step was delivered"
    );
    // y waits for x (in flight); cancelling y cancels z, which waits for y.
    q.cancel(created.steps["y"]).await.unwrap();
    let status = client.batch(created.id).await.unwrap();
    assert_eq!(
        (state(&status, "y"), state(&status, "z")),
        (StepState::Cancelled, StepState::Cancelled)
    );
    assert_eq!(status.cancelled, 2);
    q.ack(first[1].receipt()).await.unwrap();
    // Redrive b: it runs again, and its ack releases d.
    assert_eq!(q.redrive(&[created.steps["b"]]).await.unwrap().len(), 1);
    assert_eq!(
        state(&client.batch(created.id).await.unwrap(), "d"),
        StepState::Waiting
    );
    let b = q.receive(10, LEASE).await.unwrap();
    assert_eq!(b.len(), 1);
    q.ack(b[0].receipt()).await.unwrap();
    let d = q.receive(10, LEASE).await.unwrap();
    assert_eq!(
        d.iter().map(|d| d.body.as_slice()).collect::<Vec<_>>(),
        [b"d"]
    );
    q.ack(d[0].receipt()).await.unwrap();
    let status = client.batch(created.id).await.unwrap();
    assert_eq!(
        (
            status.state,
            status.succeeded,
            status.dead,
            status.cancelled
        ),
        (BatchState::Finished, 3, 0, 2)
    );
    let end: Vec<Vec<u8>> = drain(&client, "end", Duration::from_millis(300))
        .await
        .into_iter()
        .map(|d| d.body)
        .collect();
    assert_eq!(end, [b"failure".to_vec()]);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn depends_on_tracks_stored_messages_wherever_they_are<B: TestBackend>() {
    let (db, client) = setup::<B>(&[
        ("a", QueueConfig::default()),
        ("b", QueueConfig::default().max_attempts(1)),
    ])
    .await;
    let (qa, qb) = (
        client.queue("a").await.unwrap(),
        client.queue("b").await.unwrap(),
    );
    // Plain messages, sent before anything depends on them: one ready, one in flight, one
    // keyed behind another, one dead.
    let ready = qa.send(Message::new("ready")).await.unwrap().id;
    let leased_id = qa.send(Message::new("leased")).await.unwrap().id;
    let mut leased = qa.receive(2, LEASE).await.unwrap();
    leased.sort_by_key(|d| d.id);
    assert_eq!(leased.len(), 2);
    let ready_again = leased.iter().find(|d| d.id == ready).unwrap().clone();
    qa.nack(ready_again.receipt(), Some(Duration::ZERO), "back in line")
        .await
        .unwrap();
    let head = qb
        .send(Message::new("head").ordering_key("k"))
        .await
        .unwrap()
        .id;
    let behind = qb
        .send(Message::new("behind").ordering_key("k"))
        .await
        .unwrap()
        .id;
    let doomed = qb.send(Message::new("doomed")).await.unwrap().id;
    let mut got = qb.receive(10, LEASE).await.unwrap();
    got.sort_by_key(|d| d.id);
    let doomed_d = got.iter().find(|d| d.id == doomed).unwrap();
    qb.nack(doomed_d.receipt(), None, "dies").await.unwrap();
    // Dependants of each.
    let on_ready = qb
        .send(Message::new("after ready").depends_on([ready]))
        .await
        .unwrap()
        .id;
    let on_leased = qb
        .send(Message::new("after leased").depends_on([leased_id]))
        .await
        .unwrap()
        .id;
    let on_behind = qb
        .send(Message::new("after behind").depends_on([behind, head]))
        .await
        .unwrap()
        .id;
    let on_dead = qb
        .send(Message::new("after dead").depends_on([doomed]))
        .await
        .unwrap()
        .id;
    assert_eq!(qb.stats().await.unwrap().waiting, 4);
    // Unknown ids, and ids of acked untracked messages, are refused; nothing is written.
    let unknown = MessageId::new();
    assert!(matches!(
        qb.send(Message::new("x").depends_on([unknown])).await,
        Err(Error::DependencyNotFound(id)) if id == unknown
    ));
    assert_eq!(qb.stats().await.unwrap().waiting, 4);
    // The leased one's ack (with the receipt taken before it was tracked) releases its
    // dependant.
    let leased_d = leased.iter().find(|d| d.id == leased_id).unwrap();
    qa.ack_with_result(leased_d.receipt(), "leased done")
        .await
        .unwrap();
    let out = qb.receive(10, LEASE).await.unwrap();
    let bodies: Vec<&[u8]> = out.iter().map(|d| d.body.as_slice()).collect();
    assert!(bodies.contains(&&b"after leased"[..]), "{bodies:?}");
    let after = out.iter().find(|d| d.id == on_leased).unwrap();
    let deps = client.dependency_results(after.id).await.unwrap();
    assert_eq!(deps.len(), 1);
    assert_eq!(deps[0].result.as_deref(), Some(&b"leased done"[..]));
    for d in &out {
        qb.ack(d.receipt()).await.unwrap();
    }
    // The head's ack lets the one behind it in line; that one's ack releases their dependant.
    let head_d = got.iter().find(|d| d.id == head).unwrap();
    qb.ack(head_d.receipt()).await.unwrap();
    let next = qb.receive(10, LEASE).await.unwrap();
    assert_eq!(next.iter().map(|d| d.id).collect::<Vec<_>>(), [behind]);
    assert_eq!(
        qb.stats().await.unwrap().waiting,
        3,
        "released before both were acked"
    );
    qb.ack(next[0].receipt()).await.unwrap();
    // A tracked message acked is a satisfied dependency from then on.
    let late = qb
        .send(Message::new("late").depends_on([leased_id]))
        .await
        .unwrap()
        .id;
    eventually_async(
        Duration::from_secs(10),
        "the ack releases the late one",
        || async {
            (client
                .queue("b")
                .await
                .unwrap()
                .stats()
                .await
                .unwrap()
                .waiting
                == 2)
                .then_some(())
        },
    )
    .await;
    let rest: Vec<MessageId> = drain(&client, "b", Duration::from_millis(200))
        .await
        .iter()
        .map(|d| d.id)
        .collect();
    assert!(
        rest.contains(&on_behind) && rest.contains(&late),
        "{rest:?}"
    );
    // Still waiting: on the ready one (not acked yet) and on the dead one (held).
    assert_eq!(qb.stats().await.unwrap().waiting, 2);
    let mut ra = qa.receive(10, LEASE).await.unwrap();
    ra.retain(|d| d.id == ready);
    qa.ack(ra[0].receipt()).await.unwrap();
    assert_eq!(
        drain(&client, "b", Duration::from_millis(200))
            .await
            .iter()
            .map(|d| d.id)
            .collect::<Vec<_>>(),
        [on_ready]
    );
    // Deleting the dead dependency cancels its dependant.
    qb.cancel(doomed).await.unwrap();
    assert_eq!(qb.stats().await.unwrap().waiting, 0);
    assert!(matches!(
        qb.cancel(on_dead).await,
        Err(Error::MessageNotFound(_))
    ));
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn bad_batches_are_refused_and_write_nothing<B: TestBackend>() {
    let (db, client) = setup::<B>(&[("q", QueueConfig::default())]).await;
    let cycle = Batch::new().step("a", "q", Message::new("a"), &["b"]).step(
        "b",
        "q",
        Message::new("b"),
        &["a"],
    );
    assert!(matches!(
        client.create_batch(cycle).await,
        Err(Error::InvalidArgument(_))
    ));
    let unknown_queue = Batch::new()
        .add("q", Message::new("x"))
        .on_success("nope", Message::new("y"));
    assert!(matches!(
        client.create_batch(unknown_queue).await,
        Err(Error::UnknownQueue(_))
    ));
    // A message twice, or one stored already, would not be a member: refused, nothing written.
    let twice = Message::new("x");
    let same = Batch::new().add("q", twice.clone()).add("q", twice);
    assert!(matches!(
        client.create_batch(same).await,
        Err(Error::InvalidArgument(_))
    ));
    let stored = client
        .queue("q")
        .await
        .unwrap()
        .send(Message::new("s"))
        .await
        .unwrap()
        .id;
    let again = Batch::new()
        .add("q", Message::new("new"))
        .add("q", Message::new("s").with_id(stored));
    let refused = client.create_batch(again.clone()).await;
    assert!(matches!(refused, Err(Error::InvalidArgument(m)) if m.contains("stored already")));
    assert!(matches!(
        client.batch(again.id()).await,
        Err(Error::BatchNotFound(_))
    ));
    client
        .queue("q")
        .await
        .unwrap()
        .cancel(stored)
        .await
        .unwrap();
    let valid = Batch::new()
        .add("q", Message::new("x"))
        .on_success("q", Message::new("y"));
    client.create_batch(valid).await.unwrap();
    let q = client.queue("q").await.unwrap();
    let stats = q.stats().await.unwrap();
    assert_eq!(
        (stats.ready, stats.waiting),
        (1, 1),
        "only the valid batch was written"
    );
    let d = q.receive(1, LEASE).await.unwrap().remove(0);
    assert!(matches!(
        q.ack_with_result(d.receipt(), vec![0u8; sqlmq::flow::MAX_RESULT_BYTES + 1])
            .await,
        Err(Error::PayloadTooLarge { .. })
    ));
    q.ack(d.receipt()).await.unwrap();
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn purges_cancel_what_waits_on_purged_messages<B: TestBackend>() {
    let (db, client) = setup::<B>(&[
        ("q", QueueConfig::default().max_attempts(1)),
        ("other", QueueConfig::default()),
        ("end", QueueConfig::default()),
    ])
    .await;
    let q = client.queue("q").await.unwrap();
    // a, then b after it (both in q), then c in another queue after b.
    let batch = Batch::new()
        .step("a", "q", Message::new("a"), &[])
        .step("b", "q", Message::new("b"), &["a"])
        .step("c", "other", Message::new("c"), &["b"])
        .on_failure("end", Message::new("failure"));
    let created = client.create_batch(batch).await.unwrap();
    q.purge().await.unwrap();
    let status = client.batch(created.id).await.unwrap();
    assert_eq!(
        (status.state, status.cancelled),
        (BatchState::Finished, 3),
        "{status:?}"
    );
    assert_eq!(
        client
            .queue("other")
            .await
            .unwrap()
            .stats()
            .await
            .unwrap()
            .pending(),
        0
    );
    assert_eq!(
        drain(&client, "end", Duration::from_millis(200))
            .await
            .len(),
        1
    );
    // A dead dependency whose dead letter is purged cancels its dependant.
    let dies = q.send(Message::new("dies")).await.unwrap().id;
    let waits = client
        .queue("other")
        .await
        .unwrap()
        .send(Message::new("waits").depends_on([dies]))
        .await
        .unwrap()
        .id;
    let d = q.receive(1, LEASE).await.unwrap().remove(0);
    q.nack(d.receipt(), None, "dies").await.unwrap();
    q.purge_dead_letters().await.unwrap();
    let other = client.queue("other").await.unwrap();
    assert_eq!(other.stats().await.unwrap().waiting, 0);
    assert!(other.message(waits).await.unwrap().is_none());
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn results_are_kept_for_the_configured_retention<B: TestBackend>() {
    let (db, _) = setup::<B>(&[("q", QueueConfig::default())]).await;
    let client = Client::builder()
        .flow_retention(Duration::from_secs(2))
        .open::<B>(&db.url)
        .await
        .unwrap();
    let q = client.queue("q").await.unwrap();
    let id = q.send(Message::new("x")).await.unwrap().id;
    let d = q.receive(1, LEASE).await.unwrap().remove(0);
    q.ack_with_result(d.receipt(), "kept").await.unwrap();
    assert_eq!(
        client.result(id).await.unwrap().as_deref(),
        Some(&b"kept"[..])
    );
    // Another client with the default retention sees it expire all the same: the expiry was
    // written with the result.
    let other = db.client().await;
    eventually_async(Duration::from_secs(10), "the result expires", || async {
        other.result(id).await.unwrap().is_none().then_some(())
    })
    .await;
    db.drop().await;
}

pub(crate) async fn callbacks_to_topics_are_published_once<B: TestBackend>() {
    let (db, client) = setup::<B>(&[("q", QueueConfig::default())]).await;
    let mut groups = Vec::new();
    for name in ["albums", "alerts"] {
        let topic = client
            .create_topic(name, TopicConfig::default())
            .await
            .unwrap();
        let g = topic
            .create_group("g", GroupConfig::default(), StartAt::Earliest)
            .await
            .unwrap();
        groups.push(g);
    }
    let mut batch = Batch::new()
        .on_success_publish("albums", Record::new("ready").key("ann"))
        .on_failure_publish("alerts", Record::new("failed"));
    for i in 0..20 {
        batch = batch.add("q", Message::new(format!("m{i}")));
    }
    let created = client.create_batch(batch).await.unwrap();
    // Nothing is published before the batch finishes.
    assert!(groups[0].receive(10, LEASE).await.unwrap().is_empty());
    let q = client.queue("q").await.unwrap();
    let mut acked = 0;
    while acked < 20 {
        let got = q.receive(7, LEASE).await.unwrap();
        let receipts: Vec<_> = got.iter().map(|d| d.receipt()).collect();
        acked += q.ack_batch(&receipts).await.unwrap().acked;
        if acked < 20 {
            assert!(
                groups[0].receive(10, LEASE).await.unwrap().is_empty(),
                "published early"
            );
        }
    }
    let mut published = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        for d in groups[0].receive(10, LEASE).await.unwrap() {
            groups[0].ack(d.receipt()).await.unwrap();
            published.push(d);
        }
        if !published.is_empty() {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for d in groups[0].receive(10, LEASE).await.unwrap() {
                published.push(d);
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(published.len(), 1, "the callback record once");
    assert_eq!(published[0].body, b"ready");
    assert_eq!(published[0].ordering_key.as_deref(), Some("ann"));
    assert_eq!(
        published[0].headers.get(BATCH_HEADER),
        Some(&created.id.to_string())
    );
    assert!(
        groups[1].receive(10, LEASE).await.unwrap().is_empty(),
        "on_failure published"
    );
    assert_eq!(
        client.batch(created.id).await.unwrap().state,
        BatchState::Finished
    );
    assert!(matches!(
        client
            .create_batch(Batch::new().on_complete_publish("nope", Record::new("x")))
            .await,
        Err(Error::UnknownTopic(_))
    ));
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_dependant_sent_while_its_dependency_is_acked_is_never_stranded<
    B: TestBackend,
>() {
    // A dependant sent by one client while another acks its (untracked) dependency: either the
    // send tracked the dependency first (its ack then releases the dependant) or the ack came
    // first (the dependency is gone, and the send is refused). Never a dependant that waits
    // for a message that no longer exists.
    let (db, client) =
        setup::<B>(&[("a", QueueConfig::default()), ("b", QueueConfig::default())]).await;
    let other = db.client().await;
    let (qa, qb) = (
        client.queue("a").await.unwrap(),
        other.queue("b").await.unwrap(),
    );
    const ROUNDS: usize = 60;
    let mut sent = Vec::new();
    let mut refused = 0;
    for i in 0..ROUNDS {
        let parent = qa.send(Message::new(format!("p{i}"))).await.unwrap().id;
        let d = qa.receive(1, LEASE).await.unwrap().remove(0);
        assert_eq!(d.id, parent);
        let qa2 = qa.clone();
        let ack = tokio::spawn(async move {
            if i % 3 == 0 {
                tokio::task::yield_now().await;
            }
            qa2.ack(d.receipt()).await.unwrap();
        });
        match qb
            .send(Message::new(format!("c{i}")).depends_on([parent]))
            .await
        {
            Ok(s) => sent.push(s.id),
            Err(Error::DependencyNotFound(id)) => {
                assert_eq!(id, parent);
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
        ack.await.unwrap();
    }
    let got: Vec<MessageId> = drain(&other, "b", Duration::from_millis(300))
        .await
        .iter()
        .map(|d| d.id)
        .collect();
    let mut want = sent.clone();
    want.sort();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(
        got_sorted, want,
        "{refused} refused; a sent dependant was stranded"
    );
    assert_eq!(qb.stats().await.unwrap().waiting, 0);
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        on_success_is_sent_once_after_the_last_ack_across_clients,
        a_poison_member_sends_on_failure_and_on_complete_once,
        members_added_while_running_are_waited_for,
        a_diamond_runs_each_step_after_its_dependencies_and_reads_their_results,
        a_dead_dependency_holds_and_a_cancelled_one_cancels_its_dependants,
        depends_on_tracks_stored_messages_wherever_they_are,
        bad_batches_are_refused_and_write_nothing,
        purges_cancel_what_waits_on_purged_messages,
        results_are_kept_for_the_configured_retention,
        callbacks_to_topics_are_published_once,
        a_dependant_sent_while_its_dependency_is_acked_is_never_stranded,
        batches_are_listed_unfinished_first_then_the_latest_finished,
    ]
);
