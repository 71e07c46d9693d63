"""``--gpuperf-compare-ref``: measure the head and a git ref in one run, alternating rounds.

worktree.py checks the ref out into a temporary git worktree; engine.py starts
a pytest worker there (worker_plugin.py) and drives both sides round by round
over a private socket pair (protocol.py).
"""

from __future__ import annotations
