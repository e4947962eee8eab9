//! Uniqueness modes beside idempotency keys (`Message::replacing`, `Message::debounce`): a
//! replacing send takes the place of its key's waiting message (body, headers, due time; its id
//! stays) and, once that one was claimed, is sent anew under the key; concurrent replacing
//! senders leave one waiting message per key; a debounced key is delivered once, after its
//! sends stop for the quiet time, with the last body.

use std::time::{Duration, Instant};

use sqlmq::{Error, Message, QueueConfig};
use sqlmq_testkit::{TestBackend, check_invariants, eventually_async, queue};

const LEASE: Duration = Duration::from_secs(30);

/// Messages of the queue waiting to be claimed (ready or delayed).
async fn waiting<B: TestBackend>(q: &sqlmq::Queue<B>) -> u64 {
    let s = q.stats().await.unwrap();
    s.ready + s.scheduled
}

pub(crate) async fn a_replacing_send_takes_the_waiting_messages_place<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let first = q.send(Message::new("1").replacing("k")).await.unwrap();
    assert!(!first.duplicate && !first.replaced);
    let second = q
        .send(Message::new("2").header("h", "v").replacing("k"))
        .await
        .unwrap();
    assert_eq!(
        (second.id, second.replaced, second.duplicate),
        (first.id, true, false)
    );
    assert_eq!(waiting(&q).await, 1);
    let got = q.receive(10, LEASE).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].id, &got[0].body[..]), (first.id, &b"2"[..]));
    assert_eq!(got[0].headers.get("h").map(String::as_str), Some("v"));
    // Claimed: the next replacing send is a new message, and the key names it.
    let third = q.send(Message::new("3").replacing("k")).await.unwrap();
    assert!(!third.replaced && third.id != first.id);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.ready, stats.in_flight), (1, 1));
    // A plain idempotent send of the key is a duplicate of the one it names now.
    let again = q
        .send(Message::new("x").idempotency_key("k"))
        .await
        .unwrap();
    assert_eq!((again.id, again.duplicate), (third.id, true));
    q.ack(got[0].receipt()).await.unwrap();
    let got = q.receive(10, LEASE).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].id, &got[0].body[..]), (third.id, &b"3"[..]));
    q.ack(got[0].receipt()).await.unwrap();
    // A delayed one replaced without a delay is due now.
    let later = q
        .send(
            Message::new("later")
                .delay(Duration::from_secs(3600))
                .replacing("d"),
        )
        .await
        .unwrap();
    assert_eq!(q.stats().await.unwrap().scheduled, 1);
    let now = q.send(Message::new("now").replacing("d")).await.unwrap();
    assert_eq!((now.id, now.replaced), (later.id, true));
    let got = q.receive(10, LEASE).await.unwrap();
    assert_eq!((got.len(), &got[0].body[..]), (1, &b"now"[..]));
    q.ack(got[0].receipt()).await.unwrap();
    // Bad input: a replacing message with an ordering key; one key twice in one send.
    let keyed = Message::new("a").ordering_key("o").replacing("r");
    assert!(matches!(
        q.send(keyed).await,
        Err(Error::InvalidArgument(_))
    ));
    let twice = vec![
        Message::new("a").replacing("r"),
        Message::new("b").replacing("r"),
    ];
    assert!(matches!(
        q.send_batch(twice).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(q.stats().await.unwrap().pending(), 0, "nothing written");
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn concurrent_replacing_senders_leave_one_waiting_message<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default()).await;
    let mut senders = Vec::new();
    for t in 0..4 {
        let q = client.queue("q").await.unwrap();
        senders.push(tokio::spawn(async move {
            for i in 0..25 {
                let body = format!("{t}-{i}");
                q.send(Message::new(body).replacing("k")).await.unwrap();
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    assert_eq!(waiting(&q).await, 1, "one waiting message for the key");
    let got = q.receive(10, LEASE).await.unwrap();
    assert_eq!(got.len(), 1);
    let body = String::from_utf8(got[0].body.clone()).unwrap();
    assert!(body.ends_with("-24"), "a sender's last body: {body}");
    q.ack(got[0].receipt()).await.unwrap();

    // With a consumer taking them meanwhile: never two waiting, every send answered.
    let consumer = {
        let q = client.queue("q").await.unwrap();
        tokio::spawn(async move {
            let mut taken = 0;
            let until = Instant::now() + Duration::from_secs(3);
            while Instant::now() < until {
                for d in q.receive(10, LEASE).await.unwrap() {
                    q.ack(d.receipt()).await.unwrap();
                    taken += 1;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            taken
        })
    };
    let mut senders = Vec::new();
    for t in 0..4 {
        let q = client.queue("q").await.unwrap();
        senders.push(tokio::spawn(async move {
            for i in 0..25 {
                q.send(Message::new(format!("{t}-{i}")).replacing("k2"))
                    .await
                    .unwrap();
                assert!(waiting(&q).await <= 1, "two waiting messages for one key");
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    let taken = consumer.await.unwrap();
    assert!(taken >= 1, "the consumer took some");
    assert!(waiting(&q).await <= 1);
    check_invariants(&db).await;
    db.drop().await;
}

pub(crate) async fn debounce_delivers_once_after_the_key_is_quiet<B: TestBackend>() {
    // A dedup window shorter than the quiet time: the key must still name the waiting
    // message when the window has passed since the first send.
    let config = QueueConfig::default().dedup_window(Duration::from_millis(100));
    let (db, _client, q) = queue::<B>(config).await;
    let quiet = Duration::from_millis(600);
    let mut ids = Vec::new();
    for i in 0..5 {
        let sent = q
            .send(Message::new(format!("edit {i}")).debounce("doc-42", quiet))
            .await
            .unwrap();
        ids.push(sent.id);
        assert!(
            q.receive(10, LEASE).await.unwrap().is_empty(),
            "not yet quiet"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last_send = Instant::now() - Duration::from_millis(100);
    assert!(ids.iter().all(|id| *id == ids[0]), "one message all along");
    let plain = q
        .send(Message::new("x").idempotency_key("doc-42"))
        .await
        .unwrap();
    assert_eq!(
        (plain.id, plain.duplicate),
        (ids[0], true),
        "the key is kept while it waits"
    );
    let got = eventually_async(Duration::from_secs(30), "the debounced message", || async {
        let got = q.receive(10, LEASE).await.unwrap();
        (!got.is_empty()).then_some(got)
    })
    .await;
    assert!(last_send.elapsed() >= quiet - Duration::from_millis(50));
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].body[..], b"edit 4");
    q.ack(got[0].receipt()).await.unwrap();
    assert_eq!(q.stats().await.unwrap().pending(), 0);
    check_invariants(&db).await;
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        a_replacing_send_takes_the_waiting_messages_place,
        concurrent_replacing_senders_leave_one_waiting_message,
        debounce_delivers_once_after_the_key_is_quiet,
    ],
);
