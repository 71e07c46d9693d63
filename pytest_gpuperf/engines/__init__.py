"""Engines: what the fixture asks to measure a test and to judge its measurements, one per mode.

``protocol`` is all the session and the fixture call on an engine; ``local`` measures here and judges
against the git-tracked baselines (baseline, update and smoke modes); ``compare_ref`` alternates rounds
with a worker on a base git ref. ``results`` is what both do to a result after the verdict (notes, the
differential profile). The mode's plan (``pytest_gpuperf.modes``) says which engine a session gets.

May import: ``workers``, ``measure``, ``profiling``, ``verdict``, ``baseline``, ``report`` (progress and units),
the model and the leaves; never the pytest layer or the history.
"""
