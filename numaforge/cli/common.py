"""Shared plumbing for tasks: the run's shared options, inventory path, host selection, output, error handling,
reports, --json and --junit."""

from __future__ import annotations

import functools
import json as _json
import os
import signal
import sys
import threading
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from invoke.exceptions import Exit
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import display, journal, paths, safeio
from ..display import esc
from ..errors import NumaforgeError, SelectionError
from ..fleet import Hangup, Rollout, Terminated
from ..lazy import lazy_module
from ..report import DONE, Report, host_status, junit_xml
from ..secrets import redact
from ..textsafe import has_control, printable
from .values import Selection

if TYPE_CHECKING:
    from ..inventory import loader as inventory_loader
    from ..lab import services as lab_services
else:  # every task imports this module; these only when a task loads an inventory (numaforge.lazy)
    inventory_loader = lazy_module("numaforge.inventory.loader")
    lab_services = lazy_module("numaforge.lab.services")

DEFAULT_INVENTORY = "lab"
DEBUG_ENV = "NUMAFORGE_DEBUG"  # =1: as -v/--verbose
REDFISH_LOG_ENV = "NUMAFORGE_REDFISH_LOG"  # numaforge.bios.deadline.LOG_ENV: the redfish library's log, masked
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
    verbose: bool = False


RUN = Run()


class Output:
    """Where tasks print. ``table``: rich tables and colour; ``plain`` (stdout not a terminal, or --output plain):
    no boxes, no wrapping, one table row per line; ``json``: human output goes to stderr, stdout gets the report.
    """

    def __init__(self, stderr: bool = False):
        self.stderr = stderr
        self.mode = "table"
        self.configure(self.mode)

    def configure(self, mode: str, to_stderr: bool = False) -> None:
        """``to_stderr``: stdout carries a report (``--json -``), so people's output goes to stderr. Colour: off
        with --no-color (numaforge.display.set_colour) or a non-empty $NO_COLOR (rich reads it), and in plain
        mode."""
        self.mode = mode
        err = self.stderr or mode == "json" or to_stderr
        self._rich = Console(stderr=err, highlight=False, emoji=False, no_color=display.no_color())
        self._plain = Console(stderr=err, highlight=False, emoji=False, no_color=True, soft_wrap=True, width=100000)

    @property
    def rich(self) -> Console:
        """The console to hand to rich widgets (Progress)."""
        return self._rich if self.mode == "table" else self._plain

    def print(self, *objects: Any, **kw: Any) -> None:
        objects = tuple(_controls_escaped(o) for o in objects)
        if self.mode == "table":
            self._rich.print(*objects, **kw)
            return
        kw.pop("soft_wrap", None)
        for obj in objects:
            if isinstance(obj, Table):  # one print of all lines: rich's per-call cost, paid per row, was most of
                # a 50-host run's output time
                self._plain.print("\n".join(plain_table(obj)), markup=False, soft_wrap=True)
            else:
                self._plain.print(obj, soft_wrap=True, **kw)
        if not objects:
            self._plain.print()


def _controls_escaped(obj: Any) -> Any:
    """``obj`` with terminal control characters in its text shown as escapes (numaforge.textsafe): whatever
    a BMC, host or inventory said, nothing printed here clears the screen or retitles the window."""
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, Text):
        if has_control(obj.plain):
            return Text(printable(obj.plain), style=obj.style)
        return obj
    if isinstance(obj, Table):
        if obj.title is not None:
            obj.title = _controls_escaped(obj.title)
        for col in obj.columns:
            col.header = _controls_escaped(col.header)
            col._cells[:] = [_controls_escaped(c) for c in col._cells]
    return obj


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


def begin_run(
    c: Any,
    task: str,
    options: dict,
    write: bool = False,
    all: bool = False,
    output: str | None = None,
    junit: str | None = None,
) -> None:
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
    RUN.task, RUN.options, RUN.write, RUN.all, RUN.output, RUN.junit = (
        task,
        dict(options),
        write,
        bool(all),
        mode,
        junit,
    )


