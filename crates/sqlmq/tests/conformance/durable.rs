//! Durable execution (`JobContext::step`, `step_in`, `sleep`, `wait_for_event`,
//! `Client::emit_event`): a completed step never runs again, whatever ends an attempt; a
//! `step_in`'s writes commit with its record or not at all; a sleep holds no slot and spends no
//! attempt; an event wakes its waiting run, a timeout fires once, and racing emits and a
//! timeout resolve to one outcome; a handler whose path changed gets a typed error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlmq::flow::{Resumed, RunStepState, StepKind};
use sqlmq::worker::CancellationToken;
use sqlmq::{
    Client, Delivery, Error, JobContext, Message, MessageId, Outcome, QueueConfig, Worker,
};
use sqlmq_testkit::{TestBackend, Value, check_invariants, eventually_async, queue};

/// How often each named step ran.
type Runs = Arc<Mutex<HashMap<String, u32>>>;
/// What each run got from its wait.
type Outcomes = Arc<Mutex<Vec<(MessageId, Option<String>)>>>;
/// Each parent's body, what its join gave, and when.
type Joined = Arc<Mutex<Vec<(String, Result<Option<String>, String>, Instant)>>>;

fn ran(runs: &Runs, name: &str) {
    *runs.lock().unwrap().entry(name.to_owned()).or_default() += 1;
}

fn count(runs: &Runs, name: &str) -> u32 {
    runs.lock().unwrap().get(name).copied().unwrap_or(0)
}

/// Wait until queue `q` has its one dead letter.
async fn until_dead<B: TestBackend>(q: &sqlmq::Queue<B>) {
    eventually_async(Duration::from_secs(30), "the dead letter", || async {
        (q.stats().await.unwrap().dead == 1).then_some(())
    })
    .await;
}

/// Stop a worker of [`work`] and wait for its end.
async fn stopped(stop: CancellationToken, worker: tokio::task::JoinHandle<()>) {
    stop.cancel();
    worker.await.unwrap();
}

