"""Orders and their emails, the README's first program in Python: an order and its message
written in one transaction of the application's own driver (PyMySQL, with ``CALL sqlmq_send``),
then a worker whose handler marks the order mailed and acks the message in one transaction
(``CALL sqlmq_ack``), so the mail is recorded exactly once.

    python examples/orders.py mysql://root@127.0.0.1:3306/test

It creates a table ``orders`` and a queue ``emails``, handles the three orders it sends, and
prints what it did.
"""

import sys
import urllib.parse

import pymysql

import sqlmq

url = sys.argv[1] if len(sys.argv) > 1 else "mysql://root@127.0.0.1:3306/test"
u = urllib.parse.urlparse(url)


def connect():
    return pymysql.connect(
        host=u.hostname,
        port=u.port or 3306,
        user=urllib.parse.unquote(u.username or "root"),
        password=urllib.parse.unquote(u.password or ""),
        database=u.path.lstrip("/"),
    )


client = sqlmq.Client.connect(url)
client.migrate()
client.create_queue("emails", max_attempts=5)

app = connect()
with app.cursor() as cur:
    cur.execute(
        "CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, mailed INT NOT NULL DEFAULT 0)"
    )
    cur.execute("DELETE FROM orders")
app.commit()

# Each order and its message: both or neither.
for order in (41, 42, 43):
    with app.cursor() as cur:
        app.begin()
        cur.execute("INSERT INTO orders (id) VALUES (%s)", (order,))
        cur.execute(
            "CALL sqlmq_send(%s, %s, NULL, NULL, NULL, NULL, NULL, NULL)",
            ("emails", f'{{"order": {order}}}'.encode()),
        )
        cur.fetchall()
        app.commit()

worker = sqlmq.Worker(client, concurrency=4)


@worker.queue("emails")
def mail(d, ctx):
    order = int(d.text.split(":")[1].strip(" }"))
    # (a real handler sends the mail here)
    db = connect()  # handlers run on several threads: a connection each (or a pool)
    try:
        with db.cursor() as cur:
            db.begin()
            cur.execute("UPDATE orders SET mailed = mailed + 1 WHERE id = %s", (order,))
            cur.execute("CALL sqlmq_ack(%s, %s)", ("emails", str(ctx.receipt)))
            cur.fetchall()
            db.commit()  # the mark and the ack, or neither
    finally:
        db.close()
    return sqlmq.Settled()


report = worker.run(stop_when_drained=True)
with app.cursor() as cur:
    cur.execute("SELECT id, mailed FROM orders ORDER BY id")
    print("orders (id, times mailed):", cur.fetchall())
print(report)
