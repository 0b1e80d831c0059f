"""Rolling fleet execution: bounded concurrency, canary hosts, batches and a failure budget.

    outcome = run_fleet(hosts, validate_one, Rollout(forks=8, canary=1, batch=4, max_fail=25))

:class:`Rollout` is the one value that carries the rolling options (--forks, --canary, --batch, --max-fail,
--host-timeout, --gate, the write lock and --wait-lock) from the task layer (numaforge.cli.values builds it)
through each pipeline's fleet entry point to here; a pipeline interprets ``gate`` itself.

Order of a run:

1. **Canary**: the first ``canary`` hosts run one after another. Every canary must pass; the first failing
   canary stops the rollout.
2. **Batches**: the remaining hosts run in batches, at most ``forks`` at a time. ``batch`` is Ansible's
   ``serial``: a size (``2``), a percentage of the selected hosts (``"25%"``: rounded down as Ansible's
   pct_to_int does, at least 1) or a list of them (``(1, 5, "25%")``: successive batch sizes, the last one
   repeating); none (``()``) = all remaining hosts in one batch, or waves of ``forks`` hosts when a failure
   budget is set (:func:`rolling_batch`: with one batch, --max-fail could never stop anything). After each
   batch, if ``failed / attempted * 100 > max_fail`` (counted over every host attempted so far, canaries
   included) and hosts remain, the rollout stops: a staged rollout of a writing task has --max-fail 0 unless
   the operator raised it (numaforge.cli.values.rollout), so it stops before the next batch after a failure.
3. Hosts never started get status ``not-run`` (message: why) and are listed in ``FleetOutcome.not_run``; they
   are never counted as failed. Hosts already done
   stay as they are (``fn`` is never undone by the runner) and the outcome's ``reason`` says so.

``fn(host)`` returns a :class:`numaforge.report.HostResult`; only status ``failed`` counts as a failure. A
NumaforgeError in ``fn`` marks that host failed with its what/where/fix. Any other exception (or a result
flagged ``data["unexpected_error"]``) is a bug: that host fails, hosts not started yet are not started, the
rollout stops and the outcome's reason names the host and the error; the result keeps what the host recorded
(e.g. what it wrote). An exception in the runner itself (the progress display...) is contained the same way.

Ctrl-C (SIGINT) or SIGTERM (numaforge.cli.common turns it into :class:`Terminated`): no new host starts,
running hosts stop at their next step boundary (numaforge.budget.request_stop: a request already on the wire
finishes and is recorded), the rest are not-run, and run_fleet raises :class:`Interrupted` carrying the
outcome, so no caller can mistake an interrupted run for a finished one. A host that was running when the
interrupt came and stopped because of it is ``interrupted`` (not failed, never not-run) and keeps what it
recorded (what it wrote, a reset it requested); a second Ctrl-C while waiting for running hosts still collects
their results once their threads end (only a host whose result cannot be had is ``interrupted`` without data).

Resuming an interrupted run is the per-host function's business: it records its phases in
numaforge.journal and, on a re-run, verifies instead of redoing (e.g. never reboots twice).

Waits: ``fn`` may return a generator of waits (numaforge.waits: bios-apply --reboot's wait for POST) instead of a
result. Such a host gives its worker back at each wait and its next step runs in the next free worker once the
wait is over (the one runner thread keeps the waiting hosts in a heap by due time), so ``forks`` bounds the
hosts at work, not the hosts waiting, and a batch takes about its slowest host's work and wait. Budget, write
lock, interrupt and bug handling are the same for every step; an interrupted waiting host is resumed once so it
stops at its next look (it sends nothing more) and is ``interrupted``.

Per-host budget: ``host_timeout`` seconds (None/0: none) per host, through numaforge.budget: the host's SSH
commands, uploads and Redfish requests stop starting once it is used up, so the host fails with "used up its
--host-timeout" at a step boundary (never in the middle of a write) and its fork goes to the next host.

Write lock: a rollout of a task that writes (``Rollout.lock``, the task's name) holds each host's lock
(numaforge.hostlock: across processes on this build server) for the host's whole work; a host another run
holds fails at once, or after ``wait_lock`` seconds, naming the holder.

No SSH or other peer here (the lock is a local file).
"""

