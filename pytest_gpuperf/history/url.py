"""A history store's address: parsed, made safe to print, turned into a SQLAlchemy engine.

Accepted: ``sqlite:///path`` (or a plain path, the embedded default that needs nothing
installed) and ``postgresql://user:password@host/db`` (psycopg 3; ``postgres://`` and
``postgresql+psycopg://`` are the same). Every credential an address can carry (the
password of ``user:password@``, and any query parameter named like a secret:
``?password=``, ``sslpassword=``, ``passfile=``, a token or key) is only ever shown as
``***``: every message names a store through :func:`redact`.

A libpq keyword string (``host=db user=perf password=...``) is neither a URL nor a path:
it is refused, without echoing it, rather than taken for a SQLite file's name. An address
whose parts could be read more than one way (an unencoded ``@`` in the password, a broken
IPv6 bracket) is refused as malformed, naming the rule it breaks (:func:`ambiguity`): read
wrongly, part of the password would be taken for the host and shown. Every refusal is a
StoreAddressError naming the setting the address came from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.errors import StoreAddressError, StoreError

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
# The user name ends at the first ':' (it may hold an unencoded '@'); the password runs to the last '@'.
_USERINFO_PASSWORD = re.compile(r"(://[^:/?#\s]*?:).*@", re.S)
_SECRET_PARAMETER = re.compile(r"((?:^|[?&;\s])[^=&;?#\s]*(?:pass|secret|token|key|cred|auth)[^=&;?#\s]*\s*=\s*)"
                               r"(?:'[^']*'|[^&;#\s]*)", re.IGNORECASE)  # fmt: skip


def parse_url(text: str, *, setting: str | None = None) -> URL:
    """``text`` as a SQLAlchemy URL; a plain path is a SQLite file.

    StoreAddressError, naming ``setting`` (where the address came from), on anything else: an
    address that is not a store's, or one that does not read one way only (:func:`ambiguity`).
    """
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    def refuse(shown: str, message: str) -> StoreAddressError:
        return StoreAddressError(shown, message, setting=setting)

    if not text.strip():
        raise refuse("''", "empty store address: give sqlite:///PATH, a file path or postgresql://...")
    if not _SCHEME.match(text) and not text.startswith("sqlite:"):
        if text.split(":", 1)[0].lower() in _POSTGRES_SCHEMES:  # "postgresql:/db", "postgres:db": a mistyped URL
            raise refuse(redact(text), "not a database address: write postgresql://USER@HOST/DB")
        if _KEYWORD_PAIR.search(text):
            raise refuse(
                "(a keyword string)",
                "key=value settings are not a store address: give postgresql://USER@HOST/DB (the password "
                "in GPUPERF_HISTORY or ~/.pgpass), or a SQLite file's path",
            )
        return URL.create("sqlite", database=str(Path(text).expanduser().absolute()))
    scheme = text.split("://", 1)[0].lower() if "://" in text else "sqlite"
    if scheme in _POSTGRES_SCHEMES and (rule := ambiguity(text)) is not None:
        raise refuse(redact(text), f"malformed address: {rule}")
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise refuse(redact(text), "not a database address") from None
    if url.drivername in _POSTGRES_SCHEMES:
        return url.set(drivername="postgresql+psycopg")
    if url.drivername == "sqlite":
        if not url.database or url.database == ":memory:":
            raise refuse(redact(text), "a history store needs a file: sqlite:///PATH")
        return url
    raise refuse(redact(text), f"unsupported database {url.drivername!r}: use sqlite:///PATH or postgresql://...")


# The rules an address must keep to be read one way only; each message names its rule.
UNENCODED_AT = ("one '@' only, the one before the host: write an '@' in the user name, password or database "
                "as %40")  # fmt: skip
IPV6_BRACKETS = "an IPv6 host is written whole in brackets, [::1] or [::1]:5432"
NUMERIC_PORT = "the port after the host's ':' is a whole number"
WHOLE = "postgresql://USER:PASSWORD@HOST:PORT/DATABASE?PARAMETERS, with nothing after the host but these"
# SQLAlchemy's own pattern (sqlalchemy.engine.url._parse_url), kept here because make_url
# percent-decodes the user name, password and database: an '@' it would read there is only
# visible in the raw parts. Hand-written because no library exposes them.
_PARTS = re.compile(
    r"""(?P<name>[\w+]+)://
        (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
        (?:(?:\[(?P<ipv6host>[^/?]+)\]|(?P<ipv4host>[^/:?]+))?(?::(?P<port>[^/?]*))?)?
        (?:/(?P<database>[^?]*))?
        (?:\?(?P<query>.*))?""",
    re.X | re.S,
)


def ambiguity(text: str) -> str | None:
    """The rule a network address breaks, where its parts could be read more than one way; None if it reads one way.

    A password with an unencoded ``@`` (``perf:Pa@ss@host``) is read as the password ``Pa``
    and the host ``ss@host``: the connection fails and, worse, a message that names the host
    would show the rest of the password. Such an address is refused whole instead.
    """
    match = _PARTS.match(text)
    if match is None:
        return None  # not a URL at all: make_url refuses it
    if match.end() != len(text):  # make_url would drop the rest without a word
        return IPV6_BRACKETS if "[" in text or "]" in text else WHOLE
    parts = {name: value or "" for name, value in match.groupdict().items()}
    if any("@" in parts[name] for name in ("username", "ipv4host", "ipv6host", "port", "database")):
        return UNENCODED_AT
    if "[" in parts["ipv4host"] or "]" in parts["ipv4host"] or "[" in parts["ipv6host"] or "]" in parts["port"]:
        return IPV6_BRACKETS
    if parts["port"] and not parts["port"].isdigit():
        return NUMERIC_PORT
    return None


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
