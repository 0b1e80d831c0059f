"""The bench/ scripts as modules, for tests that call their functions (bench/ is not a package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str) -> ModuleType:
    """bench/<name>.py, imported under its own name."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