from __future__ import annotations

import functools
import heapq
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import budget, hostlock
from .budget import host_deadline
from .display import esc, make_console
from .errors import NumaforgeError
from .report import UNEXPECTED_ERROR, HostResult, host_status
from .secrets import redact
from .waits import is_steps

FAILED = "failed"
NOT_RUN = "not-run"
INTERRUPTED = "interrupted"
BatchSpec = tuple  # of int (hosts) and str ("25%"): Ansible's serial as a list (batch_spec)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt; exit code 143."""

    signal_name = "SIGTERM"
    exit_code = 143


class Hangup(KeyboardInterrupt):
    """SIGHUP (the terminal went away), raised in the main thread like Ctrl-C; exit code 129."""

    signal_name = "SIGHUP"
    exit_code = 129


class Interrupted(KeyboardInterrupt):
    """A fleet run was interrupted; ``outcome`` holds every host's result (finished, stopped, not-run)."""

    def __init__(self, outcome: "FleetOutcome", signal_name: str = "SIGINT", exit_code: int = 130):
        super().__init__(f"interrupted ({signal_name})")
        self.outcome = outcome
        self.signal_name = signal_name
        self.exit_code = exit_code


class FleetOptionError(NumaforgeError):
    """--forks/--canary/--batch/--max-fail out of range."""

    exit_code = 2
    refusal = True


@dataclass(frozen=True)
class Rollout:
    """How a fleet run rolls out (module docstring): built once from the options, handed to run_fleet."""

    forks: int = 8
    canary: int = 0
    batch: BatchSpec = ()  # Ansible's serial: sizes and "N%" (module docstring); (): all remaining at once
    max_fail: float = 100.0  # percentage of attempted hosts
    host_timeout: float | None = None  # seconds per host; None: no budget
    gate: str | None = None  # a canary gate the pipeline interprets (e.g. os-apply's "locality")
    prometheus: str | None = None  # --gate slo: the Prometheus base URL (numaforge.canary.gate reads the settings)
    slo: tuple[str, ...] = ()  # --gate slo: KEY=VALUE gate settings as given
    lock: str | None = None  # the writing task's name: hold each host's write lock; None: read-only run
    wait_lock: float = 0.0  # seconds to wait for a host another run holds

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch", batch_spec(self.batch))
        check_options(self.forks, self.canary, self.batch, self.max_fail, self.host_timeout)
        if not isinstance(self.wait_lock, (int, float)) or not self.wait_lock >= 0:
            raise FleetOptionError(
                f"--wait-lock must be 0 or more seconds, got {self.wait_lock!r}",
                "--wait-lock",
                "pass --wait-lock 600 to wait up to ten minutes for another run, or leave it out",
            )

    def rolling(self) -> "Rollout":
        """This rollout with batches of --forks when a failure budget is set and no --batch (rolling_batch)."""
        return replace(self, batch=rolling_batch(self.batch, self.forks, self.max_fail))


@dataclass
class FleetOutcome:
    results: list[HostResult]  # one per host, in the order the hosts were given
    stopped: bool = False  # True when the rollout stopped early (canary, max-fail, Ctrl-C)
    reason: str = ""  # why it stopped ("" when every host ran)
    not_run: list[str] = field(default_factory=list)
    interrupted: bool = False
    internal_error: str = ""  # a bug stopped the rollout (see the module docstring)
    batches: list[list[str]] = field(default_factory=list)  # host names per phase, canaries first (one each)
    registry_fetches: int = 0  # bios runs: attribute registries fetched from a BMC / loaded from cache
    registry_loaded: int = 0
    journal: str = ""  # the resume journal of a journaled run (livepatch install/unload)

    @property
    def failed(self) -> list[str]:
        return [r.host for r in self.results if r.status in (FAILED, INTERRUPTED)]

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
        d = {
            "stopped": self.stopped,
            "reason": self.reason,
            "not_run": list(self.not_run),
            "interrupted": self.interrupted,
            "failed": self.failed,
            "batches": self.batches,
        }
        if self.internal_error:
            d["internal_error"] = self.internal_error
        return d


