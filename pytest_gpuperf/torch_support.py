"""torch is optional (the ``torch`` extra): whether this process has it, and the error where it is needed.

A suite of numpy or plain-Python calls measures on the CPU without torch: the wall clock times it, and
what only torch provides is left out, as an environment probe that cannot run skips its key (the peak
tensor memory; torch's thread count in the environment). What cannot work without it (a CUDA device, the profiler, the
``pytest_gpuperf.paths`` helpers) says so with :func:`require_torch`.
"""

from __future__ import annotations

import functools
import importlib.util
from types import ModuleType

from pytest_gpuperf.errors import ConfigError

INSTALL_HINT = "pip install 'pytest-gpuperf[torch]', or the torch build for your CUDA version"


@functools.cache
def have_torch() -> bool:
    """Whether ``import torch`` can succeed here (without importing it: that takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or blocked entry in sys.modules
        return False


def require_torch(what: str) -> ModuleType:
    """``torch``, imported; ConfigError saying that ``what`` needs it and how to install it, where it is missing."""
    try:
        import torch
    except ImportError:
        raise ConfigError(f"{what} needs torch, which is not installed: {INSTALL_HINT}") from None
    return torch
