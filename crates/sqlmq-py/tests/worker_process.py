"""A worker process of the multi-process tests (``test_processes.py``).

    python worker_process.py URL QUEUE MODE LEASE

MODE ``record``: each message's id is appended to ``handled.<pid>`` in the working directory
when it is claimed and when it is handled; a body starting with ``hang`` makes the handler wait
a minute on its first delivery (so that a ``kill -9`` finds it mid-handler). MODE ``exactly-once`` (MySQL/MariaDB): each message inserts a row into
``effects`` with SQLAlchemy and acks itself with ``CALL sqlmq_ack`` in the same transaction,
50 ms later.
The worker runs until SIGTERM or the queue is drained.
"""

import os
import sys
import time

import sqlmq

url, queue, mode, lease = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
client = sqlmq.Client.connect(url)
worker = sqlmq.Worker(client, concurrency=4, lease=lease, poll_interval=(0.01, 0.1))

if mode == "record":
    log = open(f"handled.{os.getpid()}", "a", buffering=1)

    @worker.queue(queue)
    def record(d, ctx):
        log.write(f"claimed {d.id}\n")
        if d.body.startswith(b"hang") and d.attempt == 1:
            time.sleep(60)
        log.write(f"handled {d.id}\n")

elif mode == "exactly-once":
    import sqlalchemy

    mysql = url.replace("mysql://", "mysql+pymysql://", 1)
    engine = sqlalchemy.create_engine(mysql, pool_size=4)

    @worker.queue(queue)
    def effect(d, ctx):
        with engine.begin() as conn:
            conn.execute(
                sqlalchemy.text("INSERT INTO effects (id) VALUES (:id)"), {"id": d.id}
            )
            # Held open between the effect and the ack: a kill lands here often.
            time.sleep(0.05)
            conn.execute(
                sqlalchemy.text("CALL sqlmq_ack(:queue, :receipt)"),
                {"queue": queue, "receipt": str(ctx.receipt)},
            )
        return sqlmq.Settled()

else:
    sys.exit(f"unknown mode {mode}")

print("ready", flush=True)
worker.run()