def host_name(host: Any) -> str:
    """Name of a host object (inventory Host, anything with .name) or a plain string."""
    return host if isinstance(host, str) else str(getattr(host, "name", host))


def batch_spec(value: Any) -> BatchSpec:
    """``batch`` as given (an int, "25%", "1,5,25%", or a list of those) -> a tuple of sizes and "N%" strings;
    0 or () -> () (all remaining hosts at once). Raises FleetOptionError naming --batch."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if isinstance(value, str):
        items = value.split(",")
    out: list[int | str] = []
    for item in items:
        out.append(_batch_item(item, value))
    if out == [0]:
        return ()
    if 0 in out:
        raise FleetOptionError(
            f"--batch {_shown(value)}: a batch size of 0 is only allowed alone (0 = all remaining hosts at once)",
            "--batch",
            "pass sizes of at least 1 or percentages, e.g. --batch 1,5,25%",
        )
    return tuple(out)


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _batch_item(item: Any, whole: Any) -> int | str:
    bad = FleetOptionError(
        f"--batch must be a number of hosts, a percentage of the selected hosts or a list of them "
        f"(Ansible's serial), got {_shown(whole)!r}",
        "--batch",
        "pass e.g. --batch 2, --batch 25% or --batch 1,5,25% (the last size repeats)",
    )
    if isinstance(item, bool):
        raise bad
    if isinstance(item, int):
        if item < 0:
            raise bad
        return item
    text = str(item).strip()
    if text.endswith("%"):
        digits = text[:-1].strip()
        if not (digits.isascii() and digits.isdigit()) or not 0 < int(digits) <= 100:
            raise FleetOptionError(
                f"--batch {_shown(whole)!r}: a percentage must be a whole number from 1% to 100%, got {text!r}",
                "--batch",
                "pass e.g. --batch 25%",
            )
        return f"{int(digits)}%"
    if not (text.isascii() and text.isdigit()):  # "²" is a digit to str.isdigit, not to int()
        raise bad
    return int(text)


def batch_size(item: int | str, selected: int) -> int:
    """One batch size in hosts, as Ansible's pct_to_int computes serial: "N%" of ``selected`` rounded down, at
    least 1; a number as it is."""
    if isinstance(item, str) and item.endswith("%"):
        return int(int(item[:-1]) / 100.0 * selected) or 1
    return int(item)


def plan_phases(names: Sequence[str], canary: int, batch: BatchSpec | int) -> list[list[str]]:
    """The rollout order as phases: one phase per canary host, then the batches of ``batch`` (batch_spec: sizes
    and percentages of all selected hosts, the last repeating; none = one batch)."""
    names = list(names)
    spec = batch_spec(batch)
    c = min(canary, len(names))
    phases = [[n] for n in names[:c]]
    rest = names[c:]
    if not spec:
        return phases + ([rest] if rest else [])
    sizes = [batch_size(item, len(names)) for item in spec]
    i = 0
    while i < len(rest):
        size = sizes[min(len(phases) - c, len(sizes) - 1)]
        phases.append(rest[i : i + size])
        i += size
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
        raise FleetOptionError(
            f"--host-timeout must be 0 (none) or a number of seconds, got {value!r}",
            "--host-timeout",
            "pass --host-timeout 900 (seconds per host) or leave it out",
        )
    return v or None


def rolling_batch(batch: BatchSpec | int, forks: int, max_fail: float) -> BatchSpec:
    """The batches a rollout with a failure budget uses: ``batch`` when given; else, when --max-fail is below
    100, waves of ``forks`` (so the budget is checked after every wave of hosts instead of once after all of
    them: with one batch, max-fail could never stop anything); else () (all at once)."""
    spec = batch_spec(batch)
    if spec or float(max_fail) >= 100:
        return spec
    return (max(1, int(forks)),)


def check_options(forks: int, canary: int, batch: BatchSpec, max_fail: float, host_timeout=None) -> None:
    host_timeout_seconds(host_timeout)
    if not isinstance(forks, int) or forks < 1:
        raise FleetOptionError(f"--forks must be at least 1, got {forks}", "--forks", "pass --forks 8 (or any N >= 1)")
    if not isinstance(canary, int) or canary < 0:
        raise FleetOptionError(
            f"--canary must be 0 or more, got {canary}", "--canary", "pass --canary 1 or leave it out"
        )
    batch_spec(batch)
    if not 0 <= float(max_fail) <= 100:
        raise FleetOptionError(
            f"--max-fail must be a percentage from 0 to 100, got {max_fail}",
            "--max-fail",
            "pass --max-fail 25 to stop once more than a quarter of the hosts failed",
        )


def _timed(fn: Callable[[Any], Any], seconds: float, host: Any) -> Any:
    """fn(host) under the host's budget; a generator of waits (numaforge.waits) keeps that same budget in every
    step, whichever worker runs it (the budget is thread-local: each step adopts it)."""
    with host_deadline(seconds, host_name(host)):
        out = fn(host)
        snap = budget.snapshot()
    return _budgeted(out, snap) if is_steps(out) else out


def _budgeted(steps, snap: tuple):
    """Each step of ``steps`` under the budget ``snap``; a wait is shortened to what is left of it (budget.cap),
    so a host whose --host-timeout runs out while it waits fails at its next look, not at the end of a poll."""
    while True:
        with budget.adopted(snap):
            try:
                delay = next(steps)
            except StopIteration as end:
                return end.value
            delay = budget.cap(float(delay))
        yield delay


def _locked(fn: Callable[[Any], Any], rollout: Rollout, host: Any):
    """fn(host) holding the host's write lock (taken before the budget starts: waiting is not the host's work),
    held over the host's waits too: a generator of waits, like every per-host function may be."""
    assert rollout.lock is not None
    with hostlock.held_host(host, host_name(host), rollout.lock, rollout.wait_lock) as me:
        result = fn(host)
        if is_steps(result):
            result = yield from result
        if isinstance(result, HostResult):
            result.data.setdefault("lock", me)
        return result


