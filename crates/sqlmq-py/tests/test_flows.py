"""Topics and consumer groups, schedules, batches and dependencies from Python, on SQLite and
MySQL/MariaDB."""

import asyncio
import time

import pytest

import sqlmq


def test_a_topic_is_read_by_its_groups(client):
    orders = client.create_topic("orders", partitions=2)
    assert (orders.name, orders.partitions) == ("orders", 2)
    orders.publish(b"paid", key="customer-7")
    orders.publish_batch([(b"shipped", "customer-7"), b"no key"])
    billing = orders.create_group("billing")
    audit = orders.create_group("audit", start="earliest")
    for group in (billing, audit):
        got = []
        for _ in range(20):
            got += group.receive(10, lease=30)
            if len(got) == 3:
                break
            time.sleep(0.05)
        assert sorted(d.body for d in got) == [b"no key", b"paid", b"shipped"]
        keyed = [d for d in got if d.ordering_key == "customer-7"]
        assert [d.body for d in sorted(keyed, key=lambda d: d.offset)] == [b"paid", b"shipped"]
        for d in got:
            group.ack(d.receipt)
        assert group.receive(10, lease=30) == []
    async def more():
        await orders.publish_async(b"async")
        got = []
        for _ in range(20):
            got += await billing.receive_async(10, 30)
            if got:
                break
            await asyncio.sleep(0.05)
        await asyncio.gather(*(billing.ack_async(d.receipt) for d in got))
        return [d.body for d in got]

    assert asyncio.run(more()) == [b"async"]
    late = orders.create_group("late", start="latest")
    assert late.receive(10, lease=30) == []
    assert orders.group("billing").name == "orders/billing"
    with pytest.raises(sqlmq.UnknownGroup):
        orders.group("nope")
    with pytest.raises(sqlmq.UnknownTopic):
        client.topic("nope")


def test_a_worker_handles_a_consumer_group(client):
    orders = client.create_topic("orders")
    orders.create_group("billing")
    orders.publish_batch([f"o{i}".encode() for i in range(10)])
    worker = sqlmq.Worker(client)
    seen = []

    @worker.group("orders", "billing")
    def bill(d, ctx):
        assert ctx.source == "orders/billing"
        seen.append(d.body)

    worker.run(max_messages=10)
    assert sorted(seen) == sorted(f"o{i}".encode() for i in range(10))


def test_a_schedule_fires_into_a_queue(client):
    q = client.create_queue("ticks")
    s = client.create_schedule("tick", queue="ticks", every=1, body=b"tick")
    assert s.name == "tick" and s.next_fire is not None
    worker = sqlmq.Worker(client)
    seen = []

    @worker.queue("ticks")
    def tick(d, ctx):
        seen.append(d.body)

    worker.run(max_messages=1)  # the worker fires the schedules too
    assert seen == [b"tick"]
    assert [s.name for s in client.schedules()] == ["tick"]
    client.delete_schedule("tick")
    assert client.schedules() == []
    with pytest.raises(sqlmq.InvalidInput):
        client.create_schedule("bad", queue="ticks")
    with pytest.raises(sqlmq.InvalidInput):
        client.create_schedule("bad", queue="ticks", cron="61 * * * *")
    assert q.stats().dead == 0


def test_a_batch_sends_its_callback_once_after_its_last_member(client):
    jobs = client.create_queue("jobs")
    client.create_queue("done")
    created = client.create_batch(
        "jobs", [b"a", b"b", sqlmq.Message(b"c")], on_success=("done", b"all done")
    )
    assert len(created.members) == 3
    assert client.batch(created.id).state == "sealed"
    for d in jobs.receive(10, lease=30):
        jobs.ack(d.receipt)
    status = client.batch(created.id)
    assert (status.state, status.succeeded, status.pending) == ("finished", 3, 0)
    done = client.queue("done").receive(10, lease=30)
    assert [d.body for d in done] == [b"all done"]
    with pytest.raises(sqlmq.BatchNotFound):
        client.batch("01a2aaaa-0000-7000-8000-000000000000")


def test_a_dependant_waits_for_its_dependency(client):
    q = client.create_queue("jobs")
    first = q.send(b"first")
    q.send(sqlmq.Message(b"second", depends_on=[first.id]))
    got = q.receive(10, lease=30)
    assert [d.body for d in got] == [b"first"]
    assert q.stats().waiting == 1
    q.ack(got[0].receipt)
    assert [d.body for d in q.receive(10, lease=30)] == [b"second"]
    with pytest.raises(sqlmq.DependencyNotFound):
        q.send(sqlmq.Message(b"orphan", depends_on=["01a2aaaa-0000-7000-8000-000000000000"]))
