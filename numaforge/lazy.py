"""Modules imported on first use, so a process imports only what its task uses (issue 18).

The task surface (numaforge/cli/*.py) names every pipeline it can run, but one `invoke` process runs one task:
`invoke --list` or `invoke bios-plan` must not pay for gitpython, paramiko or the kernel pipeline. A module
that only some tasks need is bound at the top of the module with

    if TYPE_CHECKING:
        from ..bios import apply as bapply
    else:
        bapply = lazy_module("numaforge.bios.apply")

and used as ``bapply.run_hosts(...)``: the import stays visible at the top (no function-local imports), mypy
checks the calls against the real module, and the import happens at the first attribute access.

Thread-safe: the first access goes through importlib.import_module, whose per-module import lock makes other
threads wait until the module is fully executed (a half-initialised module is never returned). This is
deliberately not importlib.util.LazyLoader, which is not thread-safe on Python 3.11.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """A stand-in for the module ``name``: imports it on first attribute access, then delegates to it.
    Its own attributes are _lazy_* only, so none of them hides an attribute of the module."""

    __slots__ = ("_lazy_name", "_lazy_module")

    def __init__(self, name: str):
        object.__setattr__(self, "_lazy_name", name)
        object.__setattr__(self, "_lazy_module", None)

    def _lazy_load(self) -> ModuleType:
        module = self._lazy_module
        if module is None:
            module = importlib.import_module(self._lazy_name)
            object.__setattr__(self, "_lazy_module", module)
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._lazy_load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:  # monkeypatching a proxy patches the module
        setattr(self._lazy_load(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._lazy_load(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._lazy_load())

    def __repr__(self) -> str:
        state = "imported" if self._lazy_module is not None else "not imported yet"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """A LazyModule for the absolute module name ``name`` (typed Any: bind it in the ``else`` of an
    ``if TYPE_CHECKING:`` real import, as in the module docstring)."""
    return LazyModule(name)
