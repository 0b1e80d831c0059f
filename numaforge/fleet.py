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

Resuming an interrupted run is the per-host function's business: it records its phases in
numaforge.journal and, on a re-run, verifies instead of redoing (e.g. never reboots twice).

Per-host budget: ``host_timeout`` seconds (None/0: none) per host, through numaforge.budget: the host's SSH
commands, uploads and Redfish requests stop starting once it is used up, so the host fails with "used up its
--host-timeout" at a step boundary (never in the middle of a write) and its fork goes to the next host.

Pure: no SSH or other peer here.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .budget import host_deadline
from .errors import NumaforgeError
from .report import HostResult
from .secrets import redact

FAILED = "failed"
NOT_RUN = "not-run"


class FleetOptionError(NumaforgeError):
    """--forks/--canary/--batch/--max-fail out of range."""

    exit_code = 2


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


def host_timeout_seconds(value) -> float | None:
    """--host-timeout as given (CLI string or number): None/0 -> None (no budget), else seconds >= 0."""
    if value is None:
        return None
    try:
        v = -1.0 if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        v = -1.0
    if not v >= 0:
        raise FleetOptionError(f"--host-timeout must be 0 (none) or a number of seconds, got {value!r}",
                               "--host-timeout", "pass --host-timeout 900 (seconds per host) or leave it out")
    return v or None


def rolling_batch(batch: int, forks: int, max_fail_pct: float) -> int:
    """The batch size a rollout with a failure budget uses: ``batch`` when given; else, when --max-fail is below
    100, ``forks`` (so the budget is checked after every wave of hosts instead of once after all of them: with
    one batch, max-fail could never stop anything); else 0 (all at once)."""
    if batch or float(max_fail_pct) >= 100:
        return batch
    return max(1, int(forks))


def check_options(forks: int, canary: int, batch: int, max_fail_pct: float, host_timeout=None) -> None:
    host_timeout_seconds(host_timeout)
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


def _timed(fn: Callable[[Any], HostResult], seconds: float, host: Any) -> HostResult:
    with host_deadline(seconds, host_name(host)):
        return fn(host)


def _call(fn: Callable[[Any], HostResult], host: Any) -> HostResult:
    name = host_name(host)
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
              console: Console | None = None, host_timeout: float | None = None) -> FleetOutcome:
    """Run fn on every host under the rolling rules (module docstring); results keep the input order."""
    check_options(forks, canary, batch, max_fail_pct, host_timeout)
    seconds = host_timeout_seconds(host_timeout)
    if seconds:
        fn = functools.partial(_timed, fn, seconds)
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
            _run_phases(pool, fn, phases, n_canary, max_fail_pct, by_name, done, display, outcome)
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


def _run_phases(pool, fn, phases, n_canary, max_fail_pct, by_name, done, display, outcome) -> None:
    for index, phase in enumerate(phases):
        outcome.batches.append(list(phase))
        _run_phase(pool, fn, [by_name[n] for n in phase], done, display)
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


def _run_phase(pool: ThreadPoolExecutor, fn, phase_hosts: list, done: dict, display: _Display) -> None:
    """Run one phase. On Ctrl-C: cancel what has not started, let running hosts finish, re-raise."""
    futures = {pool.submit(_call, fn, h): host_name(h) for h in phase_hosts}
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
