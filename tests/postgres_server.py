"""A real PostgreSQL server for the history store's tests.

``GPUPERF_TEST_POSTGRES`` (a ``postgresql://`` URL whose role may create databases) names a
server to use; without it a throwaway server is started from Debian's ``postgresql`` package
(``/usr/lib/postgresql/*/bin``, which ``scripts/test.sh`` installs where it can): data and socket in a temporary
folder, a free loopback port, run as the ``postgres`` user when the tests run as root (the
server refuses root), stopped at the end. When no server can be had the tests fail, they do
not skip: a store test that silently skipped PostgreSQL would prove nothing about it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

# Imported before any test, as torch is in conftest.py: pytester drops the modules first imported
# during a test, and then SQLAlchemy warns (an error here) when its dialects register their
# functions again, and does not recognise the error classes of a psycopg imported again.
import alembic.command
import alembic.runtime.migration
import alembic.script  # noqa: F401
import psycopg  # noqa: F401
import pytest
import sqlalchemy.dialects.postgresql.psycopg
import sqlalchemy.dialects.sqlite.pysqlite  # noqa: F401

ENV_VAR = "GPUPERF_TEST_POSTGRES"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThrowawayServer:
    """initdb + pg_ctl in a temporary folder; ``url`` connects to its ``postgres`` database."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise RuntimeError(
                "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin: install Debian's postgresql "
                f"package (scripts/test.sh does where it can) or set {ENV_VAR} to a server's postgresql:// URL"
            )
        self.bin = bin_dir
        self.folder = Path(tempfile.mkdtemp(prefix="gpuperf-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [*(["runuser", "-u", "postgres", "--"] if self.as_postgres else []), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                  "--no-sync")  # fmt: skip
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.folder / "server.log"),
                  "-w", "-t", "60", "start")  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server's maintenance database; fails the test when none can be had."""
    if os.environ.get(ENV_VAR):
        yield os.environ[ENV_VAR]
        return
    try:
        server = ThrowawayServer()
        server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired, KeyError) as exc:
        pytest.fail(f"a real PostgreSQL server is needed for the history store's tests and none could be "
                    f"started: {exc}", pytrace=False)  # fmt: skip
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, empty database on ``server_url``'s server (dropped afterwards); yields its URL."""
    import sqlalchemy
    from sqlalchemy.engine import make_url

    name = f"gpuperf_test_{uuid.uuid4().hex[:12]}"
    admin_url = make_url(server_url).set(drivername="postgresql+psycopg")
    admin = sqlalchemy.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.set(database=name, drivername="postgresql").render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store of each kind: a SQLite file, and a fresh database on the real PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'history.db'}"
        return
    with fresh_database(request.getfixturevalue("postgres_server")) as url:
        yield url
