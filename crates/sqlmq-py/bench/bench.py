"""The Python package against the Rust library, in one sitting (docs/BENCHMARKS.md, "Python").

    python bench/bench.py URL [MESSAGES] [ROUNDS]

Two figures, each a ratio within a round, rounds interleaved:

- send: ``Queue.send`` of single 100-byte messages called from one Python thread, against the
  same sends from a loop of the library's own (``Queue._send_loop``): what crossing into Python
  costs each send.
- worker: a ``Worker`` (8 slots, claims of up to 100, default lease) draining a pre-filled queue
  with a no-op Python handler, against the same worker with the runtime's own no-op handler (a
  handler of ``None``): what calling Python costs each message.

Build the package with ``maturin develop --release`` first: a debug build measures nothing.
"""

import json
import statistics
import sys
import time

import sqlmq

BODY = b"x" * 100
url = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5

client = sqlmq.Client.connect(url)
client.migrate()


def fresh(name):
    try:
        client.delete_queue(name)
    except sqlmq.UnknownQueue:
        pass
    return client.create_queue(name)


def python_send(q):
    started = time.perf_counter()
    for _ in range(n):
        q.send(BODY)
    return time.perf_counter() - started


def drain(name, handler):
    q = fresh(name)
    for start in range(0, n, 1000):
        q.send_batch([BODY] * min(1000, n - start))
    worker = sqlmq.Worker(client, concurrency=8)
    if handler is None:
        worker._sources.append((name, None, False, None))
    else:
        worker.queue(name)(handler)
    started = time.perf_counter()
    report = worker.run(stop_when_drained=True)
    elapsed = time.perf_counter() - started
    assert report.acked == n, report
    return elapsed


def noop(d, ctx):
    return None


rows = []
for r in range(rounds):
    py_send = n / python_send(fresh("bench_py_send"))
    rust_send = n / fresh("bench_rust_send")._send_loop(n, BODY)
    py_worker = n / drain("bench_py_worker", noop)
    rust_worker = n / drain("bench_rust_worker", None)
    rows.append(
        {
            "python_send": py_send,
            "rust_send": rust_send,
            "send_ratio": py_send / rust_send,
            "python_worker": py_worker,
            "rust_worker": rust_worker,
            "worker_ratio": py_worker / rust_worker,
        }
    )
    print(
        f"round {r + 1}: send {py_send:,.0f} vs {rust_send:,.0f} msg/s ({py_send / rust_send:.2f}x); "
        f"worker {py_worker:,.0f} vs {rust_worker:,.0f} msg/s ({py_worker / rust_worker:.2f}x)",
        flush=True,
    )
summary = {
    "url": url.split("@")[-1],
    "messages": n,
    "rounds": rows,
    "median_send_ratio": statistics.median(r["send_ratio"] for r in rows),
    "median_worker_ratio": statistics.median(r["worker_ratio"] for r in rows),
}
print(json.dumps(summary, indent=1))
