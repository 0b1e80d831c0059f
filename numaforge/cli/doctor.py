"""Task: doctor — check the build server and say how to fix each missing piece."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from invoke.exceptions import Exit
from rich.table import Table

from ..display import esc
from ..errors import ToolMissingError
from ..lazy import lazy_module
from . import common, values
from .optionsets import task

if TYPE_CHECKING:
    from .. import doctor as checks
else:  # imported by the task that uses it (numaforge.lazy)
    checks = lazy_module("numaforge.doctor")


@task(
    checks={"pipeline": values.choice("--pipeline", "all", "kernel", "firmware", "lab")},
    help={
        "pipeline": "which checks: all (default), kernel, firmware or lab",
        "strict": "also check that everything the test suite needs came from setup (scripts/packages.txt: each "
        "package installed, each command from its package, not a copy installed by hand), that the venv holds "
        "only numaforge[test]'s requirements, and that setup's caches are there; every check is then required",
    },
)
def doctor(c, pipeline="all", strict=False, json=None):
    """Check tools (git, gcc versions, kpatch-build, qemu, lspci...), disk space and Python deps, with fixes."""
    if pipeline not in ("all", "kernel", "firmware", "lab"):
        common.err_console.print(esc(f"error: --pipeline {pipeline!r} is not one of all, kernel, firmware, lab"))
        raise Exit(code=2)
    if strict and pipeline != "all":
        common.err_console.print(esc("error: --strict checks every pipeline; leave out --pipeline"))
        raise Exit(code=2)
    results = checks.run_checks(pipeline)
    if strict:
        results = [replace(r, required=r.name not in checks.STRICT_OPTIONAL) for r in results] + checks.strict_checks()
    table = Table(title=f"numaforge doctor ({pipeline}{', strict' if strict else ''})")
    for col in ("check", "pipeline", "state", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for r in results:
        state = "[green]ok[/]" if r.ok else ("[red]MISSING[/]" if r.required else "[yellow]optional[/]")
        table.add_row(esc(r.name), esc(r.pipeline), state, esc(r.detail), esc(r.fix))

    def body(report):
        common.console.print(table)
        report.data = {"checks": [r.__dict__ for r in results]}
        missing = [r for r in results if not r.ok and r.required]
        if missing:
            raise ToolMissingError(
                f"{len(missing)} required check(s) failed: " + ", ".join(r.name for r in missing),
                "this build server",
                "run the fix shown for each, or `bash scripts/setup.sh` for all of them",
            )

    common.execute("doctor", body, json=json, options={"pipeline": pipeline, "strict": strict})


TASKS = [doctor]
