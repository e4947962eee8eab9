"""Queues from Python, on SQLite and MySQL/MariaDB: the first program of the README, batches,
retries and dead letters, leases, and typed errors for bad input."""

import asyncio
import datetime
import time

import pytest

import sqlmq


def test_the_first_program(client):
    emails = client.create_queue("emails")
    sent = emails.send(b'{"order": 42}')
    assert not sent.duplicate
    got = emails.receive(10, lease=30)
    assert [(d.id, d.body, d.attempt) for d in got] == [(sent.id, b'{"order": 42}', 1)]
    d = got[0]
    assert isinstance(d.enqueued_at, datetime.datetime) and d.enqueued_at.tzinfo is not None
    assert d.lease_expires_at > d.enqueued_at
    assert str(d.receipt) == f"{d.id}:{d.receipt.token}"
    emails.ack(d.receipt)
    stats = emails.stats()
    assert (stats.name, stats.pending, stats.dead) == ("emails", 0, 0)


def test_a_batch_is_delivered_in_order_with_its_options(client):
    q = client.create_queue("jobs")
    sent = q.send_batch(
        [
            b"b1",
            "b2 as text",
            sqlmq.Message(b"urgent", priority=-1, headers={"tenant": "acme"}),
            sqlmq.Message(b"later", delay=3600),
        ]
    )
    assert len(sent) == 4
    got = q.receive(10, lease=30)
    assert [d.body for d in got] == [b"urgent", b"b1", b"b2 as text"]
    assert got[0].headers == {"tenant": "acme"} and got[0].priority == -1
    assert got[2].text == "b2 as text"
    lost = q.ack_batch([d.receipt for d in got])
    assert lost == []
    stats = q.stats()
    assert (stats.scheduled, stats.ready, stats.in_flight) == (1, 0, 0)


def test_an_id_sent_again_is_a_duplicate_of_the_first(client):
    q = client.create_queue("jobs")
    m = sqlmq.Message(b"once")
    first = q.send(m)
    again = q.send(sqlmq.Message(b"twice", id=m.id))
    assert (first.id, first.duplicate, again.id, again.duplicate) == (m.id, False, m.id, True)
    assert q.stats().ready == 1


def test_failures_are_retried_then_dead_lettered_and_redriven(client):
    q = client.create_queue("jobs", max_attempts=2, backoff=[0])
    q.send(b"poison")
    for attempt in (1, 2):
        d = q.receive(1, lease=30)[0]
        assert d.attempt == attempt
        outcome = q.nack(d.receipt, error=f"failed {attempt}", retry_in=0)
        assert outcome == ("retried" if attempt == 1 else "dead")
    (dead,) = q.dead_letters()
    assert dead[1:] == (2, "failed 2")
    assert q.redrive() == 1
    assert q.receive(1, lease=30)[0].attempt == 1


def test_a_message_past_its_deadline_is_dead_lettered_not_delivered(client):
    q = client.create_queue("jobs")
    now = datetime.datetime.now(datetime.timezone.utc)
    q.send(sqlmq.Message(b"late", deadline=now - datetime.timedelta(seconds=1)))
    q.send(sqlmq.Message(b"on time", deadline=now + datetime.timedelta(hours=1), run_timeout=30))
    got = q.receive(10, lease=30)
    assert [d.body for d in got] == [b"on time"]
    (dead,) = q.dead_letters()
    assert dead[1:] == (1, "deadline passed")
    with pytest.raises(sqlmq.InvalidInput):
        q.send(sqlmq.Message(b"x", run_timeout=0))


def test_a_replacing_send_takes_the_waiting_messages_place(client):
    q = client.create_queue("jobs")
    first = q.send(sqlmq.Message(b"1", replace_key="k"))
    second = q.send(sqlmq.Message(b"2", replace_key="k"))
    assert (second.id, second.replaced, second.duplicate) == (first.id, True, False)
    debounced = q.send(sqlmq.Message(b"d", replace_key="d", debounce=3600))
    assert not debounced.replaced
    got = q.receive(10, lease=30)
    assert [(d.id, d.body) for d in got] == [(first.id, b"2")]
    assert q.stats().scheduled == 1
    with pytest.raises(sqlmq.InvalidInput):
        sqlmq.Message(b"x", debounce=1)


