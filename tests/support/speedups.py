"""Which twin the accelerator tests expect in use: the compiled one, or the Python one under the switch.

`make test` runs the unit and SDK tests twice: as built, where every function with a compiled twin
must be the compiled one (a stale or missing build would otherwise run the slower Python code
unnoticed), and with ORBITMQ_NO_SPEEDUPS=1 (orbitmq.common.speedups), where it must be the module's
own Python function. The compiled modules themselves stay importable either way.
"""

from __future__ import annotations

import operator
from types import ModuleType

from orbitmq.common import speedups

COMPILED_TYPES = ("cython_function_or_method", "builtin_function_or_method")


def assert_in_use(module: ModuleType, name: str, compiled: ModuleType, compiled_name: str | None = None) -> None:
    """``module.<name>`` (dotted for a class attribute) is ``compiled.<compiled_name>`` (by default
    the last part of ``name``); with the switch on, the Python function ``module`` defines."""
    used = operator.attrgetter(name)(module)
    fast = getattr(compiled, compiled_name or name.rpartition(".")[2])
    where = f"{module.__name__}.{name}"
    assert type(fast).__name__ in COMPILED_TYPES, (where, fast)
    assert compiled.__file__ is not None and compiled.__file__.endswith(".so"), compiled.__file__
    # The oracle the compiled code falls back to, where the module keeps one (_py_<name>).
    oracle = getattr(module, "_py_" + name.lstrip("_"), None) if "." not in name else None
    if speedups.disabled():
        assert used is not fast and used.__module__ == module.__name__, f"{where} is not the Python code: {used}"
        assert oracle is None or used is oracle, where
    else:
        assert used is fast, f"{where} is not the compiled {fast}: {used}"
        assert oracle is None or (oracle is not fast and oracle.__module__ == module.__name__), where