def set_style(verbose: bool = False, no_color: bool = False) -> None:
    """-v/--verbose and --no-color, first thing in every task (before its options are checked, so their errors
    follow them too). ``verbose``: an internal error's traceback and the redfish library's log (masked);
    ``no_color``: every console without colour (a non-empty $NO_COLOR does the same: rich reads it)."""
    RUN.verbose = bool(verbose)
    if verbose:
        os.environ[REDFISH_LOG_ENV] = "1"
    display.set_colour(not no_color)
    console.configure(console.mode)
    err_console.configure(err_console.mode)


def _config(c: Any) -> dict:
    try:
        return dict(c.config.get("numaforge", {}) or {})
    except AttributeError:
        return {}


def project_root() -> Path:
    return paths.project_dir()


INVENTORY_ENV = "NUMAFORGE_INVENTORY"


def inventory_path(c, inventory: str | None) -> str:
    """--inventory, else $NUMAFORGE_INVENTORY, else the config's numaforge.inventory, else `lab`; `lab` is the
    inventory lab-up wrote. A relative path is taken from the current directory, else from the project directory."""
    from_env = os.environ.get(INVENTORY_ENV)
    if inventory is None and from_env is not None:
        if not from_env.strip():
            raise SelectionError(  # like `--inventory ''`: an empty value never means the lab inventory
                f"${INVENTORY_ENV} is set but empty",
                INVENTORY_ENV,
                f"set it to an inventory file or `lab`, or unset it (unset {INVENTORY_ENV})",
            )
        inventory = from_env
    configured = _config(c).get("inventory")
    if inventory is None and isinstance(configured, str) and not configured.strip():
        raise SelectionError(  # like `--inventory ''`: an empty value never means the lab inventory
            "the config's numaforge.inventory is empty",
            "numaforge.inventory (numaforge.yaml / invoke.yaml)",
            "set it to an inventory file or `lab`, or remove the key to use the default (lab)",
        )
    spec = inventory or configured or DEFAULT_INVENTORY
    if spec == "lab":  # before the first lab-up: the template's default ports, with this user's state paths
        p = lab_services.lab_inventory_path()
        return str(p if p.is_file() else lab_services.write_lab_inventory())
    p = Path(spec).expanduser()
    if not p.is_absolute() and not p.exists() and (paths.project_dir() / p).exists():
        p = paths.project_dir() / p
    return str(p)


def load_selected(c, report: Report, select: Selection):
    """Load the inventory and return the selected hosts; records the inventory path in the report.

    A task that changes hosts (``write=True``) on an inventory with several hosts needs an explicit selection
    (--host/--group/--limit/--all): it never falls back to "every host" silently.
    """
    path = inventory_path(c, select.inventory)
    report.inventory = path
    inv = inventory_loader.load_inventory(
        path, allow_plaintext_secrets=select.allow_plaintext_secrets, vault_password_file=select.vault_password_file
    )
    if RUN.write and not (select.narrowed or select.all) and len(inv.hosts) > 1:
        raise SelectionError(
            f"{RUN.task} changes hosts and no host was selected; {path} has {len(inv.hosts)} hosts",
            path,
            "select with --host NAME, --group NAME or --limit PATTERN, or pass --all for every host of the inventory",
        )
    return inv, inv.select(list(select.host), list(select.group), select.limit)


def selected_inventory(report: Report) -> Path:
    """The inventory file load_selected() read, resolved: the resume journals' keys name it."""
    if report.inventory is None:
        raise RuntimeError("selected_inventory() before load_selected(): no inventory was read")
    return Path(report.inventory).resolve()


@contextmanager
def resume_journal(report: Report, key: str, rollout: Rollout) -> Iterator[journal.Journal]:
    """The run's resume journal (docs/journal.md), opened only once this run holds it: a second run of the same
    command waits (--wait-lock) or fails naming the holder; it never resumes from a journal another live run is
    still writing (the hosts' own write locks are numaforge.fleet's)."""
    with journal.open_held(key, task=rollout.lock or RUN.task, wait=rollout.wait_lock) as j:
        resumed = j.hosts()
        if resumed:
            console.print(
                esc(
                    f"resuming an interrupted run from {j.path}: "
                    + ", ".join(f"{h} ({'/'.join(p)})" for h, p in resumed.items())
                )
            )
        report.data["journal"] = {"path": str(j.path), "resumed": resumed}
        yield j


