"""Shared plumbing for tasks: inventory path, host selection, error handling, reports and --json."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from invoke.exceptions import Exit
from rich.console import Console

from ..errors import NumaforgeError
from ..report import Report
from ..secrets import redact

DEFAULT_INVENTORY = "inventory/lab.yaml"
console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)

# help strings shared by every task that selects hosts
SELECT_HELP = {
    "inventory": "inventory file (native or Ansible YAML); default from invoke.yaml (inventory/lab.yaml)",
    "host": "host name from the inventory (repeatable)",
    "group": "group name from the inventory, nested groups included (repeatable)",
    "limit": "keep only hosts matching this Ansible host pattern: names, globs, ~regex, &and, !not, @file "
             "(comma-separated; docs/inventory.md)",
    "json": "write a machine-readable report of the run (schema: numaforge/schemas/report.schema.json)",
    "allow_plaintext_secrets": "accept literal passwords in the inventory instead of env:/file: references",
}


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def inventory_path(c, inventory: str | None) -> str:
    if inventory:
        return inventory
    cfg = c.config.get("numaforge", {}) if hasattr(c, "config") else {}
    path = cfg.get("inventory") or DEFAULT_INVENTORY
    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = project_root() / p
    return str(p)


def load_selected(c, report: Report, inventory, host, group, limit, allow_plaintext_secrets=False):
    """Load the inventory and return the selected hosts; records the inventory path in the report."""
    from ..inventory.loader import load_inventory

    path = inventory_path(c, inventory)
    report.inventory = path
    inv = load_inventory(path, allow_plaintext_secrets=allow_plaintext_secrets)
    return inv, inv.select(list(host or []), list(group or []), limit)


def execute(task: str, body: Callable[[Report], None], json: str | None = None,
            options: dict | None = None) -> Report:
    """Run body(report); print the summary; write --json; map errors to a message and exit code."""
    report = Report(task, options={k: v for k, v in (options or {}).items() if v not in (None, [], False)})
    interrupted = False
    try:
        body(report)
    except NumaforgeError as exc:
        report.error = exc
    except KeyboardInterrupt:
        interrupted = True
        report.error = NumaforgeError("interrupted", None, "re-run the same command; finished hosts are kept")
    finally:
        report.print_summary(console)
        if json:
            written = report.write(json)
            console.print(f"report: {written}")
    if report.error is not None:
        err = report.error
        err_console.print(f"[bold red]error[/]: {redact(err.render())}")
        raise Exit(code=130 if interrupted else getattr(err, "exit_code", 1))
    if not report.ok:
        failed = [h.host for h in report.hosts if h.status == "failed"]
        err_console.print(f"[bold red]failed[/] on: {', '.join(failed)}")
        raise Exit(code=1)
    return report


def eprint(msg: str) -> None:
    print(redact(msg), file=sys.stderr)
