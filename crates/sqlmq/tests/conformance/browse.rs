//! Looking at a queue's messages: every state listed in the order it hands messages out,
//! pages that neither skip nor repeat, one message found by id in any state or by key, and
//! reading that changes nothing a consumer sees.

use std::collections::HashSet;
use std::time::Duration;

use sqlmq::inspect::MessageState;
use sqlmq::{Backend, Error, Message, MessageId, Queue, QueueConfig};
use sqlmq_testkit::{TestBackend, queue};

const LEASE: Duration = Duration::from_secs(60);

/// Every message of `state`, read `page` at a time; each page's `next` leads to the next.
async fn all<B: Backend>(q: &Queue<B>, state: MessageState, page: usize) -> Vec<MessageId> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let p = q.browse(state, after.as_deref(), page).await.unwrap();
        assert!(p.messages.len() <= page);
        assert!(p.messages.iter().all(|m| m.state == state), "{p:?}");
        out.extend(p.messages.iter().map(|m| m.id));
        match p.next {
            Some(n) => {
                assert_eq!(p.messages.len(), page, "only a full page has a next");
                after = Some(n);
            }
            None => return out,
        }
    }
}

pub(crate) async fn each_state_is_listed_in_order_a_page_at_a_time<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    for state in MessageState::BROWSABLE {
        let p = q.browse(state, None, 10).await.unwrap();
        assert!(p.messages.is_empty() && p.next.is_none());
    }
    // Ready: priorities out of order, several per priority.
    let priority = |i: usize| [3i16, -1, 0][i % 3];
    let ready: Vec<Message> = (0..9)
        .map(|i| Message::new(format!("r{i}")).priority(priority(i)))
        .collect();
    let mut expected_ready: Vec<(i16, MessageId)> = ready
        .iter()
        .enumerate()
        .map(|(i, m)| (priority(i), m.id()))
        .collect();
    // Scheduled: due in an order other than sent.
    let scheduled: Vec<Message> = [30u64, 10, 20, 40]
        .iter()
        .map(|s| Message::new(format!("s{s}")).delay(Duration::from_secs(3600 + s)))
        .collect();
    // Keyed: each key's head goes to ready, the rest wait in line.
    let keyed: Vec<Message> = ["b", "a", "b", "a", "b"]
        .iter()
        .enumerate()
        .map(|(i, k)| Message::new(format!("k{i}")).ordering_key(*k).priority(9))
        .collect();
    q.send_batch(ready.clone()).await.unwrap();
    q.send_batch(scheduled.clone()).await.unwrap();
    q.send_batch(keyed.clone()).await.unwrap();
    expected_ready.push((9, keyed[0].id()));
    expected_ready.push((9, keyed[1].id()));
    expected_ready.sort();

    for page in [1, 2, 4, 100] {
        let got = all(&q, MessageState::Ready, page).await;
        let want: Vec<MessageId> = expected_ready.iter().map(|(_, id)| *id).collect();
        assert_eq!(got, want, "ready, pages of {page}");
        let got = all(&q, MessageState::Scheduled, page).await;
        let want: Vec<MessageId> = [1, 2, 0, 3].iter().map(|&i| scheduled[i].id()).collect();
        assert_eq!(got, want, "scheduled, pages of {page}");
        let got = all(&q, MessageState::Blocked, page).await;
        let want: Vec<MessageId> = [3, 2, 4].iter().map(|&i| keyed[i].id()).collect();
        assert_eq!(
            got, want,
            "blocked: key a's line, then b's, pages of {page}"
        );
    }
    let first = q.browse(MessageState::Scheduled, None, 1).await.unwrap();
    let m = &first.messages[0];
    assert_eq!(m.body, b"s10");
    assert!(m.run_at.is_some() && m.lease_until.is_none());

    // In flight: what a consumer holds, with its lease.
    let held = q.receive(3, LEASE).await.unwrap();
    let in_flight = q.browse(MessageState::InFlight, None, 10).await.unwrap();
    let ids: HashSet<MessageId> = in_flight.messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, held.iter().map(|d| d.id).collect::<HashSet<_>>());
    for m in &in_flight.messages {
        assert_eq!(m.attempts, 1);
        assert!(m.lease_until.is_some() && m.claimed_at.is_some());
    }
    assert_eq!(
        all(&q, MessageState::Ready, 3).await.len(),
        expected_ready.len() - 3
    );
    db.drop().await;
}