def execute(task: str, body: Callable[[Report], None], json: str | None = None, options: dict | None = None) -> Report:
    """Run body(report); print the summary; write --json / --junit; map errors to a message and exit code.

    The report records every option the task was called with (``RUN.options``; ``options`` adds to them).
    Ctrl-C / SIGTERM / SIGHUP: the summary says "interrupted", the --json report is written, exit 130 / 143 /
    129 (:class:`Signals`); an unexpected exception is a bug: no traceback for the user (``-v`` or
    ``NUMAFORGE_DEBUG=1`` shows it), exit 70, and the report says so."""
    opts = dict(RUN.options) if RUN.task == task else {}
    opts.update({k: v for k, v in (options or {}).items() if k not in opts})
    report = Report(task, options=opts)
    junit = RUN.junit if RUN.task == task else None
    # --json - puts the report on standard output: everything for humans goes to standard error then
    to_stdout = json == safeio.STDOUT
    try:  # bad report paths are refused before any work is done
        safeio.check_output(json, "--json")
        safeio.check_output(junit, "--junit")
    except NumaforgeError as exc:
        err_console.print(f"[bold red]error[/]: {esc(exc.render())}")
        raise Exit(code=exc.exit_code) from None
    if to_stdout:
        console.configure(console.mode, to_stderr=True)
    with Signals() as signals:
        exit_code = _run_body(task, body, report, signals)
        _write_outputs(report, task, json, junit, to_stdout)
        _exit_unless_ok(report, exit_code, json, signals.late)
    return report


def refuse(task: str, options: dict, exc: NumaforgeError, json: Any, junit: Any, output: Any) -> None:
    """A run refused before any host (the one preflight of every task, numaforge.cli.optionsets: a bad option or
    environment value, exit 2) writes its --json report (and --junit, and the report on stdout for
    ``--output json``) all the same: status "refused", the error (what, where, fix), no host. A CI job then reads
    why from the file it always reads -- not a missing file, nor the previous run's report left at that path
    (docs/operating.md, "Refused runs"). A report path that is itself the refused value, or that cannot be
    written, gets nothing: the message on stderr says why."""
    report = Report(task, options=dict(options))
    report.error, report.refused = exc, True
    said = exc.render()
    writers: list[tuple[Any, str, Callable[[str], Any]]] = [
        (json, "--json", report.write),
        (junit, "--junit", lambda p: safeio.write_output(p, junit_xml(report, f"numaforge.{task}"), "--junit")),
    ]
    for path, option, write in writers:
        if not isinstance(path, str) or not path or option in said:
            continue
        try:
            safeio.check_output(path, option)
            write(path)
        except NumaforgeError:
            continue  # the refusal's message stands alone; this path's own fault shows on the next run
        if path != safeio.STDOUT:
            _quietly(functools.partial(err_console.print, f"{option[2:]} report of the refused run: {esc(path)}"))
    if output == "json" and "--output" not in said and json != safeio.STDOUT:
        _quietly(lambda: print(_json.dumps(redact(report.as_dict()), indent=2, default=str)))