@dataclass(order=True)
class _Waiting:
    """A host in a wait (its reboot's POST): it holds no worker until ``due`` (time.monotonic), then its next
    step runs in a free worker (:func:`_resume`)."""

    due: float
    name: str
    steps: Any = field(compare=False)


def _call(fn: Callable[[Any], Any], host: Any) -> "HostResult | _Waiting":
    """The host's function up to its first wait (a :class:`_Waiting`) or its end (its result)."""
    name = host_name(host)
    try:
        out = fn(host)
    except NumaforgeError as exc:
        return _failed(name, exc)
    except Exception as exc:  # a bug
        return _bug(name, exc)
    return _resume(_Waiting(0.0, name, out)) if is_steps(out) else _checked(name, out)


def _resume(w: _Waiting) -> "HostResult | _Waiting":
    """One step of a waiting host: up to its next wait, or its end."""
    try:
        delay = next(w.steps)
    except StopIteration as end:
        return _checked(w.name, end.value)
    except NumaforgeError as exc:
        return _failed(w.name, exc)
    except Exception as exc:  # a bug
        return _bug(w.name, exc)
    return _Waiting(time.monotonic() + max(0.0, float(delay)), w.name, w.steps)


def _to_end(value: "HostResult | _Waiting") -> HostResult:
    """After a stop was requested (Ctrl-C, SIGTERM, a runner failure): a waiting host is resumed here so it stops
    at its next look (budget.Stopped: it sends nothing more) and its result says how far it got."""
    for _ in range(100):  # every wait looks at the host before waiting again, so this ends at once
        if not isinstance(value, _Waiting):
            return value
        value = _resume(value)
    assert isinstance(value, _Waiting)
    value.steps.close()
    return HostResult(value.name, INTERRUPTED, "interrupted while waiting; it did not stop at its next look")


