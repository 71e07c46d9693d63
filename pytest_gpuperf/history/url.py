"""A history store's address: parsed, made safe to print, turned into a SQLAlchemy engine.

Accepted: ``sqlite:///path`` (or a plain path, the embedded default that needs nothing
installed) and ``postgresql://user:password@host/db`` (psycopg 3; ``postgres://`` and
``postgresql+psycopg://`` are the same). Every credential an address can carry (the
password of ``user:password@``, and any query parameter named like a secret:
``?password=``, ``sslpassword=``, ``passfile=``, a token or key) is only ever shown as
``***``: every message names a store through :func:`redact`.

A libpq keyword string (``host=db user=perf password=...``) is neither a URL nor a path:
it is refused, without echoing it, rather than taken for a SQLite file's name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Engine

CONNECT_TIMEOUT_S = 5  # PostgreSQL: an unreachable server is an error within seconds, not minutes
SQLITE_BUSY_TIMEOUT_S = 60  # SQLite: how long a writer waits for another process's transaction

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_POSTGRES_SCHEMES = {"postgres", "postgresql", "postgresql+psycopg"}
_SECRET_NAME = re.compile(r"pass|secret|token|key|cred|auth", re.IGNORECASE)  # a parameter that may hold one
MASK = "***"
# A libpq keyword/value pair (``password=...``, ``host = db``): the start of a connection string, not a file name.
_KEYWORD_PAIR = re.compile(r"(?:^|\s)[A-Za-z_]+\s*=")
# In text that is not a parsed URL: the password of ``user:password@``, and a secret parameter's value.
_USERINFO_PASSWORD = re.compile(r"(://[^:/@?#\s]*:)\S*@")  # to the last @: a password may hold one
_SECRET_PARAMETER = re.compile(r"((?:^|[?&;\s])[^=&;?#\s]*(?:pass|secret|token|key|cred|auth)[^=&;?#\s]*\s*=\s*)"
                               r"(?:'[^']*'|[^&;#\s]*)", re.IGNORECASE)  # fmt: skip


def parse_url(text: str) -> URL:
    """``text`` as a SQLAlchemy URL; a plain path is a SQLite file. StoreError on anything else."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    if not text.strip():
        raise StoreError("''", "empty store address: give sqlite:///PATH, a file path or postgresql://...")
    if not _SCHEME.match(text) and not text.startswith("sqlite:"):
        if text.split(":", 1)[0].lower() in _POSTGRES_SCHEMES:  # "postgresql:/db", "postgres:db": a mistyped URL
            raise StoreError(redact(text), "not a database address: write postgresql://USER@HOST/DB")
        if _KEYWORD_PAIR.search(text):
            raise StoreError(
                "(a keyword string)",
                "key=value settings are not a store address: give postgresql://USER@HOST/DB (the password "
                "in GPUPERF_HISTORY or ~/.pgpass), or a SQLite file's path",
            )
        return URL.create("sqlite", database=str(Path(text).expanduser().absolute()))
    try:
        url = make_url(text)
    except ArgumentError:
        raise StoreError(redact(text), "not a database address") from None
    if url.drivername in _POSTGRES_SCHEMES:
        return url.set(drivername="postgresql+psycopg")
    if url.drivername == "sqlite":
        if not url.database or url.database == ":memory:":
            raise StoreError(redact(text), "a history store needs a file: sqlite:///PATH")
        return url
    raise StoreError(redact(text), f"unsupported database {url.drivername!r}: use sqlite:///PATH or postgresql://...")


def redact(url: object) -> str:
    """The address with every credential it carries hidden, for messages and logs.

    A parsed URL or any text: the password of ``user:password@`` and the value of every
    query parameter named like a secret (``password``, ``sslpassword``, ``passfile``, ...).
    """
    if hasattr(url, "render_as_string"):
        text = str(url.render_as_string(hide_password=True))
    else:
        text = _USERINFO_PASSWORD.sub(rf"\1{MASK}@", str(url))
    return _SECRET_PARAMETER.sub(rf"\1{MASK}", text)


def secrets(url: URL) -> tuple[str, ...]:
    """The credentials a parsed URL carries (its password, its secret parameters' values), to scrub from errors."""
    found = [url.password] if url.password else []
    for name, value in url.query.items():
        if _SECRET_NAME.search(name):
            found.extend([value] if isinstance(value, str) else list(value))
    return tuple(str(v) for v in found if v)


def create_engine(url: URL, *, create: bool = True) -> Engine:
    """An engine for ``url`` (from :func:`parse_url`) with the store's connection settings.

    ``create=False`` (the commands that only read) refuses a SQLite file that does not exist,
    rather than making its folder and an empty store there: a mistyped path must not read as a
    store with no change points.
    """
    import sqlalchemy

    if url.drivername == "sqlite":
        if not create and not Path(url.database or "").is_file():
            raise StoreError(redact(url), "no store there: only recording (--gpuperf-history) and "
                             "`gpuperf history ingest` create one; check the path")  # fmt: skip
        folder = Path(url.database or "").parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(redact(url), f"cannot create the folder {folder}: {exc.strerror or exc}") from None
        engine = sqlalchemy.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        _sqlite_transactions(engine)
        return engine
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise StoreError(redact(url), "PostgreSQL needs psycopg 3: pip install 'pytest-gpuperf[postgres]'") from None
    return sqlalchemy.create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}, pool_pre_ping=True)


def _sqlite_transactions(engine: Engine) -> None:
    """Let SQLite transactions be real ones: BEGIN issued by us, IMMEDIATE for writers.

    Python's sqlite3 module (before 3.12's ``autocommit``) begins transactions lazily and
    not before DDL; SQLAlchemy's documented recipe hands BEGIN back to SQLAlchemy. A writer
    takes the write lock at BEGIN IMMEDIATE, so two processes never both read and then
    fail to upgrade their lock: the second waits (busy timeout) instead of erroring.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA foreign_keys = ON")

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        writer = connection.get_execution_options().get("gpuperf_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")