class Signals:
    """The run's signal handlers, installed for the task's whole run in the main thread and restored after it:
    SIGINT (Ctrl-C) raises KeyboardInterrupt (exit 130) even when the process was started with SIGINT
    ignored (a job started with `&` from a script inherits that: its Ctrl-C/`kill -INT` was lost and the run
    went on to the end, exit 0); SIGTERM raises fleet.Terminated (143); SIGHUP raises fleet.Hangup (129),
    unless SIGHUP was ignored at start (`nohup` asks the run to outlive the terminal). After :meth:`defer`
    (the summary and reports are being written) a signal is only noted in ``late``."""

    RAISES: dict[int, type[KeyboardInterrupt]] = {
        signal.SIGINT: KeyboardInterrupt,
        signal.SIGTERM: Terminated,
        signal.SIGHUP: Hangup,
    }

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}
        self.deferred = False
        self.late: KeyboardInterrupt | None = None

    def __enter__(self) -> "Signals":
        if threading.current_thread() is threading.main_thread():
            for signum in self.RAISES:
                if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                    continue  # nohup
                self.previous[signum] = signal.signal(signum, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

    def defer(self) -> None:
        self.deferred = True

    def _handler(self, signum: int, frame: Any) -> None:
        exc = self.RAISES[signum]()
        if self.deferred:
            self.late = self.late or exc
            return
        raise exc


def _run_body(task: str, body: Callable[[Report], None], report: Report, signals: "Signals") -> int | None:
    """body(report), its errors recorded in the report; the exit code of an interruption (None otherwise). Once
    the body has ended, however it ended, a signal is noted, not raised (``signals.defer``): the summary and the
    reports are written whole."""
    try:
        body(report)
        signals.defer()
    except NumaforgeError as exc:
        signals.defer()
        report.error = exc
        # a refusal before any host was touched (the gate's settings, a write task with no selection: the error
        # classes marked ``refusal``, none of a step that did work): the report says "refused", as the task
        # wrapper's preflight refusals do (refuse())
        report.refused = exc.refusal and not any(h.steps for h in report.hosts)
        _unfinished(report, "failed", exc.what)
    except KeyboardInterrupt as exc:
        # Ctrl-C, SIGTERM, SIGHUP (fleet.Terminated/Hangup); fleet.Interrupted has the results
        signals.defer()
        report.interrupted = getattr(exc, "signal_name", "SIGINT")
        outcome = getattr(exc, "outcome", None)
        if outcome is not None:
            have = {h.host for h in report.hosts}
            report.hosts.extend(r for r in outcome.results if r.host not in have)
            report.data["fleet"] = outcome.as_dict()
        _unfinished(report, "interrupted", f"interrupted ({report.interrupted})")
        return getattr(exc, "exit_code", 130)
    except Exception as exc:  # a bug: no traceback for the user, a non-zero exit and a report that says so
        signals.defer()
        report.error = InternalError(
            f"internal error (a bug; please report it): {type(exc).__name__}: {exc}",
            task,
            f"re-run with -v (or {DEBUG_ENV}=1) for the traceback",
        )
        _unfinished(report, "failed", report.error.what)
        if RUN.verbose or os.environ.get(DEBUG_ENV) == "1":
            traceback.print_exc()
    return None


def _unfinished(report: Report, status: str, why: str) -> None:
    """The run ended early (an error or an interrupt): a host whose last step did not end well is not done,
    whatever its status said before that step (e.g. an unreachable host: its connection step failed)."""
    for h in report.hosts:
        if host_status(h.status) in DONE and h.steps and h.steps[-1].status == "failed":
            h.status = status
            h.message = f"{h.message}; {why}" if h.message else why


def _write_outputs(report: Report, task: str, json: str | None, junit: str | None, to_stdout: bool) -> None:
    """The summary, then --json, --junit and the JSON of --output json; a report that cannot be written keeps
    the run's own error first. A terminal that went away (SIGHUP) never stops the reports from being written."""
    _quietly(lambda: report.print_summary(console))
    if json:
        try:
            written = report.write(json)
        except NumaforgeError as exc:  # e.g. the path changed under us: say so, keep the run's own error
            report.error = report.error or exc
        else:
            if not to_stdout:
                _quietly(lambda: console.print(f"report: {esc(written)}"))
    if junit:
        try:
            junit_file = safeio.write_output(junit, junit_xml(report, f"numaforge.{task}"), "--junit")
        except NumaforgeError as exc:
            report.error = report.error or exc
        else:
            _quietly(lambda: console.print(f"junit: {esc(junit_file)}"))
    if console.mode == "json" and not to_stdout:
        _quietly(lambda: print(_json.dumps(redact(report.as_dict()), indent=2, default=str)))
    if to_stdout:
        console.configure(console.mode)


def _quietly(show: Callable[[], Any]) -> None:
    """Print, unless the terminal is gone (SIGHUP: EIO; a closed pipe: EPIPE, which rich answers with
    SystemExit(1)): the run's reports and exit code still count, and what could not be shown goes to /dev/null
    (else Python's last flush fails and turns the exit code into 120)."""
    try:
        show()
    except (OSError, SystemExit):
        _output_gone()


def _output_gone() -> None:
    """Point each standard stream that can no longer be written (its flush fails) at /dev/null."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
            continue
        except (OSError, ValueError):
            pass
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):  # a stream without a descriptor (captured in tests)
            pass
        finally:
            os.close(devnull)


def _exit_unless_ok(
    report: Report, exit_code: int | None, json: str | None, late: KeyboardInterrupt | None = None
) -> None:
    """Exit 130/143/129 for an interrupted run, the error's code for a failed one, 1 when a host failed. A signal
    that came while the summary and reports were written (``late``) still ends the run with its code."""
    if report.interrupted:
        fleet = report.data.get("fleet") or {}
        counts = Counter(host_status(h.status) for h in report.hosts)
        _quietly(
            lambda: err_console.print(
                f"[bold red]interrupted[/] ({report.interrupted}): {counts['changed'] + counts['unchanged']} "
                f"host(s) done, {counts['interrupted']} interrupted, {counts['failed']} failed, "
                f"{counts['not-run'] or len(fleet.get('not_run') or [])} not run; what each host wrote is in the "
                "summary above" + (" and the --json report" if json else "") + "; re-run the same command to resume"
            )
        )
        raise Exit(code=exit_code or 130)
    if report.error is not None:
        err = report.error
        _quietly(lambda: err_console.print(f"[bold red]error[/]: {esc(err.render())}"))
        raise Exit(code=getattr(err, "exit_code", 1))
    if not report.ok:
        _quietly(lambda: _print_not_ok(report))
        raise Exit(code=1)
    if late is not None:
        sig = getattr(late, "signal_name", "SIGINT")
        _quietly(
            lambda: err_console.print(
                f"[bold red]interrupted[/] ({sig}) after the run had finished, while its summary and reports "
                "were written: they are complete"
            )
        )
        raise Exit(code=getattr(late, "exit_code", 130))


def _print_not_ok(report: Report) -> None:
    """Why the run is not ok: the hosts that ran and failed ("failed on"), then the hosts never reached ("not
    run") with why, then selected hosts with no result."""
    reason = (report.data.get("fleet") or {}).get("reason")
    failed = [h.host for h in report.hosts if host_status(h.status) in ("failed", "interrupted")]
    not_run = [h.host for h in report.hosts if host_status(h.status) == "not-run"]
    missing = report.missing_hosts()
    if failed or not (not_run or missing):
        err_console.print(
            f"[bold red]failed[/] on: {esc(', '.join(failed) or '-')}"
            + (f" ({esc(reason)})" if reason and not not_run else "")
        )
    if not_run:
        err_console.print(
            f"[bold yellow]not run[/] (skipped): {esc(', '.join(not_run))}" + (f" ({esc(reason)})" if reason else "")
        )
    if missing:
        err_console.print(f"[bold red]no result[/] for: {esc(', '.join(missing))}")


class InternalError(NumaforgeError):
    """An exception that is not a NumaforgeError reached the task surface: a bug."""

    exit_code = 70  # EX_SOFTWARE


def honour_sigint() -> None:
    """Ctrl-C / `kill -INT` stops a run even when this process was started with SIGINT ignored: a command started
    with `&` from a script (no job control) inherits SIG_IGN, and Python then never turns SIGINT into
    KeyboardInterrupt -- the interrupt was lost and the run applied everything and exited 0. Called when the CLI
    loads (before any option is read); :class:`Signals` covers the task's run itself."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


honour_sigint()


def eprint(msg: str) -> None:
    print(printable(redact(msg)), file=sys.stderr)


__all__ = ["RUN", "console", "err_console", "execute", "load_selected", "inventory_path", "junit_xml"]