def _failed(name: str, exc: NumaforgeError) -> HostResult:
    """A host whose step raised: failed; one stopped by Ctrl-C/SIGTERM/SIGHUP mid-command is interrupted (os-apply's
    host stopped in a snapshot read was "failed": issue 40 item 6)."""
    return HostResult(name, INTERRUPTED if isinstance(exc, budget.Stopped) else FAILED, redact(exc.render()))


def _bug(name: str, exc: Exception) -> HostResult:
    text = redact(f"{type(exc).__name__}: {exc}")
    return HostResult(
        name, FAILED, f"unexpected error (a bug; please report it): {text}", data={UNEXPECTED_ERROR: text}
    )


def _checked(name: str, result: Any) -> HostResult:
    """The host function's return value as the host's result (anything else is a bug: the host fails)."""
    if not isinstance(result, HostResult):
        return HostResult(
            name, FAILED, f"internal error: the per-host function returned {type(result).__name__}, not a HostResult"
        )
    if result.host != name:
        result.host = name
    return result


class _Display:
    """The progress bar and one line per finished host, on stderr. Off a terminal (CI logs) the lines are never
    wrapped. What it counts is what the report says: an interrupted host is "interrupted", not failed, and
    :meth:`finish` shows the final counts (after a gate's rollback, with the hosts not run)."""

    def __init__(self, total: int, enabled: bool, console: Console | None):
        self.enabled = enabled
        self.failed = 0
        self._lock = threading.Lock()
        if enabled:
            self.console = console or make_console(stderr=True)
            self.progress = Progress(
                TextColumn("[bold]fleet[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self.task = self.progress.add_task("", total=total)

    def start(self) -> None:
        if self.enabled:
            try:
                self.progress.start()
            except Exception as exc:
                self._off(exc)

    def stop(self) -> None:
        if self.enabled:
            try:
                self.progress.stop()
            except Exception as exc:
                self._off(exc)

    def _off(self, exc: BaseException) -> None:
        """A display failure must never stop or skew the run: switch the display off, keep going."""
        self.enabled = False
        try:
            self.progress.stop()
        except Exception:
            pass

    def running(self, names: list[str]) -> None:
        try:
            self._running(names)
        except Exception as exc:
            self._off(exc)

    def _running(self, names: list[str]) -> None:
        if self.enabled:
            shown = esc(", ".join(names[:4])) + (f" +{len(names) - 4}" if len(names) > 4 else "")
            self.progress.update(self.task, description=f"failed {self.failed} | running {shown}")

    def done(self, result: HostResult) -> None:
        try:
            self._done(result)
        except Exception as exc:
            self._off(exc)

    def _done(self, result: HostResult) -> None:
        with self._lock:
            status = host_status(result.status)
            if status == FAILED:
                self.failed += 1
            if self.enabled:
                self.progress.advance(self.task)
                colour = "red" if status in (FAILED, INTERRUPTED) else "green"
                self.progress.console.print(
                    f"  {esc(result.host)}: [{colour}]{esc(status)}[/] {esc(result.message)}".rstrip(),
                    soft_wrap=not self.console.is_terminal,
                )
                self.progress.update(self.task, description=f"failed {self.failed}")

    def finish(self, outcome: "FleetOutcome") -> None:
        try:
            if self.enabled:
                self.progress.update(self.task, description=esc(final_counts(outcome.results)))
        except Exception as exc:
            self._off(exc)


def final_counts(results: Sequence[HostResult]) -> str:
    """ "1 changed, 1 failed, 2 not run": each report status with hosts, in the report's order."""
    counts = {s: 0 for s in ("changed", "unchanged", FAILED, INTERRUPTED, NOT_RUN)}
    for r in results:
        status = host_status(r.status)
        counts[status] = counts.get(status, 0) + 1
    text = ", ".join(f"{n} {s.replace('-', ' ')}" for s, n in counts.items() if n)
    return text or "no hosts"


def run_fleet(
    hosts: Sequence[Any],
    fn: Callable[[Any], Any],
    rollout: Rollout | None = None,
    *,
    progress: bool = True,
    console: Console | None = None,
    gate: Callable[[list[HostResult], list, list], str | None] | None = None,
) -> FleetOutcome:
    """Run fn on every host under the rolling rules of ``rollout`` (module docstring); results keep the input
    order. ``fn(host)`` returns the host's HostResult, or a generator of waits that returns it (numaforge.waits).

    ``gate(canary_results, canary_hosts, later_hosts)`` (e.g. numaforge.canary.gate.SloGate) runs once every
    canary passed and before the first batch: a reason stops the rollout (the gate may have marked canaries
    failed, e.g. rolled back); None widens it. A NumaforgeError from the gate stops the rollout too."""
    rollout = (rollout or Rollout()).rolling()
    forks, canary, batch = rollout.forks, rollout.canary, rollout.batch
    fn = _per_host(fn, rollout)
    by_name = _by_name(hosts)
    names = list(by_name)
    phases = plan_phases(names, canary, batch)
    n_canary = min(canary, len(names))
    done: dict[str, HostResult] = {}
    outcome = FleetOutcome(results=[])
    display = _Display(len(names), progress and bool(names), console)
    budget.clear_stop()
    interrupt: KeyboardInterrupt | None = None
    running: dict = {}  # future -> host name, of every host started
    cut: list[str] = []  # hosts running when an interrupt came
    display.start()
    try:
        try:
            with ThreadPoolExecutor(max_workers=max(1, forks), thread_name_prefix="fleet") as pool:
                try:
                    _run_phases(
                        pool,
                        fn,
                        phases,
                        n_canary,
                        rollout.max_fail,
                        by_name,
                        done,
                        display,
                        outcome,
                        forks,
                        (running, cut),
                        gate,
                    )
                except KeyboardInterrupt as exc:
                    interrupt = _stopped_by(outcome, exc)
                except Exception as exc:  # the runner itself failed: contain it like a host's bug
                    _stopped_by_bug(outcome, exc)
        except KeyboardInterrupt as exc:  # one more Ctrl-C while the pool waited for the running hosts to end
            interrupt = interrupt or _stopped_by(outcome, exc)
            cut.extend(n for f, n in running.items() if not f.done() and n not in cut)
        if all(f.done() for f in running):  # a host still running keeps its stop request: it must not go on
            budget.clear_stop()
        if interrupt is not None:
            _collect_cut(running, cut, done)
        _gather(outcome, names, done)
        display.finish(outcome)
    finally:
        display.stop()
    if interrupt is not None:
        raise Interrupted(
            outcome, getattr(interrupt, "signal_name", "SIGINT"), getattr(interrupt, "exit_code", 130)
        ) from None
    return outcome


def _per_host(fn: Callable[[Any], HostResult], rollout: Rollout) -> Callable[[Any], HostResult]:
    """``fn`` under the rollout's per-host budget (--host-timeout) and write lock, where set."""
    seconds = host_timeout_seconds(rollout.host_timeout)
    if seconds:
        fn = functools.partial(_timed, fn, seconds)
    if rollout.lock:
        fn = functools.partial(_locked, fn, rollout)
    return fn


def _by_name(hosts: Sequence[Any]) -> dict[str, Any]:
    """Host name -> host, in the given order; a host selected twice is an error."""
    by_name: dict[str, Any] = {}
    for h in hosts:
        name = host_name(h)
        if name in by_name:
            raise FleetOptionError(f"host {name} is selected twice", name, "remove the duplicate from the selection")
        by_name[name] = h
    return by_name


def _stopped_by_bug(outcome: FleetOutcome, exc: Exception) -> None:
    """The runner itself failed: every host is asked to stop, the outcome says why."""
    budget.request_stop("stopped after an internal error")
    outcome.stopped = True
    outcome.internal_error = redact(f"{type(exc).__name__}: {exc}")
    outcome.reason = (
        f"internal error in the fleet runner ({outcome.internal_error}); rollout stopped, "
        "hosts already done stay as they are"
    )


def _gather(outcome: FleetOutcome, names: list[str], done: dict[str, HostResult]) -> None:
    """Every host's result in the input order; a host that did not run gets a not-run result saying why."""
    for name in names:
        if name in done:
            outcome.results.append(done[name])
        else:
            outcome.not_run.append(name)
            outcome.results.append(HostResult(name, NOT_RUN, f"not run: {outcome.reason or 'rollout stopped'}"))


def _stopped_by(outcome: FleetOutcome, exc: KeyboardInterrupt) -> KeyboardInterrupt:
    sig = getattr(exc, "signal_name", "SIGINT")
    budget.request_stop(f"interrupted ({sig})")
    outcome.stopped = outcome.interrupted = True
    outcome.reason = (
        f"interrupted ({sig}); no host was started after it, running hosts stopped at "
        "their next step; hosts already done stay as they are"
    )
    return exc


def _collect_cut(running: dict, cut: list[str], done: dict) -> None:
    """After an interrupt (the pool's threads have ended): the hosts that were running get their results, even
    when a second Ctrl-C stopped the wait for them; one that stopped because of the interrupt is interrupted."""
    for f, name in reversed(list(running.items())):  # a host's last step first (each step has a future)
        if name in done or f.cancelled() or not f.done():
            continue
        done[name] = _to_end(f.result())  # _call and _resume never raise; a waiting host stops at its next look
    for name in cut:
        r = done.get(name)
        if r is None:
            done[name] = HostResult(
                name, INTERRUPTED, "interrupted while running; its result could not be collected (see the BMC/host)"
            )
        else:
            _mark_interrupted(r)


def _mark_interrupted(r: HostResult) -> HostResult:
    """A host running when the interrupt came that failed because of it (its next step was refused) is
    ``interrupted``, not failed."""
    stopped = isinstance(r.data.get("error"), dict) and r.data["error"].get("kind") == "Stopped"
    if r.status == FAILED and (stopped or "interrupted (" in r.message):
        r.status = INTERRUPTED
    return r


def _run_phases(pool, fn, phases, n_canary, max_fail, by_name, done, display, outcome, forks, track, gate=None) -> None:
    forks = max(1, forks)
    for index, phase in enumerate(phases):
        outcome.batches.append(list(phase))
        _run_phase(pool, fn, [by_name[n] for n in phase], done, display, forks, track)
        bug = next((r for r in done.values() if r.data.get(UNEXPECTED_ERROR)), None)
        if bug is not None:
            outcome.stopped = True
            outcome.internal_error = f"{bug.host}: {bug.data[UNEXPECTED_ERROR]}"
            outcome.reason = (
                f"unexpected error on {bug.host} ({bug.data[UNEXPECTED_ERROR]}); rollout stopped, "
                "no further host was started, hosts already done stay as they are"
            )
            return
        if index < n_canary:
            r = done[phase[0]]
            if r.status == FAILED and index + 1 < len(phases):
                outcome.stopped = True
                outcome.reason = f"canary host {r.host} failed; rollout stopped, hosts already done stay as they are"
                return
            if gate is not None and index == n_canary - 1:
                reason = _gate(gate, phases, n_canary, by_name, done)
                if reason:
                    outcome.stopped = True
                    outcome.reason = reason
                    return
            continue
        failed = sum(1 for r in done.values() if r.status == FAILED)
        pct = 100.0 * failed / len(done)
        if pct > max_fail and index + 1 < len(phases):
            outcome.stopped = True
            outcome.reason = (
                f"{failed} of {len(done)} hosts failed ({pct:.0f}% > --max-fail {max_fail:g}%); "
                "rollout stopped, hosts already done stay as they are"
            )
            return


def _gate(gate, phases, n_canary, by_name, done) -> str | None:
    canary_names = [p[0] for p in phases[:n_canary]]
    later = [by_name[n] for p in phases[n_canary:] for n in p]
    try:
        return gate([done[n] for n in canary_names], [by_name[n] for n in canary_names], later)
    except NumaforgeError as exc:
        return f"the canary gate could not judge ({redact(exc.render())}); rollout stopped, canaries kept"


def _run_phase(
    pool: ThreadPoolExecutor, fn, phase_hosts: list, done: dict, display: _Display, forks: int, track
) -> None:
    """Run one phase: at most ``forks`` hosts at work at once; a host in a wait (its reboot's POST) holds no
    worker: it is resumed, in the next free worker, when its wait is over (numaforge.waits), so a phase takes
    about as long as its slowest host's work and wait, not (hosts / forks) waits. The phase is done when every
    host of it finished, waits included. A host's bug: hosts of the phase not started yet are not started. On
    Ctrl-C/SIGTERM (or any failure of this loop): cancel what has not started, stop running and waiting hosts at
    their next step boundary (a waiting host's next look is refused), record their results, re-raise."""
    queue = list(phase_hosts)
    futures, cut = track  # every started host's future (run_fleet collects them after a second Ctrl-C)
    pending: set = set()
    waiting: list[_Waiting] = []  # a heap by due time

    def submit(call, *args) -> None:
        f = pool.submit(call, *args)
        futures[f] = host_name(args[-1]) if call is _call else args[0].name
        pending.add(f)

    def start_more() -> None:  # a step starts only when a fork is free: nothing queued can slip past a stop
        now = time.monotonic()
        while waiting and waiting[0].due <= now and len(pending) < forks:  # a waiting host's look comes first
            submit(_resume, heapq.heappop(waiting))
        while queue and len(pending) < forks:
            submit(_call, fn, queue.pop(0))
        display.running([futures[f] for f in pending] + [w.name for w in waiting])

    try:
        start_more()
        while pending or waiting:
            # until the next look is due, if a fork is free for it; else until a step ends (never a zero
            # timeout while every fork is busy: that spun the runner, taking a core from the hosts' work)
            timeout = 0.5
            if waiting and len(pending) < forks:
                timeout = min(0.5, max(0.0, waiting[0].due - time.monotonic()))
            if pending:
                finished, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            else:
                finished = set()
                time.sleep(timeout)
            for f in finished:
                pending.discard(f)
                r = f.result()
                if isinstance(r, _Waiting):
                    heapq.heappush(waiting, r)
                    continue
                done[futures[f]] = r
                display.done(r)
                if r.data.get(UNEXPECTED_ERROR):
                    queue.clear()
            start_more()
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        if interrupted:
            cut.extend(futures[f] for f in pending)
            cut.extend(w.name for w in waiting)
        budget.request_stop(
            f"interrupted ({getattr(exc, 'signal_name', 'SIGINT')})"
            if interrupted
            else "stopped after an internal error"
        )
        for f in pending:
            f.cancel()
        ended = [f.result() for f in pending if not f.cancelled()] + list(waiting)
        waiting.clear()
        for value in ended:
            r = _to_end(value)
            done[r.host] = _mark_interrupted(r) if interrupted else r
            display.done(r)
        raise
