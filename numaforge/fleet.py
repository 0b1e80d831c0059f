"""Rolling fleet execution: bounded concurrency, canary hosts, batches and a failure budget.

    outcome = run_fleet(hosts, validate_one, forks=8, canary=1, batch=4, max_fail_pct=25)

Order of a run:

1. **Canary**: the first ``canary`` hosts run one after another. Every canary must pass; the first failing
   canary stops the rollout.
2. **Batches**: the remaining hosts run in batches of ``batch`` hosts (0 = all remaining hosts in one batch),
   at most ``forks`` at a time. After each batch, if ``failed / attempted * 100 > max_fail_pct`` (counted over
   every host attempted so far, canaries included) and hosts remain, the rollout stops.
3. Hosts never started get status ``not-run`` and are listed in ``FleetOutcome.not_run``. Hosts already done
   stay as they are (``fn`` is never undone by the runner) and the outcome's ``reason`` says so.

``fn(host)`` returns a :class:`numaforge.report.HostResult`; only status ``failed`` counts as a failure. An
exception in ``fn`` marks that host failed with the exception's message (a NumaforgeError's what/where/fix);
it never stops the other workers. Ctrl-C lets running hosts finish, marks the rest not-run and returns an
outcome with ``interrupted=True``.

Resume after an interruption (Ctrl-C, crash, lost build server): pass ``journal=Journal(path, run_key)``.
The runner records ``started`` and the final status of every host (``journal.status(host)``); ``fn``
records its own milestones (``journal.mark(host, "rebooted")``) and asks ``journal.state(host)`` on the next
run to verify instead of redoing (e.g. not rebooting again). The journal is an append-only JSON-lines file, flushed and fsync'd per
record, so a crash loses at most the record being written.

Pure: no SSH or other peer here; per-host timeouts belong to ``fn`` (e.g. Remote.run(timeout=...)).
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .errors import NumaforgeError
from .report import HostResult
from .secrets import redact

FAILED = "failed"
NOT_RUN = "not-run"


class FleetOptionError(NumaforgeError):
    """--forks/--canary/--batch/--max-fail out of range."""

    exit_code = 2


class JournalError(NumaforgeError):
    """The resume journal belongs to another run or cannot be read/written."""

    exit_code = 2


class Journal:
    """Per-host progress of one fleet run, kept on disk so a re-run can resume.

    ``run_key`` names what the run does (e.g. "bios-apply profile=hpc-v3 inventory=prod.yaml"): a journal
    written under another key is refused rather than silently reused or overwritten.
    """

    def __init__(self, path: str | os.PathLike, run_key: str):
        self.path = Path(path)
        self.run_key = run_key
        self._lock = threading.Lock()
        self._states: dict[str, dict] = {}     # last milestone fn recorded per host
        self._status: dict[str, str] = {}      # last runner record per host: started / ok / failed / ...
        self.resumed = False
        if self.path.exists():
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._append({"run_key": run_key, "created": time.time()})

    def _load(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except OSError as exc:
            raise JournalError(f"cannot read the resume journal: {exc.strerror}", str(self.path),
                               "check its permissions, or delete it to start the run from scratch") from None
        records = []
        for n, line in enumerate(lines, 1):
            try:
                records.append(json.loads(line))
            except ValueError:
                if n == len(lines):      # torn last record of a crash: ignore it
                    break
                raise JournalError(f"line {n} of the resume journal is corrupt", f"{self.path}:{n}",
                                   "delete the journal to start the run from scratch") from None
        if not records or records[0].get("run_key") is None:
            raise JournalError("the file is not a numaforge fleet journal", str(self.path),
                               "delete it or pass another --journal path")
        if records[0]["run_key"] != self.run_key:
            raise JournalError(f"the resume journal belongs to another run ({records[0]['run_key']!r}, "
                               f"this run is {self.run_key!r})", str(self.path),
                               "re-run the original command to finish it, or delete the journal to start over")
        for rec in records[1:]:
            self._remember(rec)
        self.resumed = True

    def _remember(self, rec: dict) -> None:
        if "host" not in rec:
            return
        if "state" in rec:
            self._states[rec["host"]] = rec
        if "status" in rec:
            self._status[rec["host"]] = rec["status"]

    def _append(self, record: dict) -> None:
        line = json.dumps(redact(record), sort_keys=True, default=str) + "\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise JournalError(f"cannot write the resume journal: {exc.strerror}", str(self.path),
                               "free disk space or fix permissions; the run cannot be resumed without it") from None

    def mark(self, host: Any, state: str, **data: Any) -> None:
        """Record that ``host`` reached milestone ``state`` (thread-safe, durable before returning)."""
        self._record({"host": host_name(host), "state": state, **({"data": data} if data else {})})

    def record_status(self, host: Any, status: str, message: str = "") -> None:
        """The runner's own records: ``started`` and the final HostResult status. Kept apart from milestones."""
        self._record({"host": host_name(host), "status": status, **({"message": message} if message else {})})

    def _record(self, rec: dict) -> None:
        rec["time"] = time.time()
        with self._lock:
            self._append(rec)
            self._remember(redact(rec))

    def state(self, host: Any) -> str | None:
        """The last milestone ``fn`` recorded for ``host`` with mark() (None if none)."""
        rec = self._states.get(host_name(host))
        return rec["state"] if rec else None

    def status(self, host: Any) -> str | None:
        """The last runner status of ``host``: ``started`` (interrupted or crashed mid-host), ``ok``, ``failed``..."""
        return self._status.get(host_name(host))

    def data(self, host: Any) -> dict:
        rec = self._states.get(host_name(host))
        return dict(rec.get("data", {})) if rec else {}

    def states(self) -> dict[str, str]:
        return {h: r["state"] for h, r in self._states.items()}

    def statuses(self) -> dict[str, str]:
        return dict(self._status)

    def remove(self) -> None:
        """Delete the journal (the run finished; nothing left to resume)."""
        self.path.unlink(missing_ok=True)


