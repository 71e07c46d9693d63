"""Worker processes: a pytest run in another process that measures on the head's command.

``remote`` is one worker as the head sees it, ``protocol`` the messages over a private socket pair,
``worker`` and ``worker_plugin`` the worker's side (``-p pytest_gpuperf.workers.worker_plugin``),
``twins`` forks workers from one zygote that imported torch once, ``lifeline`` ends a worker with its
parent, ``leftovers`` removes killed runs' scratch folders, ``fresh`` re-measures a suspected baseline-mode
regression in a fresh process. Compare-ref's base side and baseline mode's re-measures both run here.

May import: ``measure``, ``profiling``, the model and the leaves; never the engines or the pytest layer.
"""

from __future__ import annotations
