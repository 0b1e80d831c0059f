"""Shared plumbing for tasks: the run's shared options, inventory path, host selection, output, error handling,
reports, --json and --junit."""

from __future__ import annotations

import json as _json
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from invoke.exceptions import Exit
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import paths
from ..errors import NumaforgeError, SelectionError
from ..lab.services import lab_inventory_path, write_lab_inventory
from ..report import Report
from ..secrets import redact

DEFAULT_INVENTORY = "lab"
OUTPUTS = ("plain", "table", "json")


@dataclass
class Run:
    """The shared options of the task being run (set by numaforge.cli.optionsets before the task body)."""

    task: str = ""
    options: dict = field(default_factory=dict)
    write: bool = False
    all: bool = False
    output: str | None = None
    junit: str | None = None


RUN = Run()


class Output:
    """Where tasks print. ``table``: rich tables and colour; ``plain`` (stdout not a terminal, or --output plain):
    no boxes, no wrapping, one table row per line; ``json``: human output goes to stderr, stdout gets the report.
    """

    def __init__(self, stderr: bool = False):
        self.stderr = stderr
        self.mode = "table"
        self._rich = Console(stderr=stderr, highlight=False)
        self._plain = Console(stderr=stderr, highlight=False, no_color=True, soft_wrap=True, width=100000)
        self._err = Console(stderr=True, highlight=False, soft_wrap=True)

    def configure(self, mode: str) -> None:
        self.mode = mode
        self._rich = Console(stderr=self.stderr or mode == "json", highlight=False)
        self._plain = Console(stderr=self.stderr or mode == "json", highlight=False, no_color=True,
                              soft_wrap=True, width=100000)

    @property
    def rich(self) -> Console:
        """The console to hand to rich widgets (Progress)."""
        return self._rich if self.mode == "table" else self._plain

    def print(self, *objects: Any, **kw: Any) -> None:
        if self.mode == "table":
            self._rich.print(*objects, **kw)
            return
        kw.pop("soft_wrap", None)
        for obj in objects:
            if isinstance(obj, Table):
                for line in plain_table(obj):
                    self._plain.print(line, markup=False, soft_wrap=True)
            else:
                self._plain.print(obj, soft_wrap=True, **kw)
        if not objects:
            self._plain.print()


def _plain_cell(cell: Any) -> str:
    text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
    return "; ".join(part for part in text.splitlines() if part.strip()) or "-"


def plain_table(table: Table) -> list[str]:
    """A rich Table as plain lines: the title, then the header and one line per row, columns padded with
    spaces, nothing cut or wrapped."""
    cols = table.columns
    header = [_plain_cell(c.header) for c in cols]
    rows = [[_plain_cell(cell) for cell in row] for row in zip(*(list(c.cells) for c in cols))]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(cols))]
    fmt = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()
    out = [f"{_plain_cell(table.title)}:"] if table.title else []
    return out + [fmt(header)] + [fmt(r) for r in rows]


console = Output()
err_console = Output(stderr=True)


def begin_run(c: Any, task: str, options: dict, write: bool = False, all: bool = False,
              output: str | None = None, junit: str | None = None) -> None:
    """Called before every task body: project directory (config numaforge.root), output mode, shared options."""
    cfg = _config(c)
    if cfg.get("root"):
        paths.set_project_dir(cfg["root"])
    mode = output or ("table" if sys.stdout.isatty() else "plain")
    if mode not in OUTPUTS:
        err_console.print(f"error: --output {output!r} is not one of {', '.join(OUTPUTS)}")
        raise Exit(code=2)
    console.configure(mode)
    err_console.configure("table" if sys.stderr.isatty() and mode == "table" else "plain")
    RUN.task, RUN.options, RUN.write, RUN.all, RUN.output, RUN.junit = task, dict(options), write, bool(all), mode, junit


def _config(c: Any) -> dict:
    try:
        return dict(c.config.get("numaforge", {}) or {})
    except AttributeError:
        return {}


def project_root() -> Path:
    return paths.project_dir()


def inventory_path(c, inventory: str | None) -> str:
    """--inventory, else the config's numaforge.inventory, else `lab`; `lab` is the inventory lab-up wrote.
    A relative path is taken from the current directory, else from the project directory."""
    spec = inventory or _config(c).get("inventory") or DEFAULT_INVENTORY
    if spec == "lab":   # before the first lab-up: the template's default ports, with this user's state paths
        p = lab_inventory_path()
        return str(p if p.is_file() else write_lab_inventory())
    p = Path(spec).expanduser()
    if not p.is_absolute() and not p.exists() and (paths.project_dir() / p).exists():
        p = paths.project_dir() / p
    return str(p)


