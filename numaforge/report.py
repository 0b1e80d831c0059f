"""Run reports: one structured result per task run, a human summary table, and ``--json`` output.

The JSON shape is numaforge/schemas/report.schema.json; ``Report.write`` validates against it and scrubs
every resolved secret before anything touches the disk.
"""

from __future__ import annotations

import json
import json as _json
import os
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.table import Table

from . import __version__, safeio
from .display import esc, make_console
from .errors import NumaforgeError
from .lazy import lazy_module
from .secrets import redact

if TYPE_CHECKING:
    import jsonschema
else:  # every task imports this module; only --json needs the validator (numaforge.lazy)
    jsonschema = lazy_module("jsonschema")

UNEXPECTED_ERROR = "unexpected_error"  # HostResult.data key: the host's work raised something that is a bug

# One vocabulary for every task's host status in reports, summaries and JUnit (issue 25 item 5): the host was
# changed, left unchanged (read-only tasks, nothing to do), failed, never started (not-run), or stopped by an
# interrupt part way (interrupted: its data says what it had done).
HOST_STATUSES = ("changed", "unchanged", "failed", "not-run", "interrupted")
DONE = ("changed", "unchanged")
# words pipelines still use inside a run, and older reports and journals hold: "ok" changed nothing
_OLD_WORDS = {"ok": "unchanged", "skipped": "not-run"}


def host_status(status: str) -> str:
    """A host status in the report vocabulary (HOST_STATUSES); older words are mapped, never dropped."""
    return _OLD_WORDS.get(status, status)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def load_schema() -> dict:
    return json.loads(resources.files("numaforge.schemas").joinpath("report.schema.json").read_text())


@dataclass
class Step:
    name: str
    status: str = "ok"
    seconds: float = 0.0
    detail: Any = None

    def as_dict(self) -> dict:
        d = {"name": self.name, "status": self.status, "seconds": round(self.seconds, 3)}
        if self.detail is not None:
            d["detail"] = self.detail
        return d


@dataclass
class HostResult:
    host: str
    status: str = "ok"
    message: str = ""
    steps: list[Step] = field(default_factory=list)
    data: dict = field(default_factory=dict)

    def step(self, name: str) -> "_StepTimer":
        """``with result.step("load") as s: ...`` records timing and failure of one named step."""
        return _StepTimer(self, name)

    def as_dict(self) -> dict:
        d: dict[str, Any] = {"host": self.host, "status": host_status(self.status)}
        if self.message:
            d["message"] = self.message
        if self.steps:
            d["steps"] = [s.as_dict() for s in self.steps]
        if self.data:
            d["data"] = self.data
        return d


class _StepTimer:
    def __init__(self, result: HostResult, name: str):
        self.step = Step(name)
        self.result = result

    def __enter__(self) -> Step:
        self._t0 = time.monotonic()
        self.result.steps.append(self.step)
        return self.step

    def __exit__(self, exc_type, exc, tb):
        self.step.seconds = time.monotonic() - self._t0
        if exc is not None:
            self.step.status = "failed"
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C/SIGTERM/SIGHUP cut this step: the host did not finish
                sig = getattr(exc, "signal_name", "SIGINT")
                self.step.detail = self.step.detail if self.step.detail is not None else f"interrupted ({sig})"
                if host_status(self.result.status) != "failed":
                    self.result.status = "interrupted"
                    self.result.message = self.result.message or f"interrupted ({sig}) during {self.step.name}"
            elif self.step.detail is None:
                self.step.detail = str(exc)
        return False