pub(crate) async fn a_message_is_found_by_id_in_any_state_and_by_key<B: TestBackend>() {
    let (db, client, q) = queue::<B>(QueueConfig::default().max_attempts(1)).await;
    let plain = Message::new("plain").header("h", "v");
    let later = Message::new("later").delay(Duration::from_secs(3600));
    let head = Message::new("head").ordering_key("cust-1").priority(-9);
    let behind = Message::new("behind").ordering_key("cust-1");
    let keyed = Message::new("idem").idempotency_key("order-7");
    for m in [&head, &plain, &later, &behind, &keyed] {
        q.send(m.clone()).await.unwrap();
    }
    let state = |id| {
        let q = q.clone();
        async move { q.message(id).await.unwrap().map(|m| m.state) }
    };
    assert_eq!(state(plain.id()).await, Some(MessageState::Ready));
    assert_eq!(state(later.id()).await, Some(MessageState::Scheduled));
    assert_eq!(state(behind.id()).await, Some(MessageState::Blocked));
    let found = q.message(plain.id()).await.unwrap().unwrap();
    assert_eq!(found.body, b"plain");
    assert_eq!(found.headers.get("h").map(String::as_str), Some("v"));

    let claimed = q.receive(1, LEASE).await.unwrap().remove(0);
    assert_eq!(claimed.id, head.id());
    let m = q.message(head.id()).await.unwrap().unwrap();
    assert_eq!(m.state, MessageState::InFlight);
    assert_eq!(m.ordering_key.as_deref(), Some("cust-1"));

    let by_key: Vec<(MessageId, MessageState)> = q
        .messages_by_key("cust-1", 10)
        .await
        .unwrap()
        .iter()
        .map(|m| (m.id, m.state))
        .collect();
    assert_eq!(
        by_key,
        [
            (head.id(), MessageState::InFlight),
            (behind.id(), MessageState::Blocked)
        ]
    );
    let by_idem = q.messages_by_key("order-7", 10).await.unwrap();
    assert_eq!(by_idem.len(), 1);
    assert_eq!(by_idem[0].id, keyed.id());
    assert!(q.messages_by_key("nobody", 10).await.unwrap().is_empty());

    // Dead: with when it died and why.
    q.nack(claimed.receipt(), None, "broken").await.unwrap();
    let dead = q.message(head.id()).await.unwrap().unwrap();
    assert_eq!(dead.state, MessageState::Dead);
    assert!(dead.died_at.is_some());
    assert_eq!(dead.errors.last().map(|e| e.error.as_str()), Some("broken"));
    // Acked, or of another queue: not found.
    let d = q.receive(1, LEASE).await.unwrap().remove(0);
    q.ack(d.receipt()).await.unwrap();
    assert_eq!(state(d.id).await, None);
    let other = client
        .create_queue("other", QueueConfig::default())
        .await
        .unwrap();
    assert!(other.message(plain.id()).await.unwrap().is_none());
    assert!(q.message(MessageId::new()).await.unwrap().is_none());
    db.drop().await;
}

pub(crate) async fn browsing_changes_nothing_a_consumer_sees<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    let sent: Vec<Message> = (0..20).map(|i| Message::new(format!("{i}"))).collect();
    q.send_batch(sent.clone()).await.unwrap();
    for _ in 0..3 {
        assert_eq!(all(&q, MessageState::Ready, 7).await.len(), 20);
        for m in &sent {
            q.message(m.id()).await.unwrap().unwrap();
        }
    }
    let got = q.receive(100, LEASE).await.unwrap();
    assert_eq!(got.len(), 20, "browsing leased nothing");
    assert!(got.iter().all(|d| d.attempt == 1), "nor counted an attempt");
    db.drop().await;
}

pub(crate) async fn bad_cursors_and_limits_are_refused<B: TestBackend>() {
    let (db, _client, q) = queue::<B>(QueueConfig::default()).await;
    q.send_batch(
        (0..3)
            .map(|i| Message::new(format!("{i}")).ordering_key(format!("k{i}")))
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let ready_cursor = q
        .browse(MessageState::Ready, None, 1)
        .await
        .unwrap()
        .next
        .unwrap();
    for (state, after, limit) in [
        (MessageState::Ready, Some("nonsense"), 10),
        (MessageState::Blocked, Some(ready_cursor.as_str()), 10),
        (MessageState::Ready, None, 0),
        (MessageState::Ready, None, 10_001),
        (MessageState::Dead, None, 10),
    ] {
        assert!(
            matches!(
                q.browse(state, after, limit).await,
                Err(Error::InvalidArgument(_))
            ),
            "{state} {after:?} {limit}"
        );
    }
    assert!(matches!(
        q.messages_by_key("k0", 0).await,
        Err(Error::InvalidArgument(_))
    ));
    db.drop().await;
}

sqlmq_testkit::conformance!(
    async: [
        each_state_is_listed_in_order_a_page_at_a_time,
        a_message_is_found_by_id_in_any_state_and_by_key,
        browsing_changes_nothing_a_consumer_sees,
        bad_cursors_and_limits_are_refused,
    ]
);
