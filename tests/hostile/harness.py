"""The fault campaign's machinery: run one bad input or fault the way a user meets it and classify what happened.

A case runs the real task surface in-process (invoke's Program over tasks.py, stdout/stderr captured) or a
library entry point, and is judged on five counts -- the tally in docs/RELIABILITY.md:

* traceback:          an exception other than a clean exit reached the user (or "Traceback" was printed);
* silently accepted:  exit code 0 where the input is bad;
* unclear:            the message does not say what the case expects (what/where/how to fix);
* wrong writes:       the BMC saw more writes (PATCH/POST/PUT/DELETE of settings, resets) than allowed;
* secrets leaked:     a password/token value appears in stdout, stderr or the --json report.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = ("tracebacks", "unclear", "silently accepted", "wrong writes", "secrets leaked", "control codes")
# a terminal control character that reached the output raw (numaforge.textsafe escapes them; \n and \t are text)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@dataclass
class Outcome:
    code: int
    output: str  # stdout + stderr + report text
    exception: BaseException | None = None
    writes: int = 0  # writes the BMC (or the file system) saw that it should not have
    secrets: list = field(default_factory=list)  # values known only after the run (session tokens)
    shown: str | None = None  # what reached the terminal (stdout + stderr), when not all of output


@dataclass
class Case:
    id: str
    area: str  # inventory, profile, vendor-map, yaml, secrets, cli, bmc, ssh
    run: Callable[[Path], Outcome]  # gets a fresh temporary directory
    message: str  # regex the output must match (what went wrong, clearly)
    code: int | None = None  # expected exit code (None: any non-zero)
    secrets: tuple[str, ...] = ()  # values that must appear nowhere
    tier: str = "core"  # core or bmc (pytest marker)
    ok: bool = False  # True: the input is fine and must be accepted (a regression guard)

    def judge(self, out: Outcome) -> list[str]:
        """The categories this outcome falls into (empty: the case passed)."""
        bad = []
        from numaforge.errors import NumaforgeError

        clean = (SystemExit, NumaforgeError)
        if (out.exception is not None and not isinstance(out.exception, clean)) or "Traceback" in out.output:
            bad.append("tracebacks")
        if self.ok:
            if out.code != 0:
                bad.append("unclear")
        elif out.code == 0:
            bad.append("silently accepted")
        elif self.code is not None and out.code != self.code:
            bad.append("unclear")
        if not re.search(self.message, re.sub(r"[ \t]*\n[ \t]*", " ", out.output), re.S):
            if "unclear" not in bad and "silently accepted" not in bad:
                bad.append("unclear")
        if out.writes:
            bad.append("wrong writes")
        if any(s and s in out.output for s in (*self.secrets, *out.secrets)):
            bad.append("secrets leaked")
        if RAW_CONTROL.search(out.output if out.shown is None else out.shown):  # reports are JSON: data
            bad.append("control codes")
        return bad


def _program():
    sys.path.insert(0, str(ROOT))
    try:
        import tasks
    finally:
        sys.path.pop(0)
    from invoke import Program

    from numaforge.cli.main import adopt

    program = Program(namespace=tasks.ns, name="invoke", binary="invoke")
    adopt(program)  # the parse rules the `invoke` command gets from tasks.py
    return program, tasks.ns


def _task_help(ns) -> dict:
    return {name: dict(ns[name].help or {}) for name in ns.task_names}


def cli(*args: str, report: Path | None = None, cwd: Path = ROOT) -> Outcome:
    """`invoke ARGS...` in this process; the report file (if any) is read into the output."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    exc: BaseException | None = None
    old = Path.cwd()
    old_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"  # rich reads it when a console is made: messages are judged unwrapped
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                program, ns = _program()
                saved = _task_help(ns)  # invoke pops each option's help text while parsing
                try:
                    program.run(["invoke", *args], exit=True)
                finally:
                    for name, helps in saved.items():
                        ns[name].help = helps
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                exc = e
            except BaseException as e:
                import traceback

                code, exc = 1, e
                err.write("Traceback (caught by the campaign):\n" + traceback.format_exc())
    finally:
        os.chdir(old)
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    text = shown = out.getvalue() + err.getvalue()
    if report is not None and report.is_file():
        text += report.read_text()
    return Outcome(code, text, exc, shown=shown)


def call(fn: Callable[[], object]) -> Outcome:
    """A library entry point: a NumaforgeError is a clean failure (its exit code, its rendered message)."""
    from numaforge.errors import NumaforgeError

    try:
        fn()
    except NumaforgeError as exc:
        return Outcome(getattr(exc, "exit_code", 1), exc.render(), exc)
    except BaseException as exc:
        import traceback

        return Outcome(1, "Traceback (caught by the campaign):\n" + traceback.format_exc(), exc)
    return Outcome(0, "")


@dataclass
class Tally:
    counts: dict = field(default_factory=lambda: {c: 0 for c in CATEGORIES})
    per_area: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)
    total: int = 0

    def add(self, case: Case, bad: list[str]) -> None:
        self.total += 1
        area = self.per_area.setdefault(case.area, {"cases": 0, "clear": 0})
        area["cases"] += 1
        if not bad:
            area["clear"] += 1
        for b in bad:
            self.counts[b] += 1
        if bad:
            self.failures.append((case.id, bad))

    def render(self) -> str:
        lines = [
            f"{self.total} cases: {self.total - len(self.failures)} handled clearly",
            "  " + ", ".join(f"{k}: {v}" for k, v in self.counts.items()),
        ]
        for area, a in sorted(self.per_area.items()):
            lines.append(f"  {area:<12} {a['clear']:>3}/{a['cases']:<3} clear")
        for cid, bad in self.failures:
            lines.append(f"  FAIL {cid}: {', '.join(bad)}")
        return "\n".join(lines)