@dataclass
class Report:
    task: str
    inventory: str | None = None
    options: dict = field(default_factory=dict)
    hosts: list[HostResult] = field(default_factory=list)
    data: dict = field(default_factory=dict)
    error: NumaforgeError | None = None
    interrupted: str | None = None  # "SIGINT"/"SIGTERM" when the run was interrupted
    refused: bool = False  # refused before any host was touched (a usage error, exit 2): ``error`` says why
    selected: list[str] | None = None  # hosts the run was asked to act on (expect_hosts)
    started: str = field(default_factory=_now)
    finished: str | None = None

    def host(self, name: str) -> HostResult:
        for h in self.hosts:
            if h.host == name:
                return h
        h = HostResult(name)
        self.hosts.append(h)
        return h

    def expect_hosts(self, names) -> None:
        """The run acts on these hosts: the report is not ok unless each of them has a result."""
        self.selected = list(names)

    def missing_hosts(self) -> list[str]:
        have = {h.host for h in self.hosts}
        return [n for n in self.selected or [] if n not in have]

    @property
    def status(self) -> str:
        if self.interrupted:
            return "interrupted"
        if self.refused:
            return "refused"
        return "ok" if self.ok else "failed"

    @property
    def ok(self) -> bool:
        """True only when every host is done (changed or unchanged): no error, no interrupt, no failed, not-run
        or interrupted host, no stopped rollout, and every selected host has a result."""
        got = self.data.get("fleet")
        fleet: dict = got if isinstance(got, dict) else {}
        return (
            self.error is None
            and not self.refused
            and self.interrupted is None
            and all(host_status(h.status) in DONE for h in self.hosts)
            and not fleet.get("stopped")
            and not self.missing_hosts()
        )

    def as_dict(self) -> dict:
        err = None
        if self.error is not None:
            err = {
                "what": self.error.what,
                "where": self.error.where,
                "fix": self.error.fix,
                "kind": type(self.error).__name__,
            }
        return redact(
            {
                "tool": "numaforge",
                "version": __version__,
                "task": self.task,
                "started": self.started,
                "finished": self.finished or _now(),
                "ok": self.ok,
                "status": self.status,
                "inventory": self.inventory,
                "options": self.options,
                "error": err,
                "hosts": [h.as_dict() for h in self.hosts],
                "data": self.data,
            }
        )

    def write(self, path: str | os.PathLike) -> Path:
        """Validate against the schema and write atomically (numaforge.safeio: ``-`` is standard output, special
        files and directories are refused). Returns the path as given."""
        self.finished = self.finished or _now()
        doc = self.as_dict()
        jsonschema.validate(doc, load_schema())
        safeio.write_output(path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
        return Path(path)

    def summary_table(self) -> Table:
        table = Table(title=f"numaforge {self.task}", show_lines=False)
        table.add_column("host")
        table.add_column("status")
        table.add_column("message", overflow="fold")
        colors = {"changed": "yellow", "unchanged": "green", "failed": "red", "not-run": "dim", "interrupted": "red"}
        for h in self.hosts:
            status = host_status(h.status)
            table.add_row(esc(h.host), f"[{colors.get(status, 'white')}]{esc(status)}[/]", esc(h.message))
        return table

    def print_summary(self, console: Printer | None = None) -> None:
        console = console or make_console()
        if self.hosts:
            console.print(self.summary_table())


class Printer(Protocol):
    """Anything that prints rich renderables: a rich Console, or cli.common.Output."""

    def print(self, *objects: Any, **kwargs: Any) -> Any: ...


def junit_xml(report: Report, suite: str = "numaforge") -> str:
    """JUnit XML: one testcase per host; failed/interrupted -> <failure>, not-run -> <skipped>; evidence in
    system-out."""
    cases = report.hosts
    failures = sum(1 for h in cases if host_status(h.status) in ("failed", "interrupted"))
    skipped = sum(1 for h in cases if host_status(h.status) == "not-run")
    total = sum(s.seconds for h in cases for s in h.steps)
    ts = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{total:.3f}",
    )
    if report.error is not None:
        ts.set("errors", "1")
        err = ET.SubElement(
            ET.SubElement(ts, "testcase", classname=suite, name="(run)"), "error", message=report.error.what
        )
        err.text = redact(report.error.render())
    for h in cases:
        case = ET.SubElement(
            ts, "testcase", classname=suite, name=h.host, time=f"{sum(s.seconds for s in h.steps):.3f}"
        )
        status = host_status(h.status)
        if status in ("failed", "interrupted"):
            f = ET.SubElement(
                case,
                "failure",
                message=h.message.splitlines()[0] if h.message else status,
                type=h.data.get("error", {}).get("kind", "failed"),
            )
            f.text = redact(h.message)
        elif status == "not-run":
            ET.SubElement(case, "skipped", message=h.message or status)
        out = ET.SubElement(case, "system-out")
        out.text = _json.dumps(redact(h.as_dict()), indent=1, default=str)
    ET.indent(ts)
    return ET.tostring(ts, encoding="unicode", xml_declaration=True) + "\n"
