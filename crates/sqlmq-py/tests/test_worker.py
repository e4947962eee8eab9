"""The worker runtime with Python handlers, on SQLite and MySQL/MariaDB: plain and coroutine
handlers, every outcome, exceptions retried with their traceback kept, stopping when drained or
after a number of messages."""

import asyncio
import threading
import time

import sqlmq


def test_a_plain_handler_handles_every_message(client):
    q = client.create_queue("emails")
    q.send_batch([f"m{i}".encode() for i in range(50)])
    seen = []
    lock = threading.Lock()
    worker = sqlmq.Worker(client, concurrency=8)

    @worker.queue("emails")
    def handle(d, ctx):
        assert ctx.source == "emails" and ctx.attempt == d.attempt == 1
        assert ctx.receipt == d.receipt
        with lock:
            seen.append(d.body)

    report = worker.run(stop_when_drained=True)
    assert report.acked == 50
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(50))
    assert q.stats().pending == 0


def test_exceptions_are_retried_then_dead_lettered_with_their_traceback(client):
    q = client.create_queue("jobs", max_attempts=2, backoff=[0])
    q.send(b"poison")
    worker = sqlmq.Worker(client, poll_interval=(0.01, 0.05))
    attempts = []

    @worker.queue("jobs")
    def handle(d, ctx):
        attempts.append(ctx.attempt)
        raise ValueError(f"cannot handle {d.body!r}")

    report = worker.run(max_messages=2)
    assert attempts == [1, 2]
    assert (report.retried, report.dead_lettered) == (1, 1)
    ((_, tries, error),) = q.dead_letters()
    assert tries == 2
    assert error.startswith("ValueError: cannot handle b'poison'")
    assert "Traceback" in error and "in handle" in error


def test_every_outcome(client):
    q = client.create_queue("jobs", max_attempts=5)
    q.send_batch([b"done", b"retry", b"snooze", b"dead"])
    worker = sqlmq.Worker(client)
    calls = {}

    @worker.queue("jobs")
    def handle(d, ctx):
        calls[d.body] = calls.get(d.body, 0) + 1
        if d.body == b"retry":
            return sqlmq.Retry(3600, "not yet")
        if d.body == b"snooze":
            return sqlmq.Snooze(3600)
        if d.body == b"dead":
            return sqlmq.DeadLetter("no such customer")
        return None

    report = worker.run(stop_when_drained=True)
    assert (report.acked, report.retried, report.snoozed, report.dead_lettered) == (1, 1, 1, 1)
    stats = q.stats()
    assert (stats.scheduled, stats.dead, stats.pending) == (2, 1, 2)
    assert q.dead_letters()[0][2] == "no such customer"


def test_a_wrong_return_value_is_a_failed_attempt(client):
    q = client.create_queue("jobs", max_attempts=1)
    q.send(b"x")
    worker = sqlmq.Worker(client)

    @worker.queue("jobs")
    def handle(d, ctx):
        return "ok"

    report = worker.run(stop_when_drained=True)
    assert report.dead_lettered == 1
    assert "return None (done)" in q.dead_letters()[0][2]


def test_coroutine_handlers_run_on_the_asyncio_loop(client):
    q = client.create_queue("jobs")
    q.send_batch([f"m{i}".encode() for i in range(20)])
    worker = sqlmq.Worker(client, concurrency=10)
    running = []
    most = [0]

    @worker.queue("jobs")
    async def handle(d, ctx):
        running.append(d.id)
        most[0] = max(most[0], len(running))
        await asyncio.sleep(0.05)
        await ctx.extend_async(30)
        running.remove(d.id)

    report = worker.run(stop_when_drained=True)
    assert report.acked == 20
    assert most[0] > 1, "coroutines overlapped"


def test_run_async_inside_an_application_loop(client):
    q = client.create_queue("jobs")
    q.send_batch([b"a", b"b"])
    worker = sqlmq.Worker(client)
    seen = []

    @worker.queue("jobs")
    async def handle(d, ctx):
        seen.append(d.body)

    async def main():
        return await worker.run_async(stop_when_drained=True)

    assert asyncio.run(main()).acked == 2
    assert sorted(seen) == [b"a", b"b"]


def test_a_run_timeout_cancels_the_handler_and_dead_letters_the_message(client):
    q = client.create_queue("jobs", max_attempts=5)
    q.send(sqlmq.Message(b"slow", run_timeout=0.5))
    seen = {}
    worker = sqlmq.Worker(client, poll_interval=(0.01, 0.05))

    @worker.queue("jobs")
    def handle(d, ctx):
        seen["deadline"], seen["run_timeout"] = ctx.deadline, d.run_timeout
        for i in range(1000):
            if ctx.cancelled:
                seen["stopped_at"] = i
                return
            ctx.progress({"done": i, "of": 1000})
            time.sleep(0.01)

    report = worker.run(max_messages=1)
    assert report.dead_lettered == 1
    ((_, tries, error),) = q.dead_letters()
    assert (tries, error) == (1, "run timeout of 500ms exceeded")
    assert seen["run_timeout"] == 0.5
    assert seen["deadline"].tzinfo is not None
    deadline = time.monotonic() + 5
    while "stopped_at" not in seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 10 < seen["stopped_at"] < 1000, seen


def test_unknown_queues_and_bad_handlers_are_refused(client):
    worker = sqlmq.Worker(client)

    @worker.queue("missing")
    def handle(d, ctx):
        pass

    try:
        worker.run(stop_when_drained=True)
    except sqlmq.UnknownQueue:
        pass
    else:
        raise AssertionError("expected UnknownQueue")
    try:
        sqlmq.Worker(client).queue("jobs")(42)
    except TypeError:
        pass
    else:
        raise AssertionError("expected TypeError")
