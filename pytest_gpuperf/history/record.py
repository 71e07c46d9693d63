"""Recording a pytest session in the history store (``--gpuperf-history``), without pytest.

The plugin calls :func:`record_session` once per session, where the session's results
exist (beside ``--gpuperf-json``), on the xdist controller only. A store that cannot be
reached raises StoreError; the plugin turns it into a warning, so the gate's verdict and
exit code stand and the results file can be ingested later (``gpuperf history ingest``).

An interrupted session (Ctrl-C, SIGTERM: pytest's exit status 2) is not recorded: it holds the
values of the tests that ran before the interruption only, and a series mixing such partial
runs with complete ones would show measurements that come and go.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_gpuperf.history.ingest import run_from_session
from pytest_gpuperf.model import SessionResults

ENV_VAR = "GPUPERF_HISTORY"


OPTION = "--gpuperf-history"
INI = "gpuperf_history (ini)"


@dataclass(frozen=True)
class StoreAddress:
    """A store's address as given, and the setting it came from (named in every error about it)."""

    text: str
    setting: str  # "--gpuperf-history", "GPUPERF_HISTORY", "gpuperf_history (ini)", or the CLI's "--history"


def history_address(
    option: str | None, ini: str | None, environ: Mapping[str, str] | None = None, *, option_name: str = OPTION
) -> StoreAddress | None:
    """The store to record into: the option, else ``GPUPERF_HISTORY``, else the ini value; None: no recording.

    The environment variable beats the ini file so that a CI secret (a PostgreSQL URL with its
    password) can override a team's default without ever being written into a file.
    """
    env = os.environ if environ is None else environ
    for candidate, setting in ((option, option_name), (env.get(ENV_VAR), ENV_VAR), (ini, INI)):
        if candidate is not None and candidate.strip():
            return StoreAddress(candidate.strip(), setting)
    return None


def check_address(address: StoreAddress) -> None:
    """StoreAddressError, naming the setting, for an address that is not a store's (no connection is made).

    The plugin asks when the session starts: a malformed address is a usage error then, not a
    run lost at the end.
    """
    from pytest_gpuperf.history.url import parse_url

    parse_url(address.text, setting=address.setting)


NOT_RECORDED_INTERRUPTED = "gpuperf: the run was not recorded: the session was interrupted, so its values are partial"


def record_session(address: StoreAddress, session: SessionResults, *, interrupted: bool = False) -> str:
    """Store ``session`` in the store at ``address``; the line to show (the address's password hidden).

    An ``interrupted`` session is not stored (see the module's docstring); the line says so.
    """
    from pytest_gpuperf.history.store import open_store

    if interrupted:
        return NOT_RECORDED_INTERRUPTED
    run = run_from_session(session, gpu_count=_gpu_count(session))
    with open_store(address.text, setting=address.setting) as store:
        stored = store.record(run)
    what = "recorded" if stored else "already recorded"
    return f"gpuperf: {what} run {run.run_id[:12]} ({len(run.values)} values) in {store.url}"


def _gpu_count(session: SessionResults) -> int | None:
    """The GPUs this machine has, from torch where the session already imported it (never imported here)."""
    if session.environment.device_type != "cuda":
        return 0
    torch = sys.modules.get("torch")
    try:
        return int(torch.cuda.device_count()) if torch is not None else None
    except Exception:  # a probe never fails a run
        return None
