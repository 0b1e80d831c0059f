"""The name of the running program, for every hint that tells the operator what to run next.

The same tasks run as `invoke TASK` in a checkout (tasks.py) and as `numaforge TASK` once installed
(numaforge/cli/main.py). A fix that says "`invoke bios-jobs`" to a user of the installed command names a command
they do not have, so hint texts say ``f"`{prog()} bios-jobs`"``, evaluated when the hint is made (never in a
module-level constant). ``prog()`` is "invoke" when this process runs Invoke's own command (``invoke``, ``inv``,
``python -m invoke``), else "numaforge" (the console script, a library caller); set_program() overrides it.
"""

from __future__ import annotations

import sys
from pathlib import Path

_program: str | None = None


def set_program(name: str | None) -> None:
    """Name the running program explicitly (None: detect it again)."""
    global _program
    _program = name


def prog() -> str:
    """``invoke`` under Invoke's own command, else ``numaforge`` (module docstring)."""
    if _program:
        return _program
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path()
    if argv0.name in ("invoke", "inv") or (argv0.name == "__main__.py" and argv0.parent.name == "invoke"):
        return "invoke"
    return "numaforge"