def load_selected(c, report: Report, inventory, host, group, limit, allow_plaintext_secrets=False):
    """Load the inventory and return the selected hosts; records the inventory path in the report.

    A task that changes hosts (``write=True``) on an inventory with several hosts needs an explicit selection
    (--host/--group/--limit/--all): it never falls back to "every host" silently.
    """
    from ..inventory.loader import load_inventory

    path = inventory_path(c, inventory)
    report.inventory = path
    inv = load_inventory(path, allow_plaintext_secrets=allow_plaintext_secrets)
    if RUN.write and not (host or group or limit or RUN.all) and len(inv.hosts) > 1:
        raise SelectionError(f"{RUN.task} changes hosts and no host was selected; {path} has {len(inv.hosts)} hosts",
                             path, "select with --host NAME, --group NAME or --limit PATTERN, or pass --all for "
                                   "every host of the inventory")
    return inv, inv.select(list(host or []), list(group or []), limit)


def execute(task: str, body: Callable[[Report], None], json: str | None = None,
            options: dict | None = None) -> Report:
    """Run body(report); print the summary; write --json / --junit; map errors to a message and exit code.

    The report records every option the task was called with (``RUN.options``; ``options`` adds to them)."""
    opts = dict(RUN.options) if RUN.task == task else {}
    opts.update({k: v for k, v in (options or {}).items() if k not in opts})
    report = Report(task, options=opts)
    interrupted = False
    try:
        body(report)
    except NumaforgeError as exc:
        report.error = exc
    except KeyboardInterrupt:
        interrupted = True
        report.error = NumaforgeError("interrupted", None, "re-run the same command; finished hosts are kept")
    finally:
        if report.hosts:
            console.print(report.summary_table())
        if json:
            written = report.write(json)
            console.print(f"report: {written}")
        junit = RUN.junit if RUN.task == task else None
        if junit:
            console.print(f"junit: {write_atomic(junit, junit_xml(report, f'numaforge.{task}'))}")
        if console.mode == "json":
            print(_json.dumps(report.as_dict(), indent=2, default=str))
    if report.error is not None:
        err = report.error
        err_console.print(f"[bold red]error[/]: {redact(err.render())}")
        raise Exit(code=130 if interrupted else getattr(err, "exit_code", 1))
    if not report.ok:
        failed = [h.host for h in report.hosts if h.status == "failed"]
        err_console.print(f"[bold red]failed[/] on: {', '.join(failed)}")
        raise Exit(code=1)
    return report


def junit_xml(report: Report, suite: str = "numaforge") -> str:
    """JUnit XML: one testcase per host; failed -> <failure>, not-run/skipped -> <skipped>; evidence in system-out."""
    cases = report.hosts
    failures = sum(1 for h in cases if h.status == "failed")
    skipped = sum(1 for h in cases if h.status in ("not-run", "skipped"))
    total = sum(s.seconds for h in cases for s in h.steps)
    ts = ET.Element("testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors="0",
                    skipped=str(skipped), time=f"{total:.3f}")
    if report.error is not None:
        ts.set("errors", "1")
        err = ET.SubElement(ET.SubElement(ts, "testcase", classname=suite, name="(run)"), "error",
                            message=report.error.what)
        err.text = redact(report.error.render())
    for h in cases:
        case = ET.SubElement(ts, "testcase", classname=suite, name=h.host,
                             time=f"{sum(s.seconds for s in h.steps):.3f}")
        if h.status == "failed":
            f = ET.SubElement(case, "failure", message=h.message.splitlines()[0] if h.message else "failed",
                              type=h.data.get("error", {}).get("kind", "failed"))
            f.text = redact(h.message)
        elif h.status in ("not-run", "skipped"):
            ET.SubElement(case, "skipped", message=h.message or h.status)
        out = ET.SubElement(case, "system-out")
        out.text = _json.dumps(redact(h.as_dict()), indent=1, default=str)
    ET.indent(ts)
    return ET.tostring(ts, encoding="unicode", xml_declaration=True) + "\n"


def write_atomic(path: str, text: str) -> Path:
    p = Path(path)
    paths.atomic_write_text(p, text)
    return p


def eprint(msg: str) -> None:
    print(redact(msg), file=sys.stderr)


__all__ = ["RUN", "console", "err_console", "execute", "load_selected", "inventory_path", "junit_xml"]
