"""Shared plumbing for tasks: inventory path, host selection, error handling, reports and --json."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Callable

from invoke.exceptions import Exit
from ..display import esc, make_console
from .. import safeio
from ..errors import NumaforgeError
from ..fleet import Terminated
from ..report import Report
from ..secrets import redact

DEFAULT_INVENTORY = "inventory/lab.yaml"
DEBUG_ENV = "NUMAFORGE_DEBUG"
console = make_console(stderr=False)
err_console = make_console(stderr=True)

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
    exit_code = None
    # --json - puts the report on standard output: everything for humans goes to standard error then
    to_stdout = json == safeio.STDOUT
    out = err_console if to_stdout else console
    try:
        safeio.check_output(json, "--json")   # a bad report path is refused before any work is done
    except NumaforgeError as exc:
        err_console.print(f"[bold red]error[/]: {esc(exc.render())}")
        raise Exit(code=exc.exit_code) from None
    if to_stdout:
        console.file = sys.stderr   # the tasks' own tables and lines too; restored below
    previous_term = _on_sigterm()
    try:
        body(report)
    except NumaforgeError as exc:
        report.error = exc
    except KeyboardInterrupt as exc:   # Ctrl-C, or SIGTERM (fleet.Terminated); fleet.Interrupted has the results
        report.interrupted = getattr(exc, "signal_name", "SIGINT")
        exit_code = getattr(exc, "exit_code", 130)
        outcome = getattr(exc, "outcome", None)
        if outcome is not None:
            have = {h.host for h in report.hosts}
            report.hosts.extend(r for r in outcome.results if r.host not in have)
            report.data["fleet"] = outcome.as_dict()
    except Exception as exc:   # a bug: no traceback for the user, a non-zero exit and a report that says so
        report.error = InternalError(f"internal error (a bug; please report it): {type(exc).__name__}: {exc}", task,
                                     f"re-run with {DEBUG_ENV}=1 for the traceback")
        if os.environ.get(DEBUG_ENV) == "1":
            traceback.print_exc()
    finally:
        _restore_sigterm(previous_term)
        report.print_summary(out)
        if json:
            try:
                written = report.write(json)
            except NumaforgeError as exc:   # e.g. the path changed under us: say so, keep the run's own error
                report.error = report.error or exc
            else:
                if not to_stdout:
                    out.print(f"report: {esc(written)}")
        if to_stdout:
            console.file = None   # back to the current sys.stdout
    if report.interrupted:
        fleet = report.data.get("fleet") or {}
        done = sum(1 for h in report.hosts if h.status not in ("failed", "not-run"))
        stopped = sum(1 for h in report.hosts if h.status == "failed")
        err_console.print(f"[bold red]interrupted[/] ({report.interrupted}): {done} host(s) done, {stopped} stopped or "
                          f"failed, {len(fleet.get('not_run') or [])} not run; what each host wrote is in the "
                          "summary above" + (" and the --json report" if json else "")
                          + "; re-run the same command to resume")
        raise Exit(code=exit_code or 130)
    if report.error is not None:
        err = report.error
        err_console.print(f"[bold red]error[/]: {esc(err.render())}")
        raise Exit(code=getattr(err, "exit_code", 1))
    if not report.ok:
        failed = [h.host for h in report.hosts if h.status in ("failed", "not-run")] + report.missing_hosts()
        reason = (report.data.get("fleet") or {}).get("reason")
        err_console.print(f"[bold red]failed[/] on: {esc(', '.join(failed) or '-')}"
                          + (f" ({esc(reason)})" if reason else ""))
        raise Exit(code=1)
    return report


class InternalError(NumaforgeError):
    """An exception that is not a NumaforgeError reached the task surface: a bug."""

    exit_code = 70   # EX_SOFTWARE


def _on_sigterm():
    """SIGTERM behaves like Ctrl-C (raised in the main thread as fleet.Terminated, exit 143)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise Terminated()

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(previous) -> None:
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def eprint(msg: str) -> None:
    print(redact(msg), file=sys.stderr)
