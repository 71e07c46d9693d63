"""Headless Chromium for the tests of the HTML report and the history dashboard.

:func:`chromium_path` finds the browser; without one a test fails (``scripts/test.sh``
installs it where it can, scripts/system-packages.sh), so a missing browser cannot pass as a
green run.

:class:`Browser` drives it over the DevTools protocol on ``--remote-debugging-pipe``
(JSON messages ending in NUL on file descriptors 3 and 4). Hand-written rather than
Playwright or pyppeteer: those bring a Node driver or pin a browser build and want to
download it, while the pipe needs the system's Chromium and the standard library only,
and keeps every DevTools event: each request the page makes (``Network``), each console
and Content-Security-Policy message (``Log``), each ``alert`` (``Page``).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_S = 60.0
SETTLE_S = 0.5  # after the load event: time for late requests (timers, lazy images) to show up


def chromium_path() -> str:
    """The browser's path; a failure naming the package without one."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "headless Chromium is not installed: scripts/test.sh installs it where it can "
        "(Debian: apt-get install chromium)"
    )


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One command-line run (``--dump-dom``, ``--screenshot``) with a fresh profile."""
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [chromium_path(), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@dataclass
class Visit:
    """What one page load did: every request, console and security message, and dialog."""

    url: str
    requests: list[str] = field(default_factory=list)  # every request the page started, blocked ones too
    blocked: dict[str, str] = field(default_factory=dict)  # url -> why it was stopped ("csp", ...)
    log: list[dict[str, Any]] = field(default_factory=list)  # Log.entryAdded entries and uncaught exceptions
    dialogs: list[str] = field(default_factory=list)


class Browser:
    """One headless Chromium with a fresh profile, driven over the DevTools pipe."""

    def __init__(self, tmp_path: Path) -> None:
        profile = tmp_path / "chromium-devtools-profile"
        profile.mkdir(exist_ok=True)
        self._stderr = (tmp_path / "chromium.log").open("wb")
        ours_in, theirs_out = os.pipe()  # the browser writes on its fd 4, we read
        theirs_in, ours_out = os.pipe()  # we write, the browser reads on its fd 3
        command = [chromium_path(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        # bash puts the pipe ends on fds 3 and 4 (subprocess can pass fds, not renumber them; dash
        # cannot name an fd above 9).
        script = f'exec "$@" 3<&{theirs_in} 4>&{theirs_out} {theirs_in}<&- {theirs_out}>&-'
        self._process = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", "-c", script, "bash", *command],
            pass_fds=(theirs_in, theirs_out), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )  # fmt: skip
        os.close(theirs_in)
        os.close(theirs_out)
        self._in, self._out = ours_in, ours_out
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._session: str | None = None
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            attached = self.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})
            self._session = attached["sessionId"]
            for domain in ("Network", "Page", "Runtime", "Log"):
                self.call(f"{domain}.enable", session=self._session)
        except BaseException:  # a browser that would not start: no process or descriptor left behind
            self.close()
            raise

    # -- the protocol -------------------------------------------------------------------------
    def _send(self, method: str, params: dict[str, Any] | None, session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None at the deadline."""
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                return None
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe (exit {self._process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        received: dict[str, Any] = json.loads(message)
        return received

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None) -> Any:
        sent = self._send(method, params, session)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._receive(deadline)
            if message is None:
                raise TimeoutError(f"Chromium did not answer {method} in {TIMEOUT_S:.0f} s")
            if message.get("id") == sent:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._handle(message)

    # -- pages --------------------------------------------------------------------------------
    def visit(self, url: str) -> Visit:
        """Load ``url`` and wait for its load event and a quiet moment; returns what the page did."""
        self._events.clear()
        navigated = self.call("Page.navigate", {"url": url}, session=self._session)
        # a new fragment on the same page loads nothing: no load event, a navigation within the document
        done = "Page.loadEventFired" if "loaderId" in navigated else "Page.navigatedWithinDocument"
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == done for e in self._events):
            message = self._receive(deadline)
            if message is None:
                raise TimeoutError(f"{url} did not finish loading in {TIMEOUT_S:.0f} s")
            self._handle(message)
        settle = time.monotonic() + SETTLE_S
        while (message := self._receive(settle)) is not None:
            self._handle(message)
        return self._record(url)

    def _handle(self, message: dict[str, Any]) -> None:
        self._events.append(message)
        if message.get("method") == "Page.javascriptDialogOpening":  # an alert would block the page: dismiss it
            self._send("Page.handleJavaScriptDialog", {"accept": False}, self._session)

    def _record(self, url: str) -> Visit:
        visit = Visit(url)
        urls: dict[str, str] = {}
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                urls[params["requestId"]] = params["request"]["url"]
                visit.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed" and params.get("blockedReason"):
                visit.blocked[urls.get(params["requestId"], "?")] = params["blockedReason"]
            elif method == "Network.webSocketCreated":
                visit.requests.append(params["url"])
            elif method == "Log.entryAdded":
                visit.log.append(params["entry"])
            elif method == "Runtime.exceptionThrown":
                visit.log.append({"level": "error", "source": "javascript", "text": str(params)})
            elif method == "Page.javascriptDialogOpening":
                visit.dialogs.append(params.get("message", ""))
        return visit

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self._session,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, width: int = 1400, height: int = 1000) -> bytes:
        """A PNG of the viewport at ``width`` x ``height`` CSS pixels."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                  session=self._session)  # fmt: skip
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=self._session)["data"]
        return base64.b64decode(data)

    def close(self) -> None:
        try:
            self._send("Browser.close", None, None)
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        finally:
            os.close(self._in)
            os.close(self._out)
            self._stderr.close()


@contextmanager
def browser(tmp_path: Path) -> Iterator[Browser]:
    started = Browser(tmp_path)
    try:
        yield started
    finally:
        started.close()
