"""Python worker processes killed with ``kill -9``: a killed process's messages come back and
are handled by another, none lost; and handlers that write with SQLAlchemy and ack with the SQL
contract in the same transaction apply each message's effect exactly once across random kills
(MySQL/MariaDB)."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

import sqlmq

HERE = os.path.dirname(os.path.abspath(__file__))


def spawn(url, queue, mode, lease, cwd):
    p = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "worker_process.py"), url, queue, mode, str(lease)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


def eventually(deadline, what, check):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline} s: {what}")


def lines(cwd, prefix):
    found = []
    for name in os.listdir(cwd):
        if name.startswith("handled."):
            with open(os.path.join(cwd, name)) as f:
                found += [l.split()[1] for l in f if l.startswith(prefix)]
    return found


def test_a_killed_workers_messages_are_handled_by_another(url, tmp_path):
    client = sqlmq.Client.connect(url)
    client.migrate()
    q = client.create_queue("jobs")
    sent = {s.id for s in q.send_batch([b"hang 1", b"hang 2", b"hang 3"])}
    first = spawn(url, "jobs", "record", 1.5, tmp_path)
    eventually(30, "the first worker holds all three", lambda: set(lines(tmp_path, "claimed")) == sent)
    first.kill()  # SIGKILL, mid-handler
    first.wait()
    assert lines(tmp_path, "handled") == []
    second = spawn(url, "jobs", "record", 1.5, tmp_path)
    try:
        eventually(60, "the second handled all three", lambda: set(lines(tmp_path, "handled")) == sent)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=60) == 0, second.stderr.read()
    stats = q.stats()
    assert (stats.pending, stats.dead) == (0, 0), stats
    client.close()


@pytest.mark.parametrize("url", ["mysql"], indirect=True)
def test_exactly_once_effects_across_random_kills(url, tmp_path):
    import pymysql

    client = sqlmq.Client.connect(url)
    client.migrate()
    q = client.create_queue("jobs")
    db = url.rsplit("/", 1)[1]
    from conftest import _server

    admin = pymysql.connect(**_server(), database=db, autocommit=True)
    with admin.cursor() as cur:
        cur.execute("CREATE TABLE effects (id CHAR(36) NOT NULL)")
    n, waves = 1000, 4
    rng = random.Random(7)
    workers = [spawn(url, "jobs", "exactly-once", 2.0, tmp_path) for _ in range(3)]
    kills = 0
    deadline = time.monotonic() + 240
    try:
        # Each wave is sent, then a worker is killed while the wave is being handled: a
        # handler holds its transaction open 50 ms between its insert and its ack, so three
        # workers of four slots take a wave of 250 in a second at least, and the kill (at
        # most 0.4 s after the send) lands mid-wave, often between a handler's insert and its
        # ack, however fast the machine is.
        per_wave = n // waves

        def effects():
            with admin.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM effects")
                return cur.fetchone()[0]

        for w in range(waves):
            before = effects()
            q.send_batch([f"job {w * per_wave + i}".encode() for i in range(per_wave)])
            time.sleep(rng.uniform(0.05, 0.4))
            # The workers are at it: this wave's effects are committing, and some are left.
            eventually(30, "the wave's first effects", lambda: effects() > before)
            assert q.stats().pending > 0, "the wave was handled before the kill"
            victim = workers.pop(rng.randrange(len(workers)))
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            kills += 1
            workers.append(spawn(url, "jobs", "exactly-once", 2.0, tmp_path))
        while q.stats().pending > 0:
            assert time.monotonic() < deadline, f"not drained: {q.stats()}"
            time.sleep(0.1)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=60)
            except subprocess.TimeoutExpired:
                w.kill()
    with admin.cursor() as cur:
        cur.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM effects")
        rows, distinct = cur.fetchone()
    assert (rows, distinct) == (n, n), f"{rows} rows for {distinct} messages after {kills} kills"
    assert kills == waves
    assert q.stats().dead == 0
    admin.close()
    client.close()
