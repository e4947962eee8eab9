"""Fixtures of the Python package's tests: a fresh database per test, on SQLite and on
MySQL/MariaDB.

The MySQL/MariaDB server is the one ``SQLMQ_TEST_DATABASE_URL`` names, else MariaDB on
127.0.0.1:3306 as root without a password (what ``scripts/test.sh`` starts); each test gets a
database of its own, dropped after it.
"""

import os
import urllib.parse
import uuid

import pymysql
import pytest

import sqlmq

SERVER_URL = os.environ.get("SQLMQ_TEST_DATABASE_URL", "mysql://root@127.0.0.1:3306/test")


def _server():
    u = urllib.parse.urlparse(SERVER_URL)
    return {
        "host": u.hostname or "127.0.0.1",
        "port": u.port or 3306,
        "user": urllib.parse.unquote(u.username or "root"),
        "password": urllib.parse.unquote(u.password or ""),
    }


def _url(database):
    s = _server()
    auth = urllib.parse.quote(s["user"])
    if s["password"]:
        auth += ":" + urllib.parse.quote(s["password"])
    return f"mysql://{auth}@{s['host']}:{s['port']}/{database}"


class MySqlDatabase:
    """A throwaway database on the test server."""

    def __init__(self):
        self.name = "sqlmq_py_" + uuid.uuid4().hex[:12]
        self.url = _url(self.name)
        with self.connect(None) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{self.name}`")

    def connect(self, database="", **kw):
        args = dict(_server(), autocommit=True, **kw)
        if database is not None:
            args["database"] = database or self.name
        return pymysql.connect(**args)

    def drop(self):
        with self.connect(None) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{self.name}`")


@pytest.fixture(params=["sqlite", "mysql"])
def url(request, tmp_path):
    """A fresh, empty database of each backend."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path}/test.db"
    else:
        db = MySqlDatabase()
        try:
            yield db.url
        finally:
            db.drop()


@pytest.fixture
def mysql_db():
    """A fresh MySQL/MariaDB database (the SQL contract's tests)."""
    db = MySqlDatabase()
    try:
        yield db
    finally:
        db.drop()


@pytest.fixture
def client(url):
    """A migrated client of each backend."""
    c = sqlmq.Client.connect(url)
    c.migrate()
    try:
        yield c
    finally:
        c.close()