/// A worker on queue "q" running `handler`, polling briskly.
fn work<B, F, Fut>(
    client: &Client<B>,
    stop: &CancellationToken,
    handler: F,
) -> tokio::task::JoinHandle<()>
where
    B: TestBackend,
    F: Fn(Delivery, JobContext<B>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Outcome, Error>> + Send + 'static,
{
    let run = Worker::builder(client)
        .queue_raw("q", handler)
        .concurrency(8)
        .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
        .run(stop.clone());
    tokio::spawn(async move {
        run.await.unwrap();
    })
}

pub(crate) async fn completed_steps_replay_a_dead_letter_keeps_its_journal_and_the_ack_forgets_it<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(5)).await;
    let runs: Runs = Arc::default();
    let done = Arc::new(Mutex::new(Vec::new()));
    let id = q.send(Message::new("order")).await.unwrap().id;
    let stop = CancellationToken::new();
    // Set before the redrive (which starts the attempts again).
    let redriven = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (r, d, rd) = (runs.clone(), done.clone(), redriven.clone());
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let (runs, done) = (r.clone(), d.clone());
        let redriven = rd.load(std::sync::atomic::Ordering::SeqCst);
        async move {
            let a: u32 = ctx
                .step("reserve", || async {
                    ran(&runs, "reserve");
                    Ok::<_, std::io::Error>(41)
                })
                .await?;
            let b: String = ctx
                .step("charge", || async {
                    ran(&runs, "charge");
                    Ok::<_, std::io::Error>("ch_1".to_owned())
                })
                .await?;
            // The first attempt fails after two steps: a retry replays them.
            if !redriven && ctx.attempt() == 1 {
                return Ok(Outcome::Retry {
                    after: Duration::ZERO,
                    reason: "flaky".into(),
                });
            }
            // The second gives up: a dead letter keeps the journal.
            if !redriven {
                return Ok(Outcome::DeadLetter("gave up".into()));
            }
            let c: u32 = ctx
                .step("email", || async {
                    ran(&runs, "email");
                    Ok::<_, std::io::Error>(a + 1)
                })
                .await?;
            done.lock().unwrap().push((a, b, c));
            Ok(Outcome::Done)
        }
    });
    until_dead(&q).await;
    let journal = client.journal(id).await.unwrap();
    let names: Vec<(StepKind, &str, RunStepState)> = journal
        .steps
        .iter()
        .map(|s| (s.kind, s.name.as_str(), s.state))
        .collect();
    assert_eq!(
        names,
        [
            (StepKind::Step, "reserve", RunStepState::Done),
            (StepKind::Step, "charge", RunStepState::Done)
        ]
    );
    assert_eq!(journal.steps[1].result_bytes, "\"ch_1\"".len() as u64);
    assert!(journal.waiting_for.is_empty());
    assert_eq!((count(&runs, "reserve"), count(&runs, "charge")), (1, 1));

    // Redriven, the run resumes after its completed steps.
    redriven.store(true, std::sync::atomic::Ordering::SeqCst);
    q.redrive(&[id]).await.unwrap();
    eventually_async(Duration::from_secs(30), "the redriven run done", || async {
        (!done.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    assert_eq!(done.lock().unwrap()[0], (41, "ch_1".to_owned(), 42));
    assert_eq!(
        (
            count(&runs, "reserve"),
            count(&runs, "charge"),
            count(&runs, "email")
        ),
        (1, 1, 1),
        "a completed step ran again"
    );
    eventually_async(Duration::from_secs(10), "the ack", || async {
        (q.stats().await.unwrap().in_flight == 0).then_some(())
    })
    .await;
    assert!(client.journal(id).await.unwrap().steps.is_empty());
    assert_eq!(db.count("run_steps").await, 0);
    stopped(stop, worker).await;
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_step_in_commits_its_writes_with_its_record_or_not_at_all<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(10)).await;
    db.exec("CREATE TABLE effects (label VARCHAR(32) NOT NULL)", &[])
        .await;
    q.send(Message::new("x")).await.unwrap();
    let stop = CancellationToken::new();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let f = failures.clone();
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let failures = f.clone();
        async move {
            let n: i64 = ctx
                .step_in("write", |conn| {
                    Box::pin(async move {
                        B::execute(conn, "INSERT INTO effects (label) VALUES ('write')", &[]).await;
                        Ok::<_, std::io::Error>(7)
                    })
                })
                .await?;
            assert_eq!(n, 7);
            let attempt = ctx.attempt();
            let second = ctx
                .step_in("flaky", |conn| {
                    Box::pin(async move {
                        let label = if attempt < 3 { "rolled back" } else { "kept" };
                        B::execute(
                            conn,
                            "INSERT INTO effects (label) VALUES (?)",
                            &[Value::from(label)],
                        )
                        .await;
                        if attempt < 3 {
                            return Err(std::io::Error::other("not yet"));
                        }
                        Ok(attempt)
                    })
                })
                .await;
            match second {
                Err(e @ Error::StepFailed { .. }) => {
                    failures.lock().unwrap().push(e.to_string());
                    Ok(Outcome::Retry {
                        after: Duration::ZERO,
                        reason: e.to_string(),
                    })
                }
                Err(e) => Err(e),
                Ok(_) => Ok(Outcome::Done),
            }
        }
    });
    eventually_async(Duration::from_secs(30), "the run done", || async {
        let s = q.stats().await.unwrap();
        (s.ready + s.scheduled + s.in_flight == 0).then_some(())
    })
    .await;
    stopped(stop, worker).await;
    let labels = db
        .query("SELECT label FROM effects ORDER BY label", &[])
        .await;
    let labels: Vec<String> = labels.iter().map(|r| r[0].text()).collect();
    assert_eq!(
        labels,
        ["kept", "write"],
        "each step_in's writes exactly once"
    );
    assert_eq!(
        failures.lock().unwrap().as_slice(),
        [
            "step \"flaky\" failed: not yet",
            "step \"flaky\" failed: not yet"
        ]
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_changed_path_names_unique_and_no_nesting_are_typed_errors<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(5)).await;
    q.send(Message::new("x")).await.unwrap();
    let stop = CancellationToken::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let seen = s.clone();
        async move {
            let ok = || async { Ok::<_, std::io::Error>(1) };
            if ctx.attempt() == 1 {
                ctx.step("a", ok).await?;
                let twice = ctx.step("a", ok).await.unwrap_err();
                let nested = ctx
                    .step("outer", || async {
                        let inner = ctx.step("inner", ok).await;
                        Ok::<_, std::io::Error>(inner.unwrap_err().to_string())
                    })
                    .await?;
                seen.lock().unwrap().push(twice.to_string());
                seen.lock().unwrap().push(nested);
                return Ok(Outcome::Retry {
                    after: Duration::ZERO,
                    reason: "again".into(),
                });
            }
            // The second delivery calls "b" where the journal has "a".
            let changed = ctx.step("b", ok).await.unwrap_err();
            assert!(
                matches!(changed, Error::StepMismatch { seq: 0, .. }),
                "{changed}"
            );
            seen.lock().unwrap().push(changed.to_string());
            Ok(Outcome::DeadLetter("changed".into()))
        }
    });
    until_dead(&q).await;
    stopped(stop, worker).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen[0].contains("used twice"), "{}", seen[0]);
    assert!(seen[1].contains("one at a time"), "{}", seen[1]);
    assert!(
        seen[2].contains("step \"b\"") && seen[2].contains("step \"a\""),
        "{}",
        seen[2]
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_sleep_gives_back_its_slot_spends_no_attempt_and_resumes_after_its_steps<
    B: TestBackend,
>() {
    // One attempt allowed: a sleep that counted as one would bury the message.
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    let id = q.send(Message::new("x")).await.unwrap().id;
    let stop = CancellationToken::new();
    let runs: Runs = Arc::default();
    let resumed = Arc::new(Mutex::new(None));
    let (r, res) = (runs.clone(), resumed.clone());
    let started = Instant::now();
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let (runs, resumed) = (r.clone(), res.clone());
        async move {
            ctx.step("before", || async {
                ran(&runs, "before");
                Ok::<_, std::io::Error>(())
            })
            .await?;
            ctx.sleep(Duration::from_secs(2)).await?;
            ctx.step("after", || async {
                ran(&runs, "after");
                Ok::<_, std::io::Error>(())
            })
            .await?;
            *resumed.lock().unwrap() = Some((started.elapsed(), ctx.attempt()));
            Ok(Outcome::Done)
        }
    });
    // Asleep: not in flight (no lease, no slot), delayed; the journal says until when.
    let journal = eventually_async(Duration::from_secs(10), "the run asleep", || async {
        let s = q.stats().await.unwrap();
        let j = client.journal(id).await.unwrap();
        (s.in_flight == 0 && s.scheduled == 1 && j.steps.len() == 2).then_some(j)
    })
    .await;
    assert_eq!(journal.steps[1].kind, StepKind::Sleep);
    assert_eq!(journal.steps[1].state, RunStepState::Waiting);
    assert!(journal.steps[1].wake_at.is_some());
    let (after, attempt) = eventually_async(Duration::from_secs(30), "the run resumed", || async {
        *resumed.lock().unwrap()
    })
    .await;
    assert!(after >= Duration::from_secs(2), "resumed after {after:?}");
    assert_eq!(attempt, 1, "the sleep spent an attempt");
    assert_eq!((count(&runs, "before"), count(&runs, "after")), (1, 1));
    stopped(stop, worker).await;
    assert_eq!(q.stats().await.unwrap().dead, 0);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn an_emit_wakes_the_waiting_run_from_another_client<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let id = q.send(Message::new("order-1")).await.unwrap().id;
    let stop = CancellationToken::new();
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    let worker = work(&client, &stop, move |d, ctx: JobContext<B>| {
        let got = g.clone();
        async move {
            let name = format!("{}-shipped", String::from_utf8_lossy(&d.body));
            let shipped: Option<String> =
                ctx.wait_for_event(&name, Duration::from_secs(600)).await?;
            *got.lock().unwrap() = Some((shipped, Instant::now()));
            Ok(Outcome::Done)
        }
    });
    eventually_async(Duration::from_secs(10), "the run waiting", || async {
        let j = client.journal(id).await.unwrap();
        (j.waiting_for == ["order-1-shipped"] && q.stats().await.unwrap().scheduled == 1)
            .then_some(())
    })
    .await;
    let awaited = client.awaited_events(10).await.unwrap();
    assert_eq!(awaited.len(), 1);
    assert_eq!(
        (awaited[0].name.as_str(), awaited[0].runs),
        ("order-1-shipped", 1)
    );

    let emitter = db.client().await;
    let emitted_at = Instant::now();
    let emitted = emitter
        .emit_event("order-1-shipped", &"DHL 123")
        .await
        .unwrap();
    assert!(emitted.kept);
    assert_eq!(emitted.woken, 1);
    let (payload, at) = eventually_async(Duration::from_secs(10), "the run resumed", || async {
        got.lock().unwrap().clone()
    })
    .await;
    assert_eq!(payload.as_deref(), Some("DHL 123"));
    let latency = at - emitted_at;
    assert!(
        latency < Duration::from_secs(5),
        "resumed {latency:?} after the emit: not woken by it"
    );
    // A second emit of the name changes nothing: the first one stands.
    let again = emitter.emit_event("order-1-shipped", &"UPS").await.unwrap();
    assert!(!again.kept);
    assert!(client.awaited_events(10).await.unwrap().is_empty());
    stopped(stop, worker).await;
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn an_event_emitted_before_the_wait_counts_and_the_first_emit_wins<
    B: TestBackend,
