"""Which code runs: a compiled accelerator (``_speedups*.pyx``, built by setup.py) or its Python twin.

Each module with a twin ends with ``_fast = speedups.load("orbitmq.<...>._speedups_<x>")`` and
swaps the compiled functions in when that is not None, so the rule lives here only: the compiled
module is used when it was built and ``ORBITMQ_NO_SPEEDUPS`` is not ``1``. The switch runs the
pure-Python code everywhere, the path an install without a C compiler takes (`make test` runs the
unit and SDK tests that way too). It is read once, when each module is first imported.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

SWITCH = "ORBITMQ_NO_SPEEDUPS"


def disabled() -> bool:
    """True when ORBITMQ_NO_SPEEDUPS=1 asks for the pure-Python code."""
    return os.environ.get(SWITCH) == "1"


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None: switched off, or not built (no compiler at install).

    Only a module that cannot be imported falls back; an error its own import-time checks raise
    (e.g. _speedups_producer's wire table against the generated descriptors) propagates.
    """
    if disabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
