"""A small GitHub REST and GraphQL client on urllib: the few calls the action makes.

Pagination follows the ``Link: <...>; rel="next"`` header GitHub sends, and only to the
host the client was given, so the token is never sent anywhere else.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

API_VERSION = "2022-11-28"
_LINK = re.compile(r'<(?P<url>[^>]+)>\s*;\s*rel="(?P<rel>[^"]+)"')


class ApiError(Exception):
    """A call GitHub refused or that never reached it."""

    def __init__(
        self, method: str, url: str, status: int | None, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.message = message
        self.headers: Mapping[str, str] = dict(headers or {})  # rate-limit headers, for one
        where = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"{method} {url}: {where}: {message}")


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    data: Any


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header, if any."""
    for match in _LINK.finditer(header or ""):
        if match.group("rel") == "next":
            return match.group("url")
    return None


class GitHub:
    """Authenticated calls to one GitHub API (``GITHUB_API_URL``, ``GITHUB_GRAPHQL_URL``)."""

    def __init__(self, token: str, api_url: str, graphql_url: str, timeout_s: float = 30.0) -> None:
        if not token:
            raise ValueError("a GitHub token is needed (the action's github-token input)")
        self._token = token
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url
        self.timeout_s = timeout_s

    def _absolute(self, path_or_url: str) -> str:
        if "://" not in path_or_url:
            return self.api_url + path_or_url
        wanted = urllib.parse.urlsplit(self.api_url)
        given = urllib.parse.urlsplit(path_or_url)
        if (given.scheme, given.netloc) != (wanted.scheme, wanted.netloc):
            raise ApiError("GET", path_or_url, None, f"refusing to follow a link away from {self.api_url}")
        return path_or_url

    def request(self, method: str, path_or_url: str, body: Any = None) -> Response:
        url = self._absolute(path_or_url)
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/vnd.github+json")
        # Not carried over a redirect: urllib would send it to whatever host the redirect names.
        req.add_unredirected_header("Authorization", f"Bearer {self._token}")
        req.add_header("X-GitHub-Api-Version", API_VERSION)
        req.add_header("User-Agent", "pytest-gpuperf-action")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as reply:
                raw = reply.read()
                return Response(reply.status, dict(reply.headers.items()), json.loads(raw) if raw else None)
        except urllib.error.HTTPError as exc:
            raise ApiError(method, url, exc.code, _message(exc.read()), dict(exc.headers.items())) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ApiError(method, url, None, str(getattr(exc, "reason", exc))) from None

    def paginate(self, path: str) -> Iterator[Any]:
        """Every item of a list endpoint, page after page."""
        url: str | None = path
        while url is not None:
            reply = self.request("GET", url)
            if not isinstance(reply.data, list):
                raise ApiError("GET", self._absolute(url), reply.status, "expected a JSON list")
            yield from reply.data
            url = next_link(reply.headers.get("Link") or reply.headers.get("link"))

    def paginate_key(self, path: str, key: str) -> Iterator[Any]:
        """Every item of a list endpoint that answers an object holding the list under ``key`` (``jobs``)."""
        url: str | None = path
        while url is not None:
            reply = self.request("GET", url)
            items = reply.data.get(key) if isinstance(reply.data, dict) else None
            if not isinstance(items, list):
                raise ApiError("GET", self._absolute(url), reply.status, f"expected a JSON object with a list {key!r}")
            yield from items
            url = next_link(reply.headers.get("Link") or reply.headers.get("link"))

    def viewer_login(self) -> str:
        """The login the token acts as: a user, or a bot such as ``github-actions[bot]``.

        GraphQL's ``viewer`` answers for user tokens and for installation tokens (the
        workflow's own token among them), where REST ``GET /user`` is refused.
        """
        reply = self.request("POST", self.graphql_url, {"query": "query { viewer { login } }"})
        try:
            login = reply.data["data"]["viewer"]["login"]
        except (KeyError, TypeError):
            errors = reply.data.get("errors") if isinstance(reply.data, dict) else None
            raise ApiError("POST", self.graphql_url, reply.status, f"no viewer login in the answer: {errors}") from None
        if not isinstance(login, str) or not login:
            raise ApiError("POST", self.graphql_url, reply.status, "empty viewer login")
        return login


def _message(raw: bytes) -> str:
    try:
        payload = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:200] or "(empty body)"
    if isinstance(payload, dict) and isinstance(payload.get("message"), str):
        return payload["message"]
    return str(payload)[:200]


def from_env(env: Mapping[str, str], token: str) -> GitHub:
    """A client for the API the runner names (github.com or GitHub Enterprise Server)."""
    api = env.get("GITHUB_API_URL") or "https://api.github.com"
    graphql = env.get("GITHUB_GRAPHQL_URL") or api.rstrip("/") + "/graphql"
    return GitHub(token, api, graphql)
