"""numaforge task surface for `invoke` in a checkout. `invoke --list` shows every task; `invoke --help TASK`
documents its options. The installed `numaforge` command (numaforge/cli/main.py) runs the same tasks; `lint`
is a checkout-only developer task.

Each concern keeps its tasks in numaforge/cli/<concern>.py (a module-level ``TASKS`` list); namespace() collects
them into one flat namespace so `invoke backport build-kpatch` works as one command line.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoke import task

from numaforge.cli.main import namespace
from numaforge.lazy import lazy_module

if TYPE_CHECKING:
    import tomllib
else:  # only `lint` reads pyproject.toml (numaforge.lazy)
    tomllib = lazy_module("tomllib")

HERE = Path(__file__).resolve().parent


@task(auto_shortflags=False, help={"fix": "let ruff fix what it can (imports, unused noqa) before checking",
                                   "format": "reformat numaforge/ with ruff format (the one-off reformat)"})
def lint(c, fix=False, format=False):  # noqa: A002  (invoke derives --format from the name)
    """ruff (lint; format check when [tool.numaforge.lint] format_check is true) and mypy on numaforge/."""
    bin_ = Path(sys.executable).parent
    cfg = tomllib.loads((HERE / "pyproject.toml").read_text()).get("tool", {}).get("numaforge", {}).get("lint", {})
    with c.cd(str(HERE)):
        if format:
            c.run(f"{bin_ / 'ruff'} format numaforge")
        c.run(f"{bin_ / 'ruff'} check {'--fix ' if fix else ''}numaforge")
        if cfg.get("format_check"):
            c.run(f"{bin_ / 'ruff'} format --check numaforge")
        c.run(f"{bin_ / 'mypy'}")


ns = namespace()
ns.add_task(lint)
