"""The git-tracked baseline store: ``baselines/<device class>/<safe module name>.json``.

``store`` reads and updates the files, ``atomic`` replaces them under a lock, ``codec`` maps entries
to canonical JSON, ``schema`` and ``plausible`` validate them, ``migrate`` holds the version history,
``naming`` the safe file names, ``record`` turns measurements into entries, ``provenance`` reads git.

May import: the model, config, errors, files, stats and units; nothing that measures, judges or reports.
"""

from __future__ import annotations

from pytest_gpuperf.baseline.codec import entry_from_json, entry_to_json, load_document
from pytest_gpuperf.baseline.migrate import CURRENT_VERSION
from pytest_gpuperf.baseline.naming import device_class_dir, module_file_name, module_of, safe_name
from pytest_gpuperf.baseline.provenance import git_provenance
from pytest_gpuperf.baseline.record import entry_from_measurement
from pytest_gpuperf.baseline.store import BaselineStore, EntryChange

__all__ = [
    "CURRENT_VERSION",
    "BaselineStore",
    "EntryChange",
    "device_class_dir",
    "entry_from_json",
    "entry_from_measurement",
    "entry_to_json",
    "git_provenance",
    "load_document",
    "module_file_name",
    "module_of",
    "safe_name",
]
