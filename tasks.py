"""numaforge task surface for `invoke` in a checkout. `invoke --list` shows every task; `invoke --help TASK`
documents its options. The installed `numaforge` command (numaforge/cli/main.py) runs the same tasks; `lint`
is a checkout-only developer task.

Each concern keeps its tasks in numaforge/cli/<concern>.py (a module-level ``TASKS`` list); namespace() collects
them into one flat namespace so `invoke backport build-kpatch` works as one command line.
"""

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoke import main as invoke_main
from invoke import task

from numaforge.cli.main import adopt, namespace
from numaforge.lazy import lazy_module

if TYPE_CHECKING:
    import tomllib
else:  # only `lint` reads pyproject.toml (numaforge.lazy)
    tomllib = lazy_module("tomllib")

HERE = Path(__file__).resolve().parent
LINTED = "numaforge tests bench tasks.py"


@task(
    auto_shortflags=False,
    help={
        "fix": "let ruff fix what it can (imports, unused noqa) before checking",
        "format": "reformat the code with ruff format",
    },
)
def lint(c, fix=False, format=False):  # invoke derives --format from the name
    """ruff (lint; format check when [tool.numaforge.lint] format_check is true) and mypy on numaforge/, tests/
    and bench/."""
    bin_ = Path(sys.executable).parent
    cfg = tomllib.loads((HERE / "pyproject.toml").read_text()).get("tool", {}).get("numaforge", {}).get("lint", {})
    with c.cd(str(HERE)):
        if format:
            c.run(f"{bin_ / 'ruff'} format {LINTED}")
        c.run(f"{bin_ / 'ruff'} check {'--fix ' if fix else ''}{LINTED}")
        if cfg.get("format_check"):
            c.run(f"{bin_ / 'ruff'} format --check {LINTED}")
        c.run(f"{bin_ / 'mypy'}")


ns = namespace()
ns.add_task(lint)
# `invoke` parses the task part of its command line after loading this file: with numaforge's rules (-h is help
# wherever it stands and runs nothing; a usage error exits 2), as the `numaforge` command does
adopt(invoke_main.program)