>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let first = client.emit_event("approved", &1).await.unwrap();
    let second = client.emit_event("approved", &2).await.unwrap();
    assert!(first.kept && !second.kept);
    assert_eq!(
        (first.woken, second.woken),
        (0, 0),
        "nobody waits: not an error"
    );
    q.send(Message::new("x")).await.unwrap();
    let stop = CancellationToken::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let got = g.clone();
        async move {
            let v: Option<i64> = ctx
                .wait_for_event("approved", Duration::from_secs(600))
                .await?;
            got.lock().unwrap().push(v);
            Ok(Outcome::Done)
        }
    });
    eventually_async(Duration::from_secs(10), "the run done", || async {
        (!got.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    stopped(stop, worker).await;
    assert_eq!(
        got.lock().unwrap().as_slice(),
        [Some(1)],
        "handled once, with the first"
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_timeout_fires_once_and_a_later_emit_does_not_change_it<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let id = q.send(Message::new("x")).await.unwrap().id;
    let stop = CancellationToken::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    let started = Instant::now();
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let got = g.clone();
        async move {
            let v: Option<String> = ctx.wait_for_event("never", Duration::from_secs(1)).await?;
            got.lock().unwrap().push((v, started.elapsed()));
            // Kept as a dead letter, so that its journal stays to be looked at.
            Ok(Outcome::DeadLetter("look at me".into()))
        }
    });
    until_dead(&q).await;
    let late = client.emit_event("never", &"too late").await.unwrap();
    assert_eq!((late.kept, late.woken), (true, 0));
    let journal = client.journal(id).await.unwrap();
    assert_eq!(journal.steps.len(), 1);
    assert_eq!(journal.steps[0].state, RunStepState::TimedOut);
    assert!(journal.waiting_for.is_empty());
    // Redriven after the emit, the run replays its recorded timeout.
    q.redrive(&[id]).await.unwrap();
    eventually_async(Duration::from_secs(20), "the replay", || async {
        (got.lock().unwrap().len() == 2).then_some(())
    })
    .await;
    stopped(stop, worker).await;
    let got = got.lock().unwrap().clone();
    assert_eq!((got[0].0.clone(), got[1].0.clone()), (None, None));
    assert!(
        got[0].1 >= Duration::from_secs(1),
        "timed out after {:?}",
        got[0].1
    );
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn racing_emits_and_a_timeout_resolve_to_one_outcome<B: TestBackend>() {
    const RUNS: usize = 20;
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let ids: Vec<MessageId> = q
        .send_batch(
            (0..RUNS)
                .map(|i| Message::new(format!("race-{i}")))
                .collect(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    let stop = CancellationToken::new();
    let outcomes: Outcomes = Arc::default();
    let o = outcomes.clone();
    let worker = work(&client, &stop, move |d, ctx: JobContext<B>| {
        let outcomes = o.clone();
        async move {
            let name = String::from_utf8_lossy(&d.body).into_owned();
            let v: Option<String> = ctx
                .wait_for_event(&name, Duration::from_millis(1500))
                .await?;
            outcomes.lock().unwrap().push((d.id, v));
            Ok(Outcome::Done)
        }
    });
    eventually_async(Duration::from_secs(20), "every run waiting", || async {
        let n: u64 = client
            .awaited_events(100)
            .await
            .unwrap()
            .iter()
            .map(|e| e.runs)
            .sum();
        (n == RUNS as u64).then_some(())
    })
    .await;
    // Two emitters race each other and the deadlines, which pass while they emit.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (a, b) = (db.client().await, db.client().await);
    let emit = |c: Client<B>, label: &'static str| {
        tokio::spawn(async move {
            let mut kept = Vec::new();
            for i in 0..RUNS {
                if c.emit_event(&format!("race-{i}"), &label)
                    .await
                    .unwrap()
                    .kept
                {
                    kept.push(i);
                }
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            kept
        })
    };
    let (ka, kb) = (emit(a, "A"), emit(b, "B"));
    let (ka, kb) = (ka.await.unwrap(), kb.await.unwrap());
    for i in 0..RUNS {
        assert!(
            ka.contains(&i) != kb.contains(&i),
            "event {i}: exactly one emit is kept"
        );
    }
    eventually_async(Duration::from_secs(30), "every run done", || async {
        (outcomes.lock().unwrap().len() >= RUNS).then_some(())
    })
    .await;
    stopped(stop, worker).await;
    let outcomes = outcomes.lock().unwrap().clone();
    assert_eq!(outcomes.len(), RUNS, "a run resolved twice: {outcomes:?}");
    for (i, id) in ids.iter().enumerate() {
        let (_, v) = outcomes.iter().find(|(o, _)| o == id).expect("resolved");
        if let Some(v) = v {
            let kept = if ka.contains(&i) { "A" } else { "B" };
            assert_eq!(v, kept, "run {i} got the emit that was not kept");
        }
    }
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn durable_bad_input_is_a_typed_error_and_writes_nothing<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let id = q.send(Message::new("x")).await.unwrap().id;
    let stop = CancellationToken::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let worker = work(&client, &stop, move |_d, ctx: JobContext<B>| {
        let seen = s.clone();
        async move {
            let big = ctx
                .step("big", || async {
                    Ok::<_, std::io::Error>("x".repeat(sqlmq::flow::MAX_STEP_RESULT))
                })
                .await
                .unwrap_err();
            let absurd = ctx
                .sleep(Duration::from_secs(u64::MAX / 2))
                .await
                .unwrap_err();
            let unnamed = ctx.step("", || async { Ok::<_, std::io::Error>(()) }).await;
            let long = ctx
                .wait_for_event::<()>(&"e".repeat(256), Duration::from_secs(1))
                .await
                .unwrap_err();
            seen.lock().unwrap().extend([
                matches!(big, Error::PayloadTooLarge { .. }),
                matches!(absurd, Error::InvalidArgument(_)),
                matches!(unnamed, Err(Error::InvalidArgument(_))),
                matches!(long, Error::InvalidArgument(_)),
            ]);
            Ok(Outcome::DeadLetter("checked".into()))
        }
    });
    until_dead(&q).await;
    stopped(stop, worker).await;
    assert_eq!(seen.lock().unwrap().as_slice(), [true; 4]);
    assert!(
        client.journal(id).await.unwrap().steps.is_empty(),
        "nothing recorded"
    );
    let empty = client.emit_event("", &1).await.unwrap_err();
    assert!(matches!(empty, Error::InvalidArgument(_)), "{empty}");
    let huge = client
        .emit_event("big", &"x".repeat(sqlmq::flow::MAX_STEP_RESULT))
        .await
        .unwrap_err();
    assert!(matches!(huge, Error::PayloadTooLarge { .. }), "{huge}");
    assert_eq!(db.count("events").await, 0);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_receive_loop_drives_a_run_by_name<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    let id = q.send(Message::new("x")).await.unwrap().id;
    let lease = Duration::from_secs(30);
    let receive = || async {
        eventually_async(Duration::from_secs(20), "the message back", || async {
            q.receive(1, lease).await.unwrap().pop()
        })
        .await
    };
    let d = receive().await;
    let run = q.run(d.receipt());
    assert_eq!(run.step("charge").await.unwrap(), None);
    assert_eq!(
        run.record_step("charge", b"\"ch_1\"").await.unwrap(),
        b"\"ch_1\""
    );
    // Recorded once: a second record keeps the first result.
    assert_eq!(
        run.record_step("charge", b"\"ch_2\"").await.unwrap(),
        b"\"ch_1\""
    );
    let slept = run.sleep("nap", Duration::from_millis(300)).await.unwrap();
    assert_eq!(slept, Resumed::Suspended);
    assert!(
        matches!(q.ack(d.receipt()).await, Err(Error::LeaseLost { .. })),
        "given back"
    );

    let d = receive().await;
    assert_eq!(d.attempt, 1, "the sleep spent no attempt");
    let run = q.run(d.receipt());
    assert_eq!(
        run.step("charge").await.unwrap().as_deref(),
        Some(&b"\"ch_1\""[..])
    );
    assert_eq!(
        run.sleep("nap", Duration::from_millis(300)).await.unwrap(),
        Resumed::Awake
    );
    let waited = run
        .wait_for_event("go", Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(waited, Resumed::Suspended);
    assert_eq!(run.journal().await.unwrap().waiting_for, ["go"]);
    client.emit_event("go", &[1, 2]).await.unwrap();

    let d = receive().await;
    let run = q.run(d.receipt());
    assert_eq!(
        run.wait_for_event("go", Duration::from_secs(600))
            .await
            .unwrap(),
        Resumed::Event {
            payload: b"[1,2]".to_vec()
        }
    );
    let stale = q.run(sqlmq::queue::Receipt {
        id,
        token: d.receipt().token - 1,
    });
    assert!(matches!(
        stale.record_step("late", b"1").await,
        Err(Error::LeaseLost { .. })
    ));
    let bad = run.record_step("not json", b"{").await.unwrap_err();
    assert!(matches!(bad, Error::Json(_)), "{bad}");
    run.ack().await.unwrap();
    assert!(
        client.journal(id).await.unwrap().steps.is_empty(),
        "the ack forgot the journal"
    );
    assert_eq!(q.stats().await.unwrap().in_flight, 0);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn a_join_returns_the_childs_result_or_fails_with_its_dead_letter<
    B: TestBackend,
>() {
    let (db, client, parents) = queue::<B>(QueueConfig::default().max_attempts(5)).await;
    let kids = client
        .create_queue("kids", QueueConfig::default().max_attempts(1))
        .await
        .unwrap();
    parents.send(Message::new("ok")).await.unwrap();
    let failing = parents.send(Message::new("fail")).await.unwrap().id;
    let stop = CancellationToken::new();
    let joined: Joined = Arc::default();
    let j = joined.clone();
    let parent_worker = work(&client, &stop, move |d, ctx: JobContext<B>| {
        let joined = j.clone();
        async move {
            let body = String::from_utf8_lossy(&d.body).into_owned();
            let child = ctx
                .spawn("child", "kids", Message::new(body.clone()))
                .await?;
            // The first attempt fails after the spawn: the replay must not send another.
            if ctx.attempt() == 1 {
                return Ok(Outcome::Retry {
                    after: Duration::ZERO,
                    reason: "crash".into(),
                });
            }
            let outcome = match ctx.join(&child).await {
                Ok(r) => Ok(r.map(|r| String::from_utf8(r).unwrap())),
                Err(Error::ChildFailed { id }) => {
                    assert_eq!(id, child.id);
                    Err("failed".to_owned())
                }
                Err(e) => return Err(e),
            };
            joined.lock().unwrap().push((body, outcome, Instant::now()));
            Ok(Outcome::Done)
        }
    });
    let child_worker = {
        let run = Worker::builder(&client)
            .queue_raw("kids", |d: Delivery, ctx: JobContext<B>| async move {
                assert!(ctx.headers().contains_key(sqlmq::flow::PARENT_HEADER));
                tokio::time::sleep(Duration::from_millis(300)).await;
                if d.body == b"fail" {
                    return Ok::<_, Error>(Outcome::DeadLetter("no".into()));
                }
                ctx.ack_with_result(format!("\"done {}\"", String::from_utf8_lossy(&d.body)))
                    .await?;
                Ok(Outcome::Done)
            })
            .poll_interval(Duration::from_millis(5), Duration::from_millis(50))
            .run(stop.clone());
        tokio::spawn(async move { run.await.unwrap() })
    };
    let started = Instant::now();
    eventually_async(Duration::from_secs(30), "both parents joined", || async {
        (joined.lock().unwrap().len() == 2).then_some(())
    })
    .await;
    let mut joined = joined.lock().unwrap().clone();
    joined.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(joined[0].0, "fail");
    assert_eq!(joined[0].1, Err("failed".to_owned()));
    assert_eq!(joined[1].1, Ok(Some("\"done ok\"".to_owned())));
    // Woken by the children's ends, not by the minute's look.
    for (body, _, at) in &joined {
        assert!(
            at.duration_since(started) < Duration::from_secs(20),
            "{body} joined late"
        );
    }
    assert_eq!(
        kids.stats().await.unwrap().dead,
        1,
        "one child each, the replay sent none"
    );
    eventually_async(Duration::from_secs(10), "both parents acked", || async {
        let s = parents.stats().await.unwrap();
        (s.ready + s.scheduled + s.in_flight == 0).then_some(())
    })
    .await;
    let journal = client.journal(failing).await.unwrap();
    assert!(
        journal.steps.is_empty(),
        "the failed parent's ack forgot its journal"
    );
    stop.cancel();
    parent_worker.await.unwrap();
    child_worker.await.unwrap();
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM sqlmq_messages").await,
        1,
        "only the dead child is left: no second child was sent"
    );
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        completed_steps_replay_a_dead_letter_keeps_its_journal_and_the_ack_forgets_it,
        a_step_in_commits_its_writes_with_its_record_or_not_at_all,
        a_changed_path_names_unique_and_no_nesting_are_typed_errors,
        a_sleep_gives_back_its_slot_spends_no_attempt_and_resumes_after_its_steps,
        an_emit_wakes_the_waiting_run_from_another_client,
        an_event_emitted_before_the_wait_counts_and_the_first_emit_wins,
        a_timeout_fires_once_and_a_later_emit_does_not_change_it,
        racing_emits_and_a_timeout_resolve_to_one_outcome,
        durable_bad_input_is_a_typed_error_and_writes_nothing,
        a_receive_loop_drives_a_run_by_name,
        a_join_returns_the_childs_result_or_fails_with_its_dead_letter,
    ],
);
