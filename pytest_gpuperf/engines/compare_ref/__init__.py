"""``--gpuperf-compare-ref``: measure the head and a git ref in one run, alternating rounds.

``refs`` resolves the ref (and says what to fetch where a clone lacks it), ``worktree`` checks it out
(``generated`` carries the head's git-ignored generated files into it, ``headtree`` gives the head the same
shape), ``prestart`` starts the base before the head imports its tests, ``engine`` drives the base worker
round by round (``alternate``), ``confirm`` confirms a suspected regression in fresh pairs of processes.

May import: ``engines.protocol`` and ``engines.results``, ``workers``, ``measure``, ``verdict``, ``profiling``,
``report`` (its progress lines and ``report.text.plain``), the model and the leaves.
"""
