"""``--gpuperf-compare-ref``: measure the head and a git ref in one run, alternating rounds.

worktree.py checks the ref out; engine.py drives a pytest worker there (worker_plugin.py)
round by round over a private socket pair (protocol.py).
"""

from __future__ import annotations