def test_a_fair_queue_shares_deliveries_across_keys_by_weight(client):
    q = client.create_queue("tenants", fair=True)
    q.set_weight("small", 2)
    q.send_batch([sqlmq.Message(b"big", fairness_key="big") for _ in range(300)])
    q.send_batch([sqlmq.Message(b"small", fairness_key="small") for _ in range(30)])
    keys = q.fairness_keys(5)
    assert [(k.key, k.weight, k.ready, k.in_flight, k.arrived) for k in keys] == [
        ("big", 1, 300, 0, 300),
        ("small", 2, 30, 0, 30),
    ]
    got = q.receive(30, lease=30)
    small = sum(1 for d in got if d.body == b"small")
    in_flight = {k.key: k.in_flight for k in q.fairness_keys(5)}
    assert in_flight == {"big": 30 - small, "small": small}, in_flight
    q.ack(next(d for d in got if d.body == b"small").receipt)
    settled = {k.key: k.settled for k in q.fairness_keys(5)}
    assert settled == {"big": 0, "small": 1}, settled
    # Weight 2 against 1: two thirds of the first claims, not none of them.
    assert 18 <= small <= 22, small
    with pytest.raises(sqlmq.InvalidInput):
        q.set_weight("small", 0)


def test_a_lease_that_ended_cannot_ack_or_extend(client):
    q = client.create_queue("jobs")
    q.send(b"slow")
    d = q.receive(1, lease=0.2)[0]
    q.extend(d.receipt, lease=0.3)
    time.sleep(0.5)
    with pytest.raises(sqlmq.LeaseLost):
        q.ack(d.receipt)
    with pytest.raises(sqlmq.LeaseLost):
        q.extend(d.receipt, lease=30)
    # A stale receipt from its text, once the message was claimed again.
    again = q.receive(1, lease=30)
    if not again:  # the expired lease is released by the next claim's housekeeping
        time.sleep(0.3)
        again = q.receive(1, lease=30)
    assert again[0].attempt == 2
    with pytest.raises(sqlmq.LeaseLost):
        q.ack(str(d.receipt))
    q.ack(sqlmq.Receipt.parse(str(again[0].receipt)))


def test_bad_input_is_a_typed_error_and_writes_nothing(client):
    with pytest.raises(sqlmq.InvalidName):
        client.create_queue("no spaces")
    with pytest.raises(sqlmq.UnknownQueue):
        client.queue("missing")
    q = client.create_queue("jobs")
    with pytest.raises(sqlmq.PayloadTooLarge):
        q.send(b"x" * (1024 * 1024 + 1))
    with pytest.raises(sqlmq.InvalidInput):
        q.send(42)
    with pytest.raises(sqlmq.InvalidInput):
        q.ack("not a receipt")
    with pytest.raises(sqlmq.InvalidInput):
        q.receive(1, lease=-1)
    with pytest.raises(sqlmq.InvalidInput):
        sqlmq.Message(b"x", id="not a uuid")
    # Every error is an sqlmq.Error.
    assert issubclass(sqlmq.UnknownQueue, sqlmq.NotFound)
    assert issubclass(sqlmq.NotFound, sqlmq.Error)
    assert q.stats().pending == 0


def test_the_async_forms(client):
    q = client.create_queue("jobs")

    async def main():
        sent = await q.send_async(b"a")
        await q.send_batch_async([b"b", b"c"])
        got = await q.receive_async(10, 30)
        assert [d.body for d in got] == [b"a", b"b", b"c"] and got[0].id == sent.id
        await asyncio.gather(*(q.ack_async(d.receipt) for d in got))

    asyncio.run(main())
    assert q.stats().pending == 0


def test_queues_are_listed_paused_resumed_and_deleted(client):
    q = client.create_queue("jobs")
    q.send(b"x")
    q.pause()
    assert q.receive(1, lease=30) == []
    assert [s.name for s in client.queues()] == ["jobs"] and client.queues()[0].paused
    q.resume()
    assert len(q.receive(1, lease=30)) == 1
    client.delete_queue("jobs")
    with pytest.raises(sqlmq.UnknownQueue):
        client.queue("jobs")


def test_browsing_looks_without_taking(client):
    q = client.create_queue("jobs")
    sent = [s.id for s in q.send_batch([f"m{i}".encode() for i in range(5)])]
    q.send(sqlmq.Message(b"later", delay=3600))
    page, after = q.browse("ready", limit=3)
    assert [m.id for m in page] == sent[:3] and after is not None
    page, after = q.browse("ready", after=after, limit=3)
    assert [m.id for m in page] == sent[3:] and after is None
    (later,), _ = q.browse("scheduled")
    assert later.body == b"later" and later.run_at > later.enqueued_at
    d = q.receive(1, lease=30)[0]
    (held,), _ = q.browse("in_flight")
    assert held.id == d.id and held.owner and held.lease_until is not None
    assert q.message(sent[1]).state == "ready"
    q.ack(d.receipt)
    assert q.message(d.id) is None
    assert q.stats().ready == 4, "nothing was taken"
    with pytest.raises(sqlmq.InvalidInput):
        q.browse("nowhere")