@dataclass
class FleetOutcome:
    results: list[HostResult]          # one per host, in the order the hosts were given
    stopped: bool = False              # True when the rollout stopped early (canary, max-fail, Ctrl-C)
    reason: str = ""                   # why it stopped ("" when every host ran)
    not_run: list[str] = field(default_factory=list)
    interrupted: bool = False
    batches: list[list[str]] = field(default_factory=list)   # host names per phase, canaries first (one each)

    @property
    def failed(self) -> list[str]:
        return [r.host for r in self.results if r.status == FAILED]

    @property
    def attempted(self) -> list[str]:
        return [r.host for r in self.results if r.status != NOT_RUN]

    @property
    def ok(self) -> bool:
        return not self.stopped and not self.failed

    def summary(self) -> str:
        done = len(self.attempted) - len(self.failed)
        text = f"{done} done, {len(self.failed)} failed, {len(self.not_run)} not run"
        return f"{text}; {self.reason}" if self.reason else text

    def as_dict(self) -> dict:
        return {"stopped": self.stopped, "reason": self.reason, "not_run": list(self.not_run),
                "interrupted": self.interrupted, "failed": self.failed, "batches": self.batches}


def host_name(host: Any) -> str:
    """Name of a host object (inventory Host, anything with .name) or a plain string."""
    return host if isinstance(host, str) else str(getattr(host, "name", host))


def plan_phases(names: Sequence[str], canary: int, batch: int) -> list[list[str]]:
    """The rollout order as phases: one phase per canary host, then batches of ``batch`` (0 = one batch)."""
    names = list(names)
    c = min(canary, len(names))
    phases = [[n] for n in names[:c]]
    rest = names[c:]
    size = batch if batch > 0 else max(1, len(rest))
    phases += [rest[i:i + size] for i in range(0, len(rest), size)]
    return phases


def check_options(forks: int, canary: int, batch: int, max_fail_pct: float) -> None:
    if not isinstance(forks, int) or forks < 1:
        raise FleetOptionError(f"--forks must be at least 1, got {forks}", "--forks", "pass --forks 8 (or any N >= 1)")
    if not isinstance(canary, int) or canary < 0:
        raise FleetOptionError(f"--canary must be 0 or more, got {canary}", "--canary", "pass --canary 1 or leave it out")
    if not isinstance(batch, int) or batch < 0:
        raise FleetOptionError(f"--batch must be 0 (all at once) or more, got {batch}", "--batch",
                               "pass --batch N or leave it out")
    if not 0 <= float(max_fail_pct) <= 100:
        raise FleetOptionError(f"--max-fail must be a percentage from 0 to 100, got {max_fail_pct}", "--max-fail",
                               "pass --max-fail 25 to stop once more than a quarter of the hosts failed")


def _call(fn: Callable[[Any], HostResult], host: Any, journal: Journal | None = None) -> HostResult:
    name = host_name(host)
    if journal is not None:
        journal.record_status(name, "started")
    result = _call_fn(fn, host, name)
    if journal is not None:
        journal.record_status(name, result.status, result.message)
    return result


