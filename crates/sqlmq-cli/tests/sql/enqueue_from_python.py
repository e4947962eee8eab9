"""Enqueue into sqlmq from Python, inside the application's own transactions.

The SQL contract of the guide ("Sending from SQL"): `CALL sqlmq_send(queue, body, id,
priority, delay_ms, ordering_key, idempotency_key, headers)` answers one row (id, uuid,
duplicate). Run by `tests/sql_contract.rs` with the admin URL (to create the application's own
table) and the application's URL (a user with only the runtime grants); prints, as JSON, the
messages that must now be delivered.
"""

import json
import sys
import uuid
from urllib.parse import unquote, urlparse

import pymysql


def connect(url):
    u = urlparse(url)
    return pymysql.connect(
        host=u.hostname,
        port=u.port or 3306,
        user=unquote(u.username or ""),
        password=unquote(u.password or ""),
        database=u.path.lstrip("/"),
        autocommit=True,
    )


def send(cur, queue, body, id=None, priority=None, delay_ms=None, ordering_key=None,
         idempotency_key=None, headers=None):
    cur.execute(
        "CALL sqlmq_send(%s, %s, %s, %s, %s, %s, %s, %s)",
        (queue, body, id, priority, delay_ms, ordering_key, idempotency_key,
         None if headers is None else json.dumps(headers)),
    )
    _, text, duplicate = cur.fetchone()
    while cur.nextset():  # the CALL's own status
        pass
    return text, bool(duplicate)


def refused(cur, *args, **kwargs):
    """The server's error number and message for a send that must fail."""
    try:
        send(cur, *args, **kwargs)
    except pymysql.MySQLError as e:
        return e.args[0], e.args[1]
    raise AssertionError(f"send {args} {kwargs} was accepted")


def main(admin_url, app_url):
    admin = connect(admin_url)
    admin.cursor().execute("CREATE TABLE orders (id INT PRIMARY KEY, total INT NOT NULL)")
    app = connect(app_url)
    cur = app.cursor()
    expect = {}

    # A business transaction that rolls back takes its message with it.
    app.begin()
    cur.execute("INSERT INTO orders (id, total) VALUES (1, 100)")
    send(cur, "orders", b"order 1 placed")
    app.rollback()

    # One that commits: the order row and its message, with a header and an ordering key.
    app.begin()
    cur.execute("INSERT INTO orders (id, total) VALUES (2, 250)")
    first, dup = send(cur, "orders", b"order 2 placed", ordering_key="customer-7",
                      headers={"tenant": "acme"}, priority=-1)
    assert not dup
    app.commit()
    expect[first] = "order 2 placed"

    # Outside a transaction the procedure commits by itself. A second message of the key
    # waits behind the first until it is acked.
    second, _ = send(cur, "orders", b"order 2 shipped", ordering_key="customer-7")
    expect[second] = "order 2 shipped"

    # An idempotency key: the second send is a duplicate answering the first id.
    once, dup = send(cur, "orders", b"invoice 2", idempotency_key="invoice-2")
    again, dup_again = send(cur, "orders", b"invoice 2", idempotency_key="invoice-2")
    assert (once, dup, dup_again) == (again, False, True), (once, again, dup, dup_again)
    expect[once] = "invoice 2"

    # An id of the caller's: sending it again is a no-op answering the same id.
    own = uuid.UUID(int=(uuid.uuid4().int & ~(0xF << 76)) | (0x7 << 76))
    sent, dup = send(cur, "orders", b"with my id", id=own.bytes)
    resent, dup_again = send(cur, "orders", b"with my id", id=own.bytes)
    assert (sent, resent, dup, dup_again) == (str(own), str(own), False, True)
    expect[sent] = "with my id"

    # A delay.
    later, _ = send(cur, "orders", b"in half a second", delay_ms=500)
    expect[later] = "in half a second"

    # Bad input is refused with the server's error 1644 (SIGNAL) and writes nothing.
    for args, kwargs, needle in [
        (("no-such-queue", b"x"), {}, "no queue of that name"),
        (("orders", None), {}, "body is NULL"),
        (("orders", b"x"), {"headers": [1]}, "headers must be a JSON object of strings"),
        (("orders", b"x"), {"headers": {"n": 1}}, "headers must be a JSON object of strings"),
        (("orders", b"x"), {"priority": 40000}, "priority is outside"),
        (("orders", b"x"), {"delay_ms": -1}, "delay_ms is outside"),
        (("orders", b"x"), {"ordering_key": "a\nb"}, "ordering_key must be"),
        (("orders", b"x"), {"id": b"short"}, "id must be 16 bytes"),
    ]:
        number, message = refused(cur, *args, **kwargs)
        assert number == 1644 and needle in message, (number, message)

    # A failed send inside a transaction leaves the transaction to its owner, with nothing of
    # the message in it.
    app.begin()
    cur.execute("INSERT INTO orders (id, total) VALUES (3, 300)")
    refused(cur, "no-such-queue", b"x")
    app.commit()

    cur.execute("SELECT id FROM orders ORDER BY id")
    assert [r[0] for r in cur.fetchall()] == [2, 3]
    print(json.dumps({"expect": expect, "first": first, "second": second}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
