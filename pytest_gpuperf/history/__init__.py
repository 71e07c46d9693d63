"""The performance history: every measuring session recorded in a store, change points over the series.

May import: ``report`` (rendering), ``baseline`` (the git reader's entries), the verdict's enums through the
model, and the leaves; never the engines, workers or the pytest layer.
"""

from __future__ import annotations