def _call_fn(fn: Callable[[Any], HostResult], host: Any, name: str) -> HostResult:
    try:
        result = fn(host)
    except NumaforgeError as exc:
        return HostResult(name, FAILED, redact(exc.render()))
    except Exception as exc:  # a bug or an unexpected peer error in one host must not kill the fleet
        return HostResult(name, FAILED, redact(f"{type(exc).__name__}: {exc}"))
    if not isinstance(result, HostResult):
        return HostResult(name, FAILED, f"internal error: the per-host function returned {type(result).__name__}, "
                                        "not a HostResult")
    if result.host != name:
        result.host = name
    return result


class _Display:
    def __init__(self, total: int, enabled: bool, console: Console | None):
        self.enabled = enabled
        self.failed = 0
        self._lock = threading.Lock()
        if enabled:
            self.progress = Progress(TextColumn("[bold]fleet[/]"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.description}"), TimeElapsedColumn(),
                                     console=console or Console(stderr=True), transient=False)
            self.task = self.progress.add_task("", total=total)

    def __enter__(self):
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.progress.stop()

    def running(self, names: list[str]) -> None:
        if self.enabled:
            shown = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
            self.progress.update(self.task, description=f"failed {self.failed} | running {shown}")

    def done(self, result: HostResult) -> None:
        with self._lock:
            if result.status == FAILED:
                self.failed += 1
            if self.enabled:
                self.progress.advance(self.task)
                mark = "[red]failed[/]" if result.status == FAILED else f"[green]{result.status}[/]"
                self.progress.console.print(f"  {result.host}: {mark} {redact(result.message)}".rstrip())
                self.progress.update(self.task, description=f"failed {self.failed}")


def run_fleet(hosts: Sequence[Any], fn: Callable[[Any], HostResult], *, forks: int = 8, canary: int = 0,
              batch: int = 0, max_fail_pct: float = 100.0, progress: bool = True,
              console: Console | None = None, journal: Journal | None = None) -> FleetOutcome:
    """Run fn on every host under the rolling rules (module docstring); results keep the input order."""
    check_options(forks, canary, batch, max_fail_pct)
    by_name: dict[str, Any] = {}
    for h in hosts:
        name = host_name(h)
        if name in by_name:
            raise FleetOptionError(f"host {name} is selected twice", name, "remove the duplicate from the selection")
        by_name[name] = h
    names = list(by_name)
    phases = plan_phases(names, canary, batch)
    n_canary = min(canary, len(names))
    done: dict[str, HostResult] = {}
    outcome = FleetOutcome(results=[])
    display = _Display(len(names), progress and bool(names), console)
    with display, ThreadPoolExecutor(max_workers=max(1, forks), thread_name_prefix="fleet") as pool:
        try:
            _run_phases(pool, fn, phases, n_canary, max_fail_pct, by_name, done, display, outcome, journal)
        except KeyboardInterrupt:
            outcome.stopped = outcome.interrupted = True
            outcome.reason = "interrupted (Ctrl-C); hosts already done stay as they are"
    for name in names:
        if name in done:
            outcome.results.append(done[name])
        else:
            outcome.not_run.append(name)
            outcome.results.append(HostResult(name, NOT_RUN, f"not run: {outcome.reason or 'rollout stopped'}"))
    return outcome


def _run_phases(pool, fn, phases, n_canary, max_fail_pct, by_name, done, display, outcome, journal) -> None:
    for index, phase in enumerate(phases):
        outcome.batches.append(list(phase))
        _run_phase(pool, fn, [by_name[n] for n in phase], done, display, journal)
        if index < n_canary:
            r = done[phase[0]]
            if r.status == FAILED and index + 1 < len(phases):
                outcome.stopped = True
                outcome.reason = (f"canary host {r.host} failed; rollout stopped, "
                                  "hosts already done stay as they are")
                return
            continue
        failed = sum(1 for r in done.values() if r.status == FAILED)
        pct = 100.0 * failed / len(done)
        if pct > max_fail_pct and index + 1 < len(phases):
            outcome.stopped = True
            outcome.reason = (f"{failed} of {len(done)} hosts failed ({pct:.0f}% > --max-fail {max_fail_pct:g}%); "
                              "rollout stopped, hosts already done stay as they are")
            return


def _run_phase(pool: ThreadPoolExecutor, fn, phase_hosts: list, done: dict, display: _Display,
               journal: Journal | None = None) -> None:
    """Run one phase. On Ctrl-C: cancel what has not started, let running hosts finish, re-raise."""
    futures = {pool.submit(_call, fn, h, journal): host_name(h) for h in phase_hosts}
    display.running(list(futures.values()))
    pending = set(futures)
    try:
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for f in finished:
                r = f.result()
                done[futures[f]] = r
                display.done(r)
    except KeyboardInterrupt:
        for f in pending:
            f.cancel()
        for f in pending:
            if not f.cancelled():
                r = f.result()
                done[futures[f]] = r
                display.done(r)
        raise
